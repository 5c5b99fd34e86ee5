import Foundation
import HomeModel
import MQTT
import TestSupport
import XCTest

/// The gateway with brokers that take less than it asks for: MQTT 3.1.1 only (RabbitMQ), and, on
/// 3.1.1, a stop while messages keep arriving (the DISCONNECT must go out, or the broker
/// publishes the will). Both stay on the binary: RabbitMQ closes the connection of an MQTT 5
/// CONNECT, which the memory broker does not model, and the stop is the process's SIGTERM with
/// its exit status and mosquitto's log of how the connection ended. QoS 0 only (mqttools) moved
/// to `BrokerDowngradeTests` in GatewayTests, on the memory rig and mqttools.
final class BrokerDowngradeTests: XCTestCase {
    let light = "home/garage/garage-door-opener/garage-light/brightness"
    let shippedHome = repositoryRoot.appendingPathComponent("Config/accessories").path

    /// A config for a broker at `port` serving `accessories`, with `broker` lines added.
    static func writeConfig(
        in directory: TemporaryDirectory, port: Int, clientID: String, accessories: String, broker: [String] = []
    ) throws -> String {
        let path = directory.file("gateway.yml")
        try """
        broker:
          url: mqtt://127.0.0.1:\(port)
          client-id: \(clientID)
        \(broker.map { "  \($0)" }.joined(separator: "\n"))
        state-directory: state
        poll-interval: 0
        sources:
          - type: simulator
            directory: \(accessories)
        homeassistant:
          enabled: false
        log-level: info
        """.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// RabbitMQ 3.10 closes the connection on an MQTT 5 CONNECT. Without `protocol` in the
    /// config the gateway tries 3.1.1, says so once naming the setting, and serves.
    func testABrokerThatRefusesMQTT5GetsMQTT311() async throws {
        let broker = try await RabbitMQBroker.start()
        addTeardownBlock { await broker.stop() }
        let directory = try TemporaryDirectory(prefix: "homemqtt-fallback")
        let config = try Self.writeConfig(
            in: directory, port: broker.port, clientID: "homemqtt-fallback", accessories: shippedHome)
        TestCensus.record(.binary)
        let gateway = try ChildProcess(BinaryEndToEndTests.binary, ["run", "--config", config])
        addTeardownBlock { await gateway.terminate(grace: 2) }
        try await waitUntil("the gateway online on RabbitMQ", timeout: 30, pollInterval: 0.5) {
            guard gateway.isRunning else { throw ProcessError("homemqtt exited: \(gateway.standardError)") }
            let result = try await runProcess(
                "mosquitto_sub", broker.clientArguments + ["-t", "home/$gateway/status", "-C", "1", "-W", "2"])
            return result.standardOutput.hasPrefix("online")
        }
        let log = gateway.standardError
        let fallback = log.split(separator: "\n").filter { $0.contains("refused MQTT 5") }
        XCTAssertEqual(fallback.count, 1, log)
        XCTAssertTrue(fallback.first?.contains("protocol: 3.1.1") ?? false, log)
        XCTAssertTrue(log.contains("protocol=3.1.1"), log)
        XCTAssertFalse(log.contains("cannot reach the broker"), log)
        let results = try ChildProcess(
            "mosquitto_sub", broker.clientArguments + ["-t", light + "/result", "-C", "1", "-W", "15"])
        try await Task.sleep(for: .milliseconds(500))
        try await runChecked("mosquitto_pub", broker.clientArguments + ["-q", "1", "-t", light + "/set", "-m", "55"])
        _ = try await results.waitForExit(timeout: 20)
        XCTAssertTrue(results.standardOutput.contains(#""status":"ok""#), results.standardOutput)
    }

    /// On 3.1.1 the gateway hears its own messages (no no-local) and sets keep coming while it
    /// stops: `offline` is seen once, sent by the gateway, and the broker logs a DISCONNECT, not
    /// a connection that vanished (whose will would say `offline` a second time).
    func testAStopOnMQTT311SendsItsDisconnectWhileMessagesArrive() async throws {
        let broker = try await MosquittoBroker.start()
        addTeardownBlock { await broker.stop() }
        let directory = try TemporaryDirectory(prefix: "homemqtt-bye")
        let config = try Self.writeConfig(
            in: directory, port: broker.port, clientID: "homemqtt-bye", accessories: shippedHome,
            broker: ["protocol: 3.1.1"])
        let status = try await MQTTTestSubscriber.start(broker: broker, filter: "home/$gateway/status")
        TestCensus.record(.binary)
        let gateway = try ChildProcess(BinaryEndToEndTests.binary, ["run", "--config", config])
        addTeardownBlock { await gateway.terminate(grace: 2) }
        try await status.waitForMessage("online", timeout: 30) { $0.string == "online" }
        let client = MQTTClient(configuration: broker.clientConfiguration())
        try await client.connect()
        let light = self.light
        let exit = try await withThrowingTaskGroup(of: Int32?.self) { group in
            group.addTask {
                // Sets through the whole stop, each answered (and echoed back) while it drains.
                var value = 0
                while !Task.isCancelled {
                    value = (value + 1) % 100
                    try? await client.publish(light + "/set", "\(value)", qos: .atLeastOnce)
                    try? await Task.sleep(for: .milliseconds(2))
                }
                return nil
            }
            try await Task.sleep(for: .milliseconds(500))
            let exit = await gateway.terminate(grace: 10)
            try await Task.sleep(for: .seconds(1))
            group.cancelAll()
            return exit
        }
        XCTAssertEqual(exit, 0, gateway.standardError)
        let offline = status.messages.filter { !$0.retain && $0.string == "offline" }
        XCTAssertEqual(offline.count, 1, broker.log)
        XCTAssertTrue(broker.log.contains("Client homemqtt-bye disconnected."), broker.log)
        XCTAssertFalse(broker.log.contains("Client homemqtt-bye closed its connection"), broker.log)
        await client.disconnect()
        await status.stop()
    }
}
