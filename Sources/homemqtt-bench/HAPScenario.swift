import Foundation
import HAP
import HomeModel
import Harness
import NIOCore

/// Scenario 4: our HAP controller against a real HAP-python accessory, beside aiohomekit doing
/// the same against the same accessory with the same pairing, one after the other.
enum HAPScenario {
    static let name = "4 HAP"
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let aiohomekitPython = root.appendingPathComponent(".venv-bench/bin/python")
    static let aiohomekitScript = root.appendingPathComponent("Scripts/bench-aiohomekit.py")

    struct Samples {
        var verify: [Double] = []
        var read: [Double] = []
        var write: [Double] = []
        /// The client process's CPU time per read and per write, in seconds.
        var readCPU = 0.0
        var writeCPU = 0.0
    }

    /// This process's CPU time (user + system) so far, in seconds.
    static func processCPU() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    static func run(scale: Scale) async throws -> [Row] {
        if let reason = HAPPeer.unavailableReason {
            return [Row(name, "read/write/pair-verify latency", ours: "blocked", met: "blocked: \(reason)")]
        }
        let (verifies, operations) = scale == .full ? (50, 1000) : (3, 10)
        let state = try TemporaryDirectory(prefix: "homemqtt-bench-hap")
        // A single lightbulb (aid 1), not the bridge: one characteristic is all the loops touch.
        let peer = try await HAPPeer.start(state: state.file("peer.json"), bridge: false)
        do {
            let rows = try await measure(peer: peer, state: state, verifies: verifies, operations: operations)
            await peer.stop()
            return rows
        } catch {
            await peer.stop()
            throw error
        }
    }

    static func measure(peer: HAPPeer, state: TemporaryDirectory, verifies: Int, operations: Int) async throws -> [Row]
    {
        let controller = HAPController(
            store: HAPPairingStore(directory: URL(fileURLWithPath: state.file("pairings"))), logger: quietLogger)
        let pairing = try await HAPPeer.pair(controller, port: peer.port, name: "Bench Peer")
        let target = try await brightness(controller, pairing)

        var ours = Samples()
        _ = try await peerHandling(peer)
        for _ in 0..<verifies {
            let start = ContinuousClock.now
            let connection = try await controller.connect(pairing)
            ours.verify.append(elapsed(start))
            await connection.close()
        }
        let verifyHandling = try await peerHandling(peer)
        let connection = try await controller.connect(pairing)
        _ = try await peerHandling(peer)
        (ours.read, ours.readCPU) = try await timedReads(connection, target, operations)
        let readFloor = try await peerHandling(peer)
        // The same reads from a caller on the connection's own event loop (as the HAP source's
        // actor could be): what the two thread switches of a caller elsewhere cost.
        let onLoop = OnLoop(connection.eventLoop)
        let loopReads = try await onLoop.reads(connection, target, operations)
        _ = try await peerHandling(peer)
        (ours.write, ours.writeCPU) = try await timedWrites(connection, target, operations)
        let writeFloor = try await peerHandling(peer)
        await connection.close()
        // A read request is about 130 bytes on the wire, its answer about 100.
        let echoAnswer = try await peer.command("echo").split(separator: " ")
        guard echoAnswer.first == "OK", let echoPort = echoAnswer.last.flatMap({ Int($0) }) else {
            throw BenchError("the HAP peer answered `echo` with \(echoAnswer.joined(separator: " "))")
        }
        let echo = try await TransportFloor.echoRoundTrips(port: echoPort, size: 130, count: operations)

        var rows: [Row] = []
        let theirs: Samples
        let version: String
        switch try await aiohomekit(
            pairing: pairing, port: peer.port, target: target, state: state, verifies: verifies, operations: operations)
        {
        case .success(let (samples, v)):
            theirs = samples
            version = v
        case .failure(let reason):
            return [
                Row(
                    name, "pair-verify median", ours: Format.micros(Stats.median(ours.verify)),
                    met: "blocked: \(reason)"),
                Row(name, "read median", ours: Format.micros(Stats.median(ours.read)), met: "blocked"),
                Row(name, "write median", ours: Format.micros(Stats.median(ours.write)), met: "blocked"),
            ]
        }
        for (metric, mine, other, count) in [
            ("pair-verify (TCP connect + verify) median of \(verifies)", ours.verify, theirs.verify, verifies),
            ("read (GET /characteristics) median of \(operations)", ours.read, theirs.read, operations),
            ("write (PUT /characteristics) median of \(operations)", ours.write, theirs.write, operations),
        ] {
            _ = count
            let ratio = Stats.median(mine) / Stats.median(other)
            rows.append(
                Row(
                    name, metric, ours: Format.micros(Stats.median(mine)),
                    baseline: "aiohomekit \(version) " + Format.micros(Stats.median(other)),
                    ratio: Format.ratio(ratio)))
        }
        // The issue's measure: each client's share, its latency minus the peer's own handling;
        // and the least share any client can have, a round trip through the peer's loop.
        for (metric, mine, other, floor) in [
            ("read latency minus the floor", ours.read, theirs.read, readFloor.median),
            ("write latency minus the floor", ours.write, theirs.write, writeFloor.median),
        ] {
            let (myShare, theirShare) = (Stats.median(mine) - floor, Stats.median(other) - floor)
            let ratio = myShare / theirShare
            rows.append(
                Row(
                    name, metric, ours: Format.micros(myShare),
                    baseline: "aiohomekit \(version) " + Format.micros(theirShare), ratio: Format.ratio(ratio),
                    target: "≤ 0.80×", met: Format.met(ratio <= 0.8)))
        }
        let theirReadShare = Stats.median(theirs.read) - readFloor.median
        let echoShare = Stats.median(echo) / theirReadShare
        rows.append(
            Row(
                name, "transport floor: a blocking client's echo round trip through the peer's loop, no HAP",
                ours: Format.micros(Stats.median(echo)),
                baseline: "aiohomekit \(version) read minus floor " + Format.micros(theirReadShare),
                ratio: Format.ratio(echoShare), target: "≤ 0.80× for 0.80× to be reachable",
                met: Format.met(echoShare <= 0.8)))
        // The client's own share: CPU time of the client's process per request (the peer's
        // handling, its sockets and its crypto are in the latency of both clients alike).
        for (metric, mine, other) in [
            ("client CPU per read (process time ÷ \(operations))", ours.readCPU, theirs.readCPU),
            ("client CPU per write (process time ÷ \(operations))", ours.writeCPU, theirs.writeCPU),
        ] {
            let ratio = mine / max(other, 1e-9)
            rows.append(
                Row(
                    name, metric, ours: Format.micros(mine), baseline: "aiohomekit \(version) " + Format.micros(other),
                    ratio: Format.ratio(ratio), target: "≤ 0.50×", met: Format.met(ratio <= 0.5)))
        }
        let loopRatio = Stats.median(loopReads) / Stats.median(theirs.read)
        rows.append(
            Row(
                name, "read from a caller on the connection's event loop, median of \(operations)",
                ours: Format.micros(Stats.median(loopReads)),
                baseline: "aiohomekit \(version) " + Format.micros(Stats.median(theirs.read)),
                ratio: Format.ratio(loopRatio)))
        // The floor: what the accessory itself spends on each request. A client's latency
        // includes it whatever the client does, so a ratio below floor ÷ aiohomekit cannot be had.
        // Pair-verify is two requests (M1, M3), each with the accessory's own key agreement
        // and signature: its floor is their sum per verify.
        let verifyFloor = verifyHandling.total / Double(max(verifies, 1))
        for (metric, floor, other) in [
            ("pair-verify (M1 + M3, mean of \(verifies))", verifyFloor, theirs.verify),
            ("read (median of \(readFloor.count))", readFloor.median, theirs.read),
            ("write (median of \(writeFloor.count))", writeFloor.median, theirs.write),
        ] {
            let share = floor / Stats.median(other)
            rows.append(
                Row(
                    name, "floor: HAP-python's own handling of each \(metric)",
                    ours: Format.micros(floor),
                    baseline: "aiohomekit \(version) " + Format.micros(Stats.median(other)),
                    ratio: Format.ratio(share)))
        }
        return rows
    }

    /// The lightbulb's brightness: the characteristic every loop reads and writes.
    /// `count` reads of `target` from this task: each one's latency, and the process's CPU
    /// time per read.
    static func timedReads(_ connection: HAPConnection, _ target: HAPCharacteristicID, _ count: Int) async throws
        -> (latencies: [Double], cpu: Double)
    {
        try await timed(count) { _ in
            let answer = try await connection.readCharacteristics([target])
            guard case .success = answer[target] else {
                throw BenchError("read of \(target) failed: \(String(describing: answer[target]))")
            }
        }
    }

    /// `count` writes of brightness values to `target`: each one's latency, and the process's
    /// CPU time per write.
    static func timedWrites(_ connection: HAPConnection, _ target: HAPCharacteristicID, _ count: Int) async throws
        -> (latencies: [Double], cpu: Double)
    {
        try await timed(count) { n in
            let failures = try await connection.writeCharacteristics([target: ["value": .int(Int64(1 + n % 40))]])
            guard failures.isEmpty else { throw BenchError("write of \(target) failed: \(failures)") }
        }
    }

    /// Runs `operation` `count` times: each run's latency, and the process's CPU time per run.
    private static func timed(_ count: Int, _ operation: (Int) async throws -> Void) async throws
        -> (latencies: [Double], cpu: Double)
    {
        var latencies: [Double] = []
        let cpu = processCPU()
        for n in 0..<count {
            let start = ContinuousClock.now
            try await operation(n)
            latencies.append(elapsed(start))
        }
        return (latencies, (processCPU() - cpu) / Double(max(count, 1)))
    }

    static func brightness(_ controller: HAPController, _ pairing: HAPPairing) async throws -> HAPCharacteristicID {
        let brightness = Catalog.characteristicType(named: "brightness").map {
            StandardUUID.longForm($0.uuid).lowercased()
        }
        var target: HAPCharacteristicID?
        for accessory in try await controller.accessories(of: pairing) {
            for service in accessory.services {
                for c in service.characteristics where StandardUUID.longForm(c.type).lowercased() == brightness {
                    target = HAPCharacteristicID(aid: accessory.aid, iid: c.iid)
                }
            }
        }
        guard let target else { throw BenchError("the peer's lightbulb has no brightness characteristic") }
        return target
    }

    /// The peer's own time per request since the last call (its `timings` command): median, in
    /// seconds, and how many requests.
    static func peerHandling(_ peer: HAPPeer) async throws -> (count: Int, median: Double, total: Double) {
        let answer = try await peer.command("timings").split(separator: " ")
        guard answer.count == 4, answer[0] == "TIMINGS", let count = Int(answer[1]),
            let median = Double(answer[2]), let total = Double(answer[3])
        else {
            throw BenchError("the HAP peer answered `timings` with \(answer.joined(separator: " "))")
        }
        return (count, median / 1e6, total / 1e6)
    }

    enum Outcome { case success((Samples, String)), failure(String) }

    /// Runs Scripts/bench-aiohomekit.py with our pairing handed over in aiohomekit's format.
    static func aiohomekit(
        pairing: HAPPairing, port: Int, target: HAPCharacteristicID, state: TemporaryDirectory,
        verifies: Int, operations: Int
    ) async throws -> Outcome {
        guard FileManager.default.isExecutableFile(atPath: aiohomekitPython.path) else {
            return .failure(
                "no aiohomekit venv at \(aiohomekitPython.path) (python3 -m venv .venv-bench && .venv-bench/bin/pip install aiohomekit==4.0.1)"
            )
        }
        let file = try aiohomekitPairing(pairing, port: port, state: state)
        let result = try await runProcess(
            aiohomekitPython.path,
            [
                aiohomekitScript.path, file, "--aid", String(target.aid), "--iid", String(target.iid),
                "--verifies", String(verifies), "--reads", String(operations), "--writes", String(operations),
            ], timeout: 600)
        guard result.status == 0,
            let object = try? JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any],
            let verify = object["verify"] as? [Double], let read = object["read"] as? [Double],
            let write = object["write"] as? [Double]
        else {
            return .failure("aiohomekit run failed (exit \(result.status)): \(result.standardError.suffix(400))")
        }
        var samples = Samples(verify: verify, read: read, write: write)
        samples.readCPU = object["read_cpu"] as? Double ?? .nan
        samples.writeCPU = object["write_cpu"] as? Double ?? .nan
        return .success((samples, object["version"] as? String ?? "?"))
    }
}

extension HAPScenario {
    /// Our pairing in aiohomekit's format, written to a file in `state`; returns its path.
    static func aiohomekitPairing(_ pairing: HAPPairing, port: Int, state: TemporaryDirectory) throws -> String {
        let data: [String: Any] = [
            "AccessoryPairingID": pairing.accessoryPairingID, "AccessoryLTPK": pairing.accessoryLTPK,
            "iOSPairingId": pairing.controllerPairingID, "iOSDeviceLTSK": pairing.controllerLTSK,
            "iOSDeviceLTPK": pairing.controllerLTPK, "AccessoryIP": "127.0.0.1", "AccessoryPort": port,
            "Connection": "IP",
        ]
        let file = state.file("aiohomekit-pairing.json")
        try JSONSerialization.data(withJSONObject: data).write(to: URL(fileURLWithPath: file))
        return file
    }
}

/// An actor on a HAP connection's event loop, for measuring calls that need no thread switch.
actor OnLoop {
    let loop: any EventLoop
    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.executor.asUnownedSerialExecutor() }
    init(_ loop: any EventLoop) { self.loop = loop }

    func reads(_ connection: HAPConnection, _ target: HAPCharacteristicID, _ count: Int) async throws -> [Double] {
        var out: [Double] = []
        for _ in 0..<count {
            let start = ContinuousClock.now
            _ = try await connection.readCharacteristics([target])
            out.append(elapsed(start))
        }
        return out
    }
}
