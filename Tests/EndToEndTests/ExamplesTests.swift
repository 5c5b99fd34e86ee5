import Foundation
import HomeModel
import TestSupport
import XCTest

/// The shipped example scripts, run as a user runs them, again and again, against the real
/// binary and mosquitto: they do what their names say, end when they are done, say clearly why
/// when they cannot, and leave no subscriber behind on any path.
final class ExamplesTests: XCTestCase {
    static let examples = repositoryRoot.appendingPathComponent("Examples")
    let light = "home/garage/garage-door-opener/garage-light"

    func script(
        _ name: String, _ arguments: [String] = [], port: Int, timeout: Double = 30, _ env: [String: String] = [:]
    )
        async throws -> ProcessResult
    {
        let run = try await runProcess(
            "bash", [Self.examples.appendingPathComponent(name).path] + arguments, timeout: timeout,
            environment: ["MQTT_PORT": "\(port)"].merging(env) { $1 })
        XCTAssertFalse(run.standardError.contains("unbound variable"), "\(name): \(run.standardError)")
        XCTAssertFalse(run.standardError.contains("Traceback"), "\(name): \(run.standardError)")
        return run
    }

    /// mosquitto_sub processes still connected to `port`: a script leaves none behind.
    func subscribers(port: Int) async throws -> [String] {
        let found = try await runProcess("pgrep", ["-af", "mosquitto_sub -h 127.0.0.1 -p \(port) "])
        return found.standardOutput.split(separator: "\n").map(String.init)
    }

    func startGateway(_ broker: MosquittoBroker, in dir: TemporaryDirectory) async throws -> ChildProcess {
        let config = dir.file("gateway.yml")
        try """
        broker: { url: "mqtt://127.0.0.1:\(broker.port)" }
        state-directory: state
        sources: [{ type: simulator, directory: "\(repositoryRoot.appendingPathComponent("Config/accessories").path)" }]
        homeassistant: { enabled: false }
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let watcher = try await MQTTTestSubscriber.start(
            broker: broker, filter: "home/$gateway/status", clientID: "examples-watch")
        TestCensus.record(.binary)
        let gateway = try ChildProcess(BinaryEndToEndTests.binary, ["run", "--config", config])
        try await watcher.waitForMessage("online", timeout: 20) { $0.string == "online" }
        await watcher.stop()
        return gateway
    }

    func testEachScriptAgainAndAgainAgainstTheGateway() async throws {
        let dir = try TemporaryDirectory(prefix: "homemqtt-examples")
        let broker = try await MosquittoBroker.start()
        addTeardownBlock { await broker.stop() }
        let gateway = try await startGateway(broker, in: dir)
        addTeardownBlock { await gateway.terminate(grace: 2) }
        let port = broker.port

        // Closing a closed door: answered, and done at once rather than after the timeout.
        for _ in 1...3 {
            let start = ContinuousClock.now
            let closed = try await script("follow-garage-door.sh", ["closed"], port: port)
            XCTAssertEqual(closed.status, 0, closed.standardError)
            XCTAssertTrue(closed.standardOutput.contains("door closed"), closed.standardOutput)
            XCTAssertLessThan(ContinuousClock.now - start, .seconds(5))
        }

        // Twenty toggles: each answered ok, each the other way, and the light's state follows.
        var values: [JSONValue] = []
        for run in 1...20 {
            let toggle = try await script("toggle-garage-light.sh", port: port, timeout: 20)
            XCTAssertEqual(toggle.status, 0, "run \(run): \(toggle.standardError)")
            let answer = try JSONValue(parsing: Array(toggle.standardOutput.utf8))
            XCTAssertEqual(answer["op"], "toggle", "run \(run): \(toggle.standardOutput)")
            XCTAssertEqual(answer["status"], "ok", "run \(run): \(toggle.standardOutput)")
            values.append(answer["value"] ?? .null)
        }
        XCTAssertEqual(Set(values), [true, false], "\(values)")
        for (previous, next) in zip(values, values.dropFirst()) { XCTAssertNotEqual(previous, next, "\(values)") }
        let state = try await runChecked(
            "mosquitto_sub", broker.clientArguments + ["-t", "\(light)/power-state/state", "-C", "1", "-W", "5"])
        XCTAssertEqual(state.standardOutput.trimmingCharacters(in: .newlines), values.last?.encoded())

        // The tree, several times.
        for _ in 1...3 {
            let tree = try await script("print-tree.sh", port: port)
            XCTAssertEqual(tree.status, 0, tree.standardError)
            let document = try JSONValue(parsing: Array(tree.standardOutput.utf8))
            XCTAssertNotNil(document["rooms"]?.arrayValue, tree.standardOutput.prefix(200) + "")
        }

        // Following an opening door for 2 s of its 12 s of travel: the timeout path says so.
        let short = try await script("follow-garage-door.sh", ["open"], port: port, ["FOLLOW_TIMEOUT": "2"])
        XCTAssertEqual(short.status, 1, short.standardError)
        XCTAssertTrue(short.standardError.contains("no end of travel within 2s"), short.standardError)
        XCTAssertTrue(short.standardOutput.contains("target-door-state/result"), short.standardOutput)

        // Stopped while it waits (Ctrl-C, a service manager): its subscriber goes with it.
        let following = try ChildProcess(
            "bash", [Self.examples.appendingPathComponent("follow-garage-door.sh").path, "closed"],
            environment: ["MQTT_PORT": "\(port)", "FOLLOW_TIMEOUT": "60"])
        try await following.waitForOutput(containing: "target-door-state/result", timeout: 10)
        let stopped = await following.terminate(grace: 5)
        XCTAssertEqual(stopped, 143, following.standardError)
        XCTAssertFalse(following.standardError.contains("unbound variable"), following.standardError)
        try await waitUntil("no subscriber left", timeout: 5, pollInterval: 0.2) {
            try await self.subscribers(port: port).isEmpty
        }

        // A base topic no gateway serves: the scripts say what is missing.
        let elsewhere = ["HOMEMQTT_BASE": "nowhere", "FOLLOW_TIMEOUT": "1", "TOGGLE_TIMEOUT": "1", "TREE_TIMEOUT": "1"]
        for (name, message) in [
            ("toggle-garage-light.sh", "nothing at nowhere/garage/garage-door-opener/$availability within 1s"),
            ("follow-garage-door.sh", "nothing at nowhere/garage/garage-door-opener/$availability within 1s"),
            ("print-tree.sh", "no tree at nowhere/$gateway/tree within 1s"),
        ] {
            let run = try await script(name, port: port, elsewhere)
            XCTAssertEqual(run.status, 1, "\(name): \(run.standardError)")
            XCTAssertTrue(run.standardError.contains(message), "\(name): \(run.standardError)")
        }
        let left = try await subscribers(port: port)
        XCTAssertEqual(left, [])
        XCTAssertTrue(gateway.isRunning)

        // The flow shows the toggle's answer: it subscribes to the services' `$result`.
        let flow = try String(contentsOf: Self.examples.appendingPathComponent("node-red-flow.json"), encoding: .utf8)
        XCTAssertTrue(flow.contains(#""topic": "home/+/+/+/$result""#), "no $result subscription in the Node-RED flow")
    }

    /// No broker at the address: each script says so and exits 1 (no parse of nothing, no
    /// Python traceback, no unbound variable).
    func testEachScriptSaysWhenThereIsNoBroker() async throws {
        let broker = try await MosquittoBroker.start()
        let port = broker.port
        await broker.stop()
        for name in ["toggle-garage-light.sh", "follow-garage-door.sh", "print-tree.sh"] {
            for _ in 1...3 {
                let run = try await script(name, port: port, timeout: 10)
                XCTAssertEqual(run.status, 1, "\(name): \(run.standardError)")
                XCTAssertTrue(
                    run.standardError.hasPrefix("no broker at 127.0.0.1:\(port): "), "\(name): \(run.standardError)")
                XCTAssertEqual(run.standardOutput, "", name)
            }
        }
        let left = try await subscribers(port: port)
        XCTAssertEqual(left, [])
    }
}
