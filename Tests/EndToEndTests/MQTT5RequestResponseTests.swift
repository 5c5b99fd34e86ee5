import Foundation
import HomeModel
import TestSupport
import XCTest

/// MQTT 5 as its clients speak it, against the real binary with mosquitto's own clients: an
/// answer goes to a request's Response Topic with its Correlation Data, and every publication
/// says what its payload is. MQTT 3.1.1 clients keep getting every answer on `result`.
final class MQTT5RequestResponseTests: XCTestCase {
    let light = "home/garage/garage-door-opener/garage-light"

    /// Starts `mosquitto_sub` on `topic` printing `topic|content type|format|correlation|payload`.
    func subscriber(_ broker: MosquittoBroker, _ topic: String, count: Int, version: String = "mqttv5") async throws
        -> ChildProcess
    {
        let sub = try ChildProcess(
            "mosquitto_sub",
            broker.clientArguments + ["-V", version, "-t", topic, "-C", "\(count)", "-W", "15", "-F", "%t|%C|%F|%D|%p"])
        try await broker.waitForSubscription(to: topic)
        return sub
    }

    func testAnswersGoToTheResponseTopicWithTheCorrelationData() async throws {
        let broker = try await MosquittoBroker.start()
        addTeardownBlock { await broker.stop() }
        let setup = try BinaryEndToEndTests.E2EConfig(brokerURL: "mqtt://127.0.0.1:\(broker.port)")
        let gateway = try await BinaryEndToEndTests.startGateway(setup, broker: broker)
        addTeardownBlock { await gateway.terminate(grace: 2) }

        let replies = try await subscriber(broker, "client/replies/#", count: 4)
        let results = try await subscriber(broker, "\(light)/brightness/result", count: 2)
        func request(_ topic: String, _ payload: String, reply: String, correlation: String) async throws {
            try await runChecked(
                "mosquitto_pub",
                broker.clientArguments + [
                    "-V", "mqttv5", "-q", "1", "-t", topic, "-m", payload,
                    "-D", "publish", "response-topic", reply, "-D", "publish", "correlation-data", correlation,
                ])
        }
        try await request("\(light)/brightness/set", "40", reply: "client/replies/a", correlation: "req-1")
        try await request("\(light)/brightness/set", "140", reply: "client/replies/b", correlation: "req-2")
        try await request("home/$gateway/request/health", "{}", reply: "client/replies/c", correlation: "req-3")
        try await request("\(light)/$toggle", "", reply: "client/replies/d", correlation: "req-4")
        _ = try await replies.waitForExit(timeout: 20)
        _ = try await results.waitForExit(timeout: 20)
        let lines = replies.standardOutput.split(separator: "\n").map(String.init)
        print("figure: MQTT 5 replies:\n" + lines.joined(separator: "\n"))
        func line(_ topic: String) -> [String] {
            (lines.first { $0.hasPrefix(topic + "|") } ?? "").split(separator: "|", maxSplits: 4).map(String.init)
        }
        let ok = line("client/replies/a")
        XCTAssertEqual(ok.dropFirst().prefix(3), ["application/json", "1", "req-1"], "\(lines)")
        XCTAssertEqual(try JSONValue(parsing: Array(ok.last?.utf8 ?? "".utf8))["status"], "ok")
        let refused = line("client/replies/b")
        XCTAssertEqual(refused.dropFirst(3).first, "req-2")
        XCTAssertEqual(try JSONValue(parsing: Array(refused.last?.utf8 ?? "".utf8))["code"], "out-of-range")
        let health = line("client/replies/c")
        XCTAssertEqual(health.dropFirst(3).first, "req-3")
        XCTAssertEqual(try JSONValue(parsing: Array(health.last?.utf8 ?? "".utf8))["status"], "ok")
        let toggled = line("client/replies/d")
        XCTAssertEqual(toggled.dropFirst(3).first, "req-4")
        XCTAssertEqual(try JSONValue(parsing: Array(toggled.last?.utf8 ?? "".utf8))["op"], "toggle")
        // The same answers still come on the result topic, as before.
        XCTAssertEqual(results.standardOutput.split(separator: "\n").count, 2, results.standardOutput)
    }

    func testEveryPublicationSaysItsContentTypeAndMQTT311StillGetsResults() async throws {
        let broker = try await MosquittoBroker.start()
        addTeardownBlock { await broker.stop() }
        let setup = try BinaryEndToEndTests.E2EConfig(brokerURL: "mqtt://127.0.0.1:\(broker.port)")
        let gateway = try await BinaryEndToEndTests.startGateway(setup, broker: broker)
        addTeardownBlock { await gateway.terminate(grace: 2) }

        // Retained topics of every kind, as a new MQTT 5 subscriber gets them. A `state` is
        // typed by its text: a number is JSON (NodeRedStateTests has the texts that are not).
        let kinds = [
            "\(light)/brightness/state": "application/json", "\(light)/brightness/meta": "application/json",
            "home/garage/garage-door-opener/$info": "application/json",
            "home/garage/garage-door-opener/$availability": "text/plain",
            "home/$gateway/status": "text/plain", "home/$gateway/tree": "application/json",
        ]
        for (topic, type) in kinds {
            let sub = try await subscriber(broker, topic, count: 1)
            let status = try await sub.waitForExit(timeout: 15)
            XCTAssertEqual(status, 0, sub.standardError)
            let fields = sub.standardOutput.split(separator: "|", maxSplits: 4).map(String.init)
            XCTAssertEqual(fields.dropFirst().prefix(2), [type, "1"], "\(topic): \(sub.standardOutput.prefix(120))")
        }

        // An MQTT 3.1.1 client: no properties, and its answer on result as always.
        let result = try await subscriber(broker, "\(light)/brightness/result", count: 1, version: "mqttv311")
        try await runChecked(
            "mosquitto_pub",
            broker.clientArguments + ["-V", "mqttv311", "-q", "1", "-t", "\(light)/brightness/set", "-m", "55"])
        let status = try await result.waitForExit(timeout: 15)
        XCTAssertEqual(status, 0, result.standardError)
        let answer = try XCTUnwrap(result.standardOutput.split(separator: "|", maxSplits: 4).last)
        XCTAssertEqual(try JSONValue(parsing: Array(answer.utf8))["value"], 55)
    }
}
