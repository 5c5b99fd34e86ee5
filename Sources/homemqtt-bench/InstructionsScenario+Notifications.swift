import Foundation
import HomeMQTTApp
import Harness

// Scenario 7's notification row: the throughput path's instructions (scenario 1's), a change in
// the source → the gateway's `state` publish (and the accessory's `$state`), in the gateway process.

extension InstructionsScenario {
    /// The gateway process's instructions per source change: (I_2N − I_N) ÷ N of two runs, each
    /// making `warmup` changes and then N (or 2N) through the child's stdin (`SourceChanges`), and
    /// waiting for every one's `state` before stopping the process. The changes are made in the
    /// gateway's process (the simulator is its source), so the figure includes the simulator's own
    /// handling of each change.
    static func notificationRows(accessories: URL, changes n: Int, files: TemporaryDirectory) async throws -> [Row] {
        // Side by side: each on a broker of its own.
        async let singleRun = notifications(
            count: n, accessories: accessories, outFile: files.file("notify-\(n).out"))
        async let doubleRun = notifications(
            count: 2 * n, accessories: accessories, outFile: files.file("notify-\(2 * n).out"))
        let (single, double) = try await (singleRun, doubleRun)
        guard double > single else {
            throw BenchError("notifications: \(double) instructions with \(2 * n) changes, \(single) with \(n)")
        }
        // Beside the round trip's, for `callgrind_annotate` (the temporary directory goes).
        let directory = BenchSettings.profileDirectory.withLock { $0 }
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            for count in [n, 2 * n] {
                let target = directory + "/callgrind.notify-\(count).out"
                try? FileManager.default.removeItem(atPath: target)
                try FileManager.default.copyItem(atPath: files.file("notify-\(count).out"), toPath: target)
            }
            BenchSettings.notes.withLock {
                $0.append("scenario 7: the notification profiles (callgrind): \(directory)/callgrind.notify-*.out")
            }
        } catch {
            BenchSettings.notes.withLock { $0.append("scenario 7: the notification profiles not kept: \(error)") }
        }
        return [
            Row(
                name,
                "source change → state notification: gateway process's instructions per change "
                    + "((I_\(2 * n) − I_\(n)) ÷ \(n))",
                ours: Format.instructions(Double(double - single) / Double(n)))
        ]
    }

    /// One gateway process under callgrind making `warmup` and then `count` changes; returns the
    /// instructions it executed, from its start to its end on SIGTERM.
    static func notifications(count: Int, accessories: URL, outFile: String) async throws -> Int {
        let files = try TemporaryDirectory(prefix: "homemqtt-bench-instr-notify")
        return try await withBroker { broker in
            let config = try StartupScenario.writeGatewayConfig(
                in: files, broker: broker, accessories: accessories, pollInterval: "0")
            // Live `state` deliveries only (the broker clears the retain flag of a message it
            // forwards to a subscription that existed when it arrived).
            return try await CountingSubscriber.with(
                broker: broker, filter: "home/#", statusTopic: "home/$gateway/status",
                matches: { !$0.retain && $0.topic.hasSuffix("/state") }
            ) { subscriber in
                let child = try Callgrind.start(
                    try Callgrind.benchExecutable(), ["gateway-child", "--config", config, "--changes-from-stdin"],
                    outFile: outFile, standardInput: true)
                do {
                    _ = try await subscriber.waitOnline(timeout: 600, what: "the gateway under callgrind") {
                        child.isRunning
                            ? nil
                            : "the gateway under callgrind exited (\(child.exitStatus ?? -1)): "
                                + child.standardError.suffix(600)
                    }
                    subscriber.reset()
                    try child.write("\(warmup)\n")
                    _ = try await subscriber.waitFor(count: warmup, timeout: 300, what: "the warm-up's notifications")
                    try child.write("\(count)\n")
                    _ = try await subscriber.waitFor(
                        count: warmup + count, timeout: 120 + Double(count) * 0.1, what: "\(count) notifications")
                    child.closeInput()
                    return try await Callgrind.finish(child, outFile: outFile, terminate: true, timeout: 120)
                } catch {
                    await child.terminate(grace: 10)
                    throw error
                }
            }
        }
    }
}
