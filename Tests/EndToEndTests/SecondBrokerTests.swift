import Foundation
import HomeModel
import TestSupport
import XCTest

/// The gateway against a broker that is not mosquitto: RabbitMQ's MQTT plugin (Debian's
/// `rabbitmq-server` 3.10, MQTT 3.1.1 only, no QoS 2, retained messages delivered only to
/// subscriptions that name the topic exactly), with mosquitto's clients as the users.
final class SecondBrokerTests: XCTestCase {
    let light = "home/garage/garage-door-opener/garage-light/brightness"

    func testTheGatewayServesThroughRabbitMQ() async throws {
        let broker = try await RabbitMQBroker.start()
        addTeardownBlock { await broker.stop() }
        let directory = try TemporaryDirectory(prefix: "homemqtt-rabbitmq-gw")
        let config = directory.file("gateway.yml")
        try """
        broker:
          url: mqtt://127.0.0.1:\(broker.port)
          client-id: homemqtt-rabbit
          protocol: 3.1.1
        state-directory: state
        poll-interval: 0
        sources:
          - type: simulator
            directory: \(repositoryRoot.appendingPathComponent("Config/accessories").path)
        homie:
          enabled: true
        log-level: info
        """.write(toFile: config, atomically: true, encoding: .utf8)
        TestCensus.record(.binary)
        let gateway = try ChildProcess(BinaryEndToEndTests.binary, ["run", "--config", config])
        addTeardownBlock { await gateway.terminate(grace: 2) }

        func retained(_ topic: String) async throws -> String {
            let result = try await runProcess(
                "mosquitto_sub", broker.clientArguments + ["-t", topic, "-C", "1", "-W", "2"])
            return result.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        try await waitUntil("the gateway online on RabbitMQ", timeout: 30, pollInterval: 0.5) {
            guard gateway.isRunning else { throw ProcessError("homemqtt exited: \(gateway.standardError)") }
            return try await retained("home/$gateway/status") == "online"
        }
        let seen1 = try await retained(light + "/state")
        XCTAssertEqual(seen1, "80")
        let seen2 = try await retained("homie/5/homemqtt-rabbit/$state")
        XCTAssertEqual(seen2, "ready")

        // A set from a 3.1.1 client: answered on `result`, and the state follows.
        let results = try ChildProcess(
            "mosquitto_sub", broker.clientArguments + ["-t", light + "/result", "-C", "2", "-W", "15"])
        try await Task.sleep(for: .milliseconds(500))
        try await runChecked("mosquitto_pub", broker.clientArguments + ["-q", "1", "-t", light + "/set", "-m", "55"])
        try await runChecked("mosquitto_pub", broker.clientArguments + ["-q", "1", "-t", light + "/set", "-m", "140"])
        _ = try await results.waitForExit(timeout: 20)
        let answers = try results.standardOutput.split(separator: "\n").map { try JSONValue(parsing: Array($0.utf8)) }
        XCTAssertEqual(answers.map { $0["status"] }, ["ok", "error"], results.standardOutput)
        XCTAssertEqual(answers.last?["code"], "out-of-range")
        let seen3 = try await retained(light + "/state")
        XCTAssertEqual(seen3, "55")

        // One connection each for the whole run: nothing the gateway sends makes RabbitMQ drop it.
        XCTAssertFalse(gateway.standardError.contains("connection lost"), gateway.standardError)
        let status = await gateway.terminate(grace: 5)
        XCTAssertEqual(status, 0)
        let seen4 = try await retained("home/$gateway/status")
        XCTAssertEqual(seen4, "offline")
        let seen5 = try await retained("homie/5/homemqtt-rabbit/$state")
        XCTAssertEqual(seen5, "disconnected")
    }
}
