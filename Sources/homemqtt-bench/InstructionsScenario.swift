import Foundation
import HAP
import HomeMQTTApp
import Harness

/// Scenario 7: instructions executed, counted by valgrind's callgrind, so that progress shows
/// through the machine's timing noise. Each figure is a difference of two runs of the same
/// process under callgrind, one doing N operations and one doing none (both after the same
/// warm-up), divided by N: start-up, connecting and stopping cancel out.
/// - set → state round trip: the gateway process (`gateway-child`) on a generated home, the
///   round trips driven from this process as in scenario 2; baseline, the echo client as a
///   process of its own (`echo-child`).
/// - HAP read: our controller's process (`hap-reads-child`) reading the HAP-python peer's
///   brightness over one verified connection; baseline, aiohomekit doing the same reads
///   (`Scripts/bench-aiohomekit.py`) under callgrind.
enum InstructionsScenario {
    static let name = "7 instructions"
    /// Operations done in both runs before the counted ones: first-time costs stay out of the difference.
    static let warmup = 20

    static func run(scale: Scale) async throws -> [Row] {
        if let reason = Callgrind.unavailableReason { throw BenchError(reason) }
        // Made once, before the processes that run it start side by side.
        _ = try Callgrind.benchExecutable()
        let full = scale == .full
        let files = try TemporaryDirectory(prefix: "homemqtt-bench-instr")
        var rows = try await roundTripRows(
            accessories: full ? 100 : 10, roundTrips: full ? 5000 : 100, files: files, profile: true)
        rows += try await notificationRows(
            accessories: files.url.appendingPathComponent("accessories"), changes: full ? 5000 : 100, files: files)
        if ProcessInfo.processInfo.environment["HOMEMQTT_BENCH_NO_HAP"] != nil { return rows }
        rows += try await hapRows(reads: full ? 5000 : 100, pythonReads: full ? 1000 : 20)
        return rows
    }

    // MARK: - The set round trip

    static func roundTripRows(accessories: Int, roundTrips n: Int, files: TemporaryDirectory, profile: Bool)
        async throws -> [Row]
    {
        let directory = files.url.appendingPathComponent("accessories")
        try HomeGenerator.write(to: directory, accessories: accessories, services: 2, shape: .colourLight)
        var totals: [Responder: (none: Int, measured: Int)] = [:]
        for responder in [Responder.gateway, .echo] {
            // Side by side: each on a broker of its own, and callgrind counts one process's instructions.
            async let noneRun = roundTrips(
                responder, count: 0, accessories: directory, outFile: files.file("\(responder)-0.out"))
            async let measuredRun = roundTrips(
                responder, count: n, accessories: directory, outFile: files.file("\(responder)-\(n).out"))
            let (none, measured) = try await (noneRun, measuredRun)
            guard measured > none else {
                throw BenchError("\(responder): \(measured) instructions with \(n) round trips, \(none) with none")
            }
            totals[responder] = (none, measured)
        }
        guard let gateway = totals[.gateway], let echo = totals[.echo] else { return [] }
        let ours = Double(gateway.measured - gateway.none) / Double(n)
        let theirs = Double(echo.measured - echo.none) / Double(n)
        if profile {
            do {
                let path = try await writeProfile(
                    base: files.file("gateway-0.out"), measured: files.file("gateway-\(n).out"), roundTrips: n)
                BenchSettings.notes.withLock {
                    $0.append("scenario 7: the set round trip's top functions per round trip (callgrind): \(path)")
                }
            } catch {
                BenchSettings.notes.withLock { $0.append("scenario 7: no profile written: \(error)") }
            }
        }
        return [
            Row(
                name,
                "set → state round trip: gateway process's instructions per round trip ((I_\(n) − I_0) ÷ \(n), \(accessories)-accessory home)",
                ours: Format.instructions(ours), baseline: "echo client " + Format.instructions(theirs),
                ratio: Format.ratio(ours / theirs)),
            Row(
                name, "the same processes started, ready, stopped, no round trip (I_0)",
                ours: Format.instructions(Double(gateway.none)),
                baseline: "echo client " + Format.instructions(Double(echo.none)),
                ratio: Format.ratio(Double(gateway.none) / Double(echo.none))),
        ]
    }

    /// The process that answers the round trips: the gateway or the echo client.
    enum Responder: String, CustomStringConvertible {
        case gateway, echo
        var description: String { rawValue }
    }

    /// One process under callgrind, on a broker and state of its own, answering `count` round
    /// trips (after `warmup`) from this process; returns the instructions it executed, from its
    /// start to its end on SIGTERM.
    static func roundTrips(_ responder: Responder, count: Int, accessories: URL, outFile: String) async throws -> Int {
        let files = try TemporaryDirectory(prefix: "homemqtt-bench-instr-run")
        return try await withBroker { broker in
            // The echo client reads its connection settings and QoS from the gateway's config.
            let config = try StartupScenario.writeGatewayConfig(
                in: files, broker: broker, accessories: accessories, pollInterval: "0")
            let qos = try HomeMQTTApp.loadConfig(file: config).qos
            return try await CountingSubscriber.with(
                broker: broker, filter: "home/#", statusTopic: "home/$gateway/status",
                matches: { $0.topic.hasSuffix("/brightness/state") }
            ) { subscriber in
                subscriber.reset(recording: true)
                let child = try Callgrind.start(
                    try Callgrind.benchExecutable(), ["\(responder)-child", "--config", config], outFile: outFile)
                do {
                    let request: String
                    let answer: String
                    switch responder {
                    case .gateway:
                        _ = try await subscriber.waitOnline(timeout: 600, what: "the gateway under callgrind") {
                            child.isRunning
                                ? nil
                                : "the gateway under callgrind exited (\(child.exitStatus ?? -1)): \(child.standardError.suffix(600))"
                        }
                        // The first lamp's brightness, as the gateway published it before `online`.
                        guard let state = subscriber.recorded.first?.topic else {
                            throw BenchError("the gateway published no brightness state before online")
                        }
                        (request, answer) = (String(state.dropLast("state".count)) + "set", state)
                    case .echo:
                        try await child.waitForOutput(containing: "ready", timeout: 300)
                        (request, answer) = ("bench/echo/request", "bench/echo/answer")
                    }
                    try await withDeadline(120 + Double(count) * 0.1, "\(count) round trips with the \(responder)") {
                        _ = try await RoundTripScenario.measure(
                            broker: broker, qos: qos, request: request, answer: answer, count: count, warmup: warmup)
                    }
                    return try await Callgrind.finish(child, outFile: outFile, terminate: true, timeout: 120)
                } catch {
                    await child.terminate(grace: 10)
                    throw error
                }
            }
        }
    }

    /// The functions whose own instructions grew most from the run without round trips to the
    /// run with `roundTrips`, per round trip, and the same by library, written with both profiles
    /// to the profile directory (`--profile-dir`); returns the summary's path.
    static func writeProfile(base: String, measured: String, roundTrips: Int) async throws -> String {
        let directory = BenchSettings.profileDirectory.withLock { $0 }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let grown = try await Callgrind.difference(base: base, measured: measured, units: roundTrips)
        let total = grown.map(\.perUnit).reduce(0, +)
        func cell(_ text: String) -> String { text.replacingOccurrences(of: "|", with: "\\|") }
        func line(_ perUnit: Double, _ what: String) -> String {
            String(format: "| %.0f | %.1f %% | ", perUnit, perUnit / total * 100) + cell(what) + " |\n"
        }
        var text = """
            # homemqtt-bench 7 instructions: the gateway process per set → state round trip

            callgrind, self instructions (a function's own, not its callees'), (I_\(roundTrips) − I_0) ÷ \
            \(roundTrips) per function: \(String(format: "%.0f", total)) per round trip in all. The profiles are \
            callgrind.gateway-0.out and callgrind.gateway-\(roundTrips).out beside this file \
            (`callgrind_annotate <file>`).

            ## By function

            | instr per round trip | share | function [object] |
            |---|---|---|

            """
        for (perUnit, function) in grown.prefix(15) {
            // "swift_release [libswiftCore.so]": the object's name without its directory.
            let name =
                function.range(of: " [", options: .backwards).map { function[..<$0.lowerBound] } ?? Substring(function)
            text += line(perUnit, name + " [\(Callgrind.object(of: function))]")
        }
        var objects: [String: Double] = [:]
        for (perUnit, function) in grown { objects[Callgrind.object(of: function), default: 0] += perUnit }
        text += "\n## By object\n\n| instr per round trip | share | object |\n|---|---|---|\n"
        for (object, perUnit) in objects.sorted(by: { $0.value > $1.value }).prefix(10) {
            text += line(perUnit, object)
        }
        let summary = directory + "/set-round-trip.md"
        try await Callgrind.demangled(text).write(toFile: summary, atomically: true, encoding: .utf8)
        for (source, name) in [(base, "callgrind.gateway-0.out"), (measured, "callgrind.gateway-\(roundTrips).out")] {
            let target = directory + "/" + name
            try? FileManager.default.removeItem(atPath: target)
            try FileManager.default.copyItem(atPath: source, toPath: target)
        }
        return summary
    }

    // MARK: - HAP reads

    static func hapRows(reads n: Int, pythonReads: Int) async throws -> [Row] {
        let metric =
            "HAP read: client process's instructions per read ((I_N − I_0) ÷ N, N = \(n), aiohomekit \(pythonReads))"
        if let reason = HAPPeer.unavailableReason {
            return [Row(name, metric, ours: "blocked", met: "blocked: \(reason)")]
        }
        let state = try TemporaryDirectory(prefix: "homemqtt-bench-instr-hap")
        // A single lightbulb (aid 1), as scenario 4's.
        let peer = try await HAPPeer.start(state: state.file("peer.json"), bridge: false)
        do {
            let controller = HAPController(
                store: HAPPairingStore(directory: URL(fileURLWithPath: state.file("pairings"))), logger: quietLogger)
            let pairing = try await HAPPeer.pair(controller, port: peer.port, name: "Bench Peer")
            let target = try await HAPScenario.brightness(controller, pairing)
            let ours = try await perRead(n) { count, outFile in
                let child = try Callgrind.start(
                    try Callgrind.benchExecutable(),
                    [
                        "hap-reads-child", "--pairings", state.file("pairings"), "--accessory",
                        pairing.accessoryPairingID, "--aid", "\(target.aid)", "--iid", "\(target.iid)",
                        "--reads", "\(count)", "--warmup", "\(warmup)",
                    ], outFile: outFile)
                let total = try await Callgrind.finish(child, outFile: outFile, terminate: false, timeout: 600)
                guard child.exitStatus == 0, child.standardOutput.contains("read \(count)") else {
                    throw BenchError(
                        "hap-reads-child failed (\(child.exitStatus ?? -1)): \(child.standardError.suffix(600))")
                }
                return (total, nil)
            }
            guard FileManager.default.isExecutableFile(atPath: HAPScenario.aiohomekitPython.path) else {
                await peer.stop()
                return [
                    Row(
                        name, metric, ours: Format.instructions(ours.perRead),
                        met: "blocked: no aiohomekit venv at \(HAPScenario.aiohomekitPython.path)")
                ]
            }
            let file = try HAPScenario.aiohomekitPairing(pairing, port: peer.port, state: state)
            let theirs = try await perRead(pythonReads) { count, outFile in
                let child = try Callgrind.start(
                    HAPScenario.aiohomekitPython.path,
                    [
                        HAPScenario.aiohomekitScript.path, file, "--aid", "\(target.aid)", "--iid", "\(target.iid)",
                        "--verifies", "0", "--reads", "\(count)", "--writes", "0", "--warmup", "\(warmup)",
                    ], outFile: outFile, environment: ["PYTHONHASHSEED": "0"])
                let total = try await Callgrind.finish(child, outFile: outFile, terminate: false, timeout: 900)
                let object = try? JSONSerialization.jsonObject(with: Data(child.standardOutput.utf8)) as? [String: Any]
                guard child.exitStatus == 0, let object else {
                    throw BenchError(
                        "aiohomekit under callgrind failed (\(child.exitStatus ?? -1)): \(child.standardError.suffix(600))"
                    )
                }
                return (total, object["version"] as? String)
            }
            await peer.stop()
            let ratio = ours.perRead / theirs.perRead
            return [
                Row(
                    name, metric, ours: Format.instructions(ours.perRead),
                    baseline: "aiohomekit \(theirs.version ?? "?") " + Format.instructions(theirs.perRead),
                    ratio: Format.ratio(ratio), target: "≤ 0.50×", met: Format.met(ratio <= 0.5))
            ]
        } catch {
            await peer.stop()
            throw error
        }
    }

    /// (I_count − I_0) ÷ count of a client run by `run(count, outFile)`, which returns the
    /// instructions it counted and the client's version, if it says.
    static func perRead(_ count: Int, _ run: @escaping @Sendable (Int, String) async throws -> (Int, String?))
        async throws -> (perRead: Double, version: String?)
    {
        let profiles = try TemporaryDirectory(prefix: "homemqtt-bench-instr-reads")
        // Side by side, on connections of their own.
        async let noneRun = run(0, profiles.file("reads-0.out"))
        async let measuredRun = run(count, profiles.file("reads-\(count).out"))
        let ((none, _), (measured, version)) = try await (noneRun, measuredRun)
        guard measured > none else {
            throw BenchError("\(measured) instructions with \(count) reads, \(none) with none")
        }
        return (Double(measured - none) / Double(count), version)
    }

    /// `body`, or an error naming `what` once `seconds` have passed.
    static func withDeadline(_ seconds: Double, _ what: String, _ body: @escaping @Sendable () async throws -> Void)
        async throws
    {
        try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                try await body()
                return true
            }
            group.addTask {
                try await Task.sleep(for: .seconds(seconds))
                return false
            }
            let done = try await group.next() ?? false
            group.cancelAll()
            if !done { throw BenchError("timed out after \(Int(seconds)) s: \(what)") }
        }
    }
}
