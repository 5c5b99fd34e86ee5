import Foundation
import Harness

/// Scripts/bench-bridge-aiohomekit.py as a process: aiohomekit, the one controller scenario 8
/// measures both bridges with, one JSON command a line on its stdin and one JSON answer a line
/// on its stdout. Scenario 9's clients speak the same protocol (`executable`, `arguments`).
/// Used from one task at a time (the scenario's), so its counters need no lock.
final class BridgeDriver {
    static let script = HAPPeer.repositoryRoot.appendingPathComponent("Scripts/bench-bridge-aiohomekit.py")
    let process: ChildProcess
    private var sequence = 0
    /// stdout lines already looked at: answers come in order, so each is looked at once.
    private var seen = 0

    init(executable: String = HAPPeer.python.path, arguments: [String] = [BridgeDriver.script.path]) async throws {
        process = try ChildProcess(executable, arguments, standardInput: true)
        try await process.waitForOutput(containing: "\"ready\"", timeout: 60)
        seen = 1
    }

    /// Sends one command; returns its sequence number, for `answer`.
    func send(_ op: String, _ fields: [String: Any]) throws -> Int {
        sequence += 1
        var command = fields
        (command["op"], command["seq"]) = (op, sequence)
        let line = try JSONSerialization.data(withJSONObject: command)
        try process.write(String(decoding: line, as: UTF8.self) + "\n")
        return sequence
    }

    /// Waits for the answer to command `number`; throws what the driver reported if it failed.
    func answer(_ number: Int, timeout: Double = 300) async throws -> [String: Any] {
        let deadline = ContinuousClock.now + .seconds(timeout)
        while true {
            let lines = process.outputLines
            while seen < lines.count {
                let line = lines[seen]
                seen += 1
                guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                    object["reply"] as? Int == number
                else { continue }
                guard object["ok"] as? Bool == true else {
                    throw BenchError("\(process.arguments.last ?? "the driver"): \(object["error"] as? String ?? line)")
                }
                return object
            }
            if !process.isRunning {
                throw BenchError("the aiohomekit driver exited: \(process.standardError.suffix(600))")
            }
            if ContinuousClock.now > deadline {
                throw BenchError("the aiohomekit driver did not answer command \(number) in \(timeout) s")
            }
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    func call(_ op: String, _ fields: [String: Any], timeout: Double = 300) async throws -> [String: Any] {
        try await answer(try send(op, fields), timeout: timeout)
    }

    /// A loop's per-request seconds, as the driver timed them.
    func samples(_ op: String, _ fields: [String: Any]) async throws -> [Double] {
        guard let samples = try await call(op, fields)["samples"] as? [Double], !samples.isEmpty else {
            throw BenchError("aiohomekit's \(op) answered no samples")
        }
        return samples
    }

    func stop() async {
        process.closeInput()
        await process.terminate(grace: 5)
    }
}

/// Scripts/bench-hap-python-bridge.py as a process: HAP-python 5.0.0 serving the generated home
/// as a bridge on 127.0.0.1, and changing one brightness from inside when told (`drive`).
final class HAPPythonBridge {
    static let script = HAPPeer.repositoryRoot.appendingPathComponent("Scripts/bench-hap-python-bridge.py")
    let process: ChildProcess
    let port: Int
    /// HAP-python's version, as the script reports it.
    let version: String
    private var drives = 0

    init(home: String, state: String, pin: String) async throws {
        port = try freePort()
        process = try ChildProcess(
            HAPPeer.python.path,
            [Self.script.path, "--home", home, "--port", String(port), "--pincode", pin, "--state", state],
            standardInput: true)
        try await process.waitForOutput(containing: "READY", timeout: 120)
        // "READY <port> <version>"
        version =
            process.outputLines.first { $0.hasPrefix("READY") }?.split(separator: " ").last.map(String.init) ?? "?"
    }

    /// Starts `count` changes of the brightness of `accessory`'s `service`, the last to 100; the
    /// controller's events tell when they arrived.
    func drive(accessory: String, service: String, count: Int) throws {
        drives += 1
        try process.write("drive \(drives) \(count) \(accessory)|\(service)\n")
    }

    func stop() async {
        process.closeInput()
        await process.terminate(grace: 5)
    }
}
