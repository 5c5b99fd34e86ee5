import Foundation
import HomeModel
import MQTT
import TestSupport
import XCTest

/// The gateway shares its broker and its base topic (`home/` is a name many people use) with
/// other clients: it clears only what it published itself, and nothing it publishes comes back
/// to it. Real binary, real mosquitto, `mosquitto_pub` as the other client.
final class NeighbourTests: XCTestCase {
    /// Retained topics of another client under the base, at every depth and in every shape the
    /// gateway's own topics take: beside its accessories, inside an accessory's topic, and where
    /// a request would go.
    static let foreign: [String: String] = [
        "home/alarm/state": "armed",
        "home/$bridge/state": "online",
        "home/zigbee/lamp/meta": #"{"by":"zigbee"}"#,
        "home/zigbee/lamp/$info": #"{"by":"zigbee"}"#,
        "home/zigbee/lamp/$availability": "online",
        "home/garage/zigbee-lamp/lightbulb/on/state": "true",
        "home/garage/zigbee-lamp/lightbulb/on/meta": #"{"by":"zigbee"}"#,
        "home/garage/garage-door-opener/zigbee-service/level/state": "3",
        "home/garage/garage-door-opener/$zigbee": "x",
        "home/a/b/c/d/e/f/g/state": "deep",
        "home/$gateway/other": "someone else's",
        "home/kitchen/$availability": "online",
        "home": "top",
    ]

    static func publishForeign(_ broker: MosquittoBroker) async throws {
        for (topic, payload) in foreign {
            try await runChecked("mosquitto_pub", ["-p", "\(broker.port)", "-r", "-t", topic, "-m", payload])
        }
    }

    /// Every retained topic on the broker (under `home` and `home/#`).
    static func retained(_ broker: MosquittoBroker) async throws -> [String: String] {
        try await broker.retainedSnapshot("home/#", "home")
    }

    func assertForeignUntouched(_ broker: MosquittoBroker, _ when: String, line: UInt = #line) async throws {
        let held = try await Self.retained(broker)
        for (topic, payload) in Self.foreign {
            XCTAssertEqual(held[topic], payload, "\(topic) \(when)", line: line)
        }
    }

    func request(_ broker: MosquittoBroker, _ op: String, _ payload: String) async throws -> JSONValue {
        let answers = try await MQTTTestSubscriber.start(
            broker: broker, filter: "home/$gateway/response/\(op)", clientID: "answers-\(UUID().uuidString.prefix(6))")
        defer { Task { await answers.stop() } }
        try await runChecked(
            "mosquitto_pub", ["-p", "\(broker.port)", "-t", "home/$gateway/request/\(op)", "-m", payload])
        let answer = try await answers.waitForMessage("\(op) answered", timeout: 10) { _ in true }
        return try JSONValue(parsing: answer.payload)
    }

    /// A simulated home in a directory of its own, so that a test can remove an accessory's file.
    func homeDirectory() throws -> TemporaryDirectory {
        let directory = try TemporaryDirectory(prefix: "homemqtt-neighbour-home")
        let source = repositoryRoot.appendingPathComponent("Config/accessories").path
        for name in try FileManager.default.contentsOfDirectory(atPath: source) {
            try FileManager.default.copyItem(atPath: source + "/" + name, toPath: directory.file(name))
        }
        return directory
    }

    func config(_ broker: MosquittoBroker, home: TemporaryDirectory, extra: String = "") throws
        -> BinaryEndToEndTests.E2EConfig
    {
        let setup = try BinaryEndToEndTests.E2EConfig(brokerURL: broker.url, extra: extra)
        var yaml = try String(contentsOfFile: setup.configPath, encoding: .utf8)
        yaml = yaml.replacingOccurrences(
            of: repositoryRoot.appendingPathComponent("Config/accessories").path, with: home.path)
        try yaml.write(toFile: setup.configPath, atomically: true, encoding: .utf8)
        return setup
    }

    /// Start, rename, move, remove, values changing and the stop: other clients' retained
    /// topics stay as they were at every step, and the gateway answers none of them.
    func testOtherClientsRetainedTopicsAreNeverTouched() async throws {
        let broker = try await MosquittoBroker.start()
        addTeardownBlock { await broker.stop() }
        try await Self.publishForeign(broker)
        let home = try homeDirectory()
        let setup = try config(broker, home: home)
        let errors = try await MQTTTestSubscriber.start(
            broker: broker, filter: "home/$gateway/error", clientID: "errors")
        let gateway = try await BinaryEndToEndTests.startGateway(setup, broker: broker)
        addTeardownBlock { await gateway.terminate(grace: 2) }
        try await assertForeignUntouched(broker, "after start")

        var answer = try await request(
            broker, "accessory/rename", #"{"accessory": "garage/garage-door-opener", "name": "Kilgo Door"}"#)
        XCTAssertEqual(answer["status"], "ok", "\(answer)")
        answer = try await request(broker, "accessory/remove", #"{"accessory": "Bedroom Lamp"}"#)
        XCTAssertEqual(answer["status"], "ok", "\(answer)")
        // Churn, shortened: values change and are set while the home changes around them.
        for round in 0..<20 {
            try await runChecked(
                "mosquitto_pub",
                [
                    "-p", "\(broker.port)", "-t", "home/garage/kilgo-door/garage-light/brightness/set", "-m",
                    "\(round * 5)",
                ])
        }
        answer = try await request(
            broker, "accessory/rename", #"{"accessory": "garage/kilgo-door", "name": "Garage Door Opener"}"#)
        XCTAssertEqual(answer["status"], "ok", "\(answer)")
        try await Task.sleep(for: .seconds(0.5))
        try await assertForeignUntouched(broker, "after renames, a removal and sets")
        let held = try await Self.retained(broker)
        XCTAssertNil(held["home/garage/kilgo-door/$info"], "the renamed accessory's old topic stayed")
        XCTAssertNotNil(held["home/garage/garage-door-opener/$info"])
        XCTAssertFalse(held.keys.contains { $0.contains("/bedroom-lamp/") }, "the removed lamp stayed")

        let status = await gateway.terminate(grace: 5)
        XCTAssertEqual(status, 0)
        try await assertForeignUntouched(broker, "after the stop")
        // None of the other client's topics was taken for a request the gateway could not serve.
        let reported = errors.messages.map(\.string).filter { text in Self.foreign.keys.contains { text.contains($0) } }
        XCTAssertEqual(reported, [], "the gateway answered another client's topics")
        await errors.stop()
    }

    /// An accessory whose file is removed while the gateway is down has every retained topic of
    /// its own cleared at the next start — its `$availability` and discovery config too — and
    /// nothing else is; with a persistent session and a clean one, and also when the state
    /// directory (and with it the record) was lost, from the tree the earlier run left on the broker.
    func testAccessoryRemovedWhileDownIsClearedAtTheNextStart() async throws {
        for (loseTheState, cleanSession) in [(false, false), (true, false), (false, true)] {
            let broker = try await MosquittoBroker.start()
            try await Self.publishForeign(broker)
            let home = try homeDirectory()
            let setup = try config(broker, home: home)
            var yaml = try String(contentsOfFile: setup.configPath, encoding: .utf8)
            yaml = yaml.replacingOccurrences(
                of: "homeassistant:\n  enabled: false", with: "homeassistant:\n  enabled: true")
            if cleanSession {
                yaml = yaml.replacingOccurrences(
                    of: "client-id: homemqtt-e2e", with: "client-id: homemqtt-e2e\n  session-expiry: 0")
            }
            try yaml.write(toFile: setup.configPath, atomically: true, encoding: .utf8)

            var gateway = try await BinaryEndToEndTests.startGateway(setup, broker: broker)
            let before = try await Self.retained(broker)
            let front = before.keys.filter { $0.contains("/front-door-lock/") }
            XCTAssertGreaterThan(front.count, 5, "the front door's topics: \(front)")
            let discovery = try await discoveryConfigs(broker)
            let status = await gateway.terminate(grace: 5)
            XCTAssertEqual(status, 0)

            try FileManager.default.removeItem(atPath: home.file("front-door.yml"))
            if loseTheState { try FileManager.default.removeItem(atPath: setup.statePath) }
            gateway = try await BinaryEndToEndTests.startGateway(setup, broker: broker)
            try await Task.sleep(for: .seconds(0.5))
            let after = try await Self.retained(broker)
            let left = after.keys.filter { $0.contains("/front-door-lock/") }
            XCTAssertEqual(left, [], "lose the state: \(loseTheState); the removed accessory's topics stayed")
            try await assertForeignUntouched(broker, "after a restart (lose the state: \(loseTheState))")
            let others = before.keys.filter { !$0.contains("/front-door-lock/") && after[$0] == nil }
            XCTAssertEqual(others, [], "topics of accessories still served went away")
            let discoveryAfter = try await discoveryConfigs(broker)
            XCTAssertEqual(discoveryAfter.count, discovery.count - 1, "the removed accessory's discovery config")
            let stopped = await gateway.terminate(grace: 5)
            XCTAssertEqual(stopped, 0)
            await broker.stop()
        }
    }

    /// A mosquitto bridge whose notification topic is under the gateway's base keeps it: the
    /// bridge's retained `1` stays through the gateway's start, a rename and its stop.
    func testABridgesNotificationTopicUnderTheBaseStays() async throws {
        let broker = try await MosquittoBroker.start()
        addTeardownBlock { await broker.stop() }
        let notification = "home/$bridge/neighbour/state"
        let bridge = try await MosquittoBroker.start(
            .init(extraConfiguration: [
                "connection neighbour", "address 127.0.0.1:\(broker.port)", "topic zigbee/# both 0",
                "notifications true", "notification_topic \(notification)", "cleansession true",
            ]))
        addTeardownBlock { await bridge.stop() }
        let watcher = try await MQTTTestSubscriber.start(broker: broker, filter: notification, clientID: "bridge-watch")
        try await watcher.waitForMessage("the bridge connected", timeout: 10) { $0.string == "1" }
        await watcher.stop()
        let home = try homeDirectory()
        let gateway = try await BinaryEndToEndTests.startGateway(try config(broker, home: home), broker: broker)
        addTeardownBlock { await gateway.terminate(grace: 2) }
        let answer = try await request(
            broker, "accessory/rename", #"{"accessory": "garage/garage-door-opener", "name": "Kilgo Door"}"#)
        XCTAssertEqual(answer["status"], "ok", "\(answer)")
        try await Task.sleep(for: .seconds(0.5))
        var held = try await Self.retained(broker)
        XCTAssertEqual(held[notification], "1", "the bridge's notification topic")
        let stopped = await gateway.terminate(grace: 5)
        XCTAssertEqual(stopped, 0)
        held = try await Self.retained(broker)
        XCTAssertEqual(held[notification], "1", "the bridge's notification topic after the stop")
    }

    func discoveryConfigs(_ broker: MosquittoBroker) async throws -> [String] {
        let reader = try await MQTTTestSubscriber.start(
            broker: broker, filter: "homeassistant/device/+/config", clientID: "ha-\(UUID().uuidString.prefix(6))")
        try await Task.sleep(for: .seconds(0.5))
        await reader.stop()
        return reader.messages.filter { $0.retain && !$0.payload.isEmpty }.map(\.topic)
    }

    /// A gateway whose state directory was lost finds its own retained `$gateway/status`
    /// (`offline`, its will) at the next start: the tree it left says the base was its own, so
    /// the status is no other client's and no warning says so.
    func testItsOwnStatusIsNotAnotherClientsAfterTheStateIsLost() async throws {
        let broker = try await MosquittoBroker.start()
        addTeardownBlock { await broker.stop() }
        let home = try homeDirectory()
        let setup = try config(broker, home: home)
        var yaml = try String(contentsOfFile: setup.configPath, encoding: .utf8)
        yaml = yaml.replacingOccurrences(of: "log-level: warning", with: "log-level: info")
        try yaml.write(toFile: setup.configPath, atomically: true, encoding: .utf8)
        let first = try await BinaryEndToEndTests.startGateway(setup, broker: broker)
        let stopped = await first.terminate(grace: 5)
        XCTAssertEqual(stopped, 0)
        let held = try await Self.retained(broker)
        XCTAssertEqual(held["home/$gateway/status"], "offline")

        try FileManager.default.removeItem(atPath: setup.statePath)
        let gateway = try await BinaryEndToEndTests.startGateway(setup, broker: broker)
        addTeardownBlock { await gateway.terminate(grace: 2) }
        // `online` is out: the look at the broker, and any warning of it, came before.
        XCTAssertTrue(gateway.standardError.contains("gateway online"), gateway.standardError)
        XCTAssertTrue(gateway.standardError.contains("from the broker's tree"), gateway.standardError)
        XCTAssertFalse(
            gateway.standardError.contains("retained topics of another client"), gateway.standardError)
    }

    /// Another client's retained topic where the gateway must publish is replaced (the gateway
    /// needs it) and said in the log, naming it; a retained request is refused and left alone.
    func testACollisionIsLoggedAndARetainedRequestIsLeftAlone() async throws {
        let broker = try await MosquittoBroker.start()
        addTeardownBlock { await broker.stop() }
        let info = "home/garage/garage-door-opener/$info"
        let set = "home/garage/garage-door-opener/garage-light/brightness/set"
        try await runChecked("mosquitto_pub", ["-p", "\(broker.port)", "-r", "-t", info, "-m", "not the gateway's"])
        try await runChecked("mosquitto_pub", ["-p", "\(broker.port)", "-r", "-t", set, "-m", "40"])
        let results = try await MQTTTestSubscriber.start(
            broker: broker, filter: "home/garage/garage-door-opener/garage-light/brightness/result",
            clientID: "results")
        let home = try homeDirectory()
        let setup = try config(broker, home: home)
        let gateway = try await BinaryEndToEndTests.startGateway(setup, broker: broker)
        addTeardownBlock { await gateway.terminate(grace: 2) }
        let refused = try await results.waitForMessage("the retained set refused", timeout: 10) { _ in true }
        XCTAssertEqual(try JSONValue(parsing: refused.payload)["code"], "retained")
        let held = try await Self.retained(broker)
        XCTAssertEqual(held[set], "40", "the other client's retained request was cleared")
        XCTAssertNotEqual(held[info], "not the gateway's")
        XCTAssertTrue(
            gateway.standardError.contains("retained topics of another client") && gateway.standardError.contains(info),
            gateway.standardError)
        await results.stop()
    }
}
