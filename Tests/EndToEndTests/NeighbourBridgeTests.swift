import Foundation
import HomeModel
import MQTT
import TestSupport
import XCTest

/// A mosquitto bridge shares the gateway's base: its notification topic stays. The real binary
/// and two real mosquittos bridged. The rest of what the gateway leaves to its neighbours is in
/// GatewayTests' `NeighbourTests`, on rigs.
final class NeighbourBridgeTests: XCTestCase {
    /// Every retained topic on the broker (under `home` and `home/#`).
    static func retained(_ broker: MosquittoBroker) async throws -> [String: String] {
        try await broker.retainedSnapshot("home/#", "home")
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
}
