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
        var cpu = HAPScenario.processCPU()
        var latencies: [Double] = []
        if onLoop {
            latencies = try await OnLoop(connection.eventLoop).reads(connection, target, reads)
        } else {
            for _ in 0..<reads {
                let start = ContinuousClock.now
                let answer = try await connection.readCharacteristics([target])
                latencies.append(elapsed(start))
                guard case .success = answer[target] else { throw BenchError("read of \(target) failed") }
            }
        }
        let readCPU = (HAPScenario.processCPU() - cpu) / Double(max(reads, 1))
        let readMedian = Stats.median(latencies)
        latencies = []
        cpu = HAPScenario.processCPU()
        for n in 0..<writes {
            let start = ContinuousClock.now
            let failures = try await connection.writeCharacteristics([target: ["value": .int(Int64(1 + n % 40))]])
            latencies.append(elapsed(start))
            guard failures.isEmpty else { throw BenchError("write of \(target) failed: \(failures)") }
        }
        let writeCPU = (HAPScenario.processCPU() - cpu) / Double(max(writes, 1))
        control?.write(Data("disable\n".utf8))
        await connection.close()
        print(
            "reads \(reads): cpu \(Format.micros(readCPU)) per read, median \(Format.micros(readMedian)); "
                + "writes \(writes): cpu \(Format.micros(writeCPU)) per write, median \(Format.micros(Stats.median(latencies)))"
        )
    }
}
