import ArgumentParser
import Foundation
import HAP
import HomeModel
import Harness

/// Scenario 4's read and write loops alone, against the HAP-python peer, for profilers: run it
/// under `perf record`, `strace -c -f` or `valgrind --tool=callgrind` twice with different
/// counts, and the difference between the two runs is what the extra requests cost, without the
/// pairing, the peer's start and the process's own start-up.
struct HAPProfile: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hap-profile",
        abstract: "Pair with a HAP-python peer, then time N reads and N writes of one characteristic (for profilers).",
        shouldDisplay: false
    )

    @Option(help: "How many reads (GET /characteristics).")
    var reads = 1000

    @Option(help: "How many writes (PUT /characteristics).")
    var writes = 1000

    @Option(
        help:
            "perf's control FIFO (perf record --control fifo:PATH -D -1): recording is enabled for the loops only.")
    var perfControl: String?

    @Flag(
        help: "Read from an actor on the connection's event loop (no thread switch per read) instead of the main task.")
    var onLoop = false

    func run() async throws {
        bootstrapLogging(level: .warning)
        if let reason = HAPPeer.unavailableReason { throw BenchError("no HAP peer: \(reason)") }
        let state = try TemporaryDirectory(prefix: "homemqtt-bench-hap-profile")
        let peer = try await HAPPeer.start(state: state.file("peer.json"), bridge: false)
        do {
            try await loops(peer: peer, state: state)
            await peer.stop()
        } catch {
            await peer.stop()
            throw error
        }
    }

    private func loops(peer: HAPPeer, state: TemporaryDirectory) async throws {
        let controller = HAPController(
            store: HAPPairingStore(directory: URL(fileURLWithPath: state.file("pairings"))), logger: quietLogger)
        let pairing = try await HAPPeer.pair(controller, port: peer.port, name: "Profile Peer")
        // The lightbulb's brightness, as scenario 4 reads and writes it.
        let target = try await HAPScenario.brightness(controller, pairing)
        let connection = try await controller.connect(pairing)
        let control = perfControl.flatMap { FileHandle(forWritingAtPath: $0) }
        control?.write(Data("enable\n".utf8))
        let readCPU: Double
        let readMedian: Double
        if onLoop {
            let cpu = HAPScenario.processCPU()
            readMedian = Stats.median(try await OnLoop(connection.eventLoop).reads(connection, target, reads))
            readCPU = (HAPScenario.processCPU() - cpu) / Double(max(reads, 1))
        } else {
            let (latencies, cpu) = try await HAPScenario.timedReads(connection, target, reads)
            (readMedian, readCPU) = (Stats.median(latencies), cpu)
        }
        let (latencies, writeCPU) = try await HAPScenario.timedWrites(connection, target, writes)
        control?.write(Data("disable\n".utf8))
        await connection.close()
        print(
            "reads \(reads): cpu \(Format.micros(readCPU)) per read, median \(Format.micros(readMedian)); "
                + "writes \(writes): cpu \(Format.micros(writeCPU)) per write, median \(Format.micros(Stats.median(latencies)))"
        )
    }
}
