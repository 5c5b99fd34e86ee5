import Foundation
import HomeModel
import TestSupport
import XCTest

/// After a rename, a client still using the old topics is answered where it waits: a `set` on
/// the old `result`, a `$toggle` on the old `$result`, each with its `id`, and an MQTT 5 request
/// on its Response Topic. The real binary, mosquitto and mosquitto's clients.
final class RenamedTopicTests: XCTestCase {
    /// `mosquitto_sub` printing `topic|correlation data|payload` for `count` messages.
    func subscriber(_ broker: MosquittoBroker, _ topic: String, count: Int = 1) async throws -> ChildProcess {
        let sub = try ChildProcess(
            "mosquitto_sub",
            broker.clientArguments + ["-V", "mqttv5", "-t", topic, "-C", "\(count)", "-W", "15", "-F", "%t|%D|%p"])
        try await broker.waitForSubscription(to: topic)
        return sub
    }

    func answers(of sub: ChildProcess) async throws -> [(topic: String, correlation: String, json: JSONValue)] {
        let status = try await sub.waitForExit(timeout: 20)
        XCTAssertEqual(status, 0, "no answer: \(sub.standardError)")
        return try sub.standardOutput.split(separator: "\n").map { line in
            let fields = line.split(separator: "|", maxSplits: 2, omittingEmptySubsequences: false).map(String.init)
            return (fields[0], fields[1], try JSONValue(parsing: Array(fields[2].utf8)))
        }
    }

    func publish(_ broker: MosquittoBroker, _ topic: String, _ payload: String, extra: [String] = []) async throws {
        try await runChecked(
            "mosquitto_pub", broker.clientArguments + ["-V", "mqttv5", "-q", "1", "-t", topic, "-m", payload] + extra)
    }

    func testARequestToATopicFromBeforeARenameIsAnsweredOnItsResultTopic() async throws {
        let broker = try await MosquittoBroker.start()
        addTeardownBlock { await broker.stop() }
        let setup = try BinaryEndToEndTests.E2EConfig(brokerURL: "mqtt://127.0.0.1:\(broker.port)")
        let gateway = try await BinaryEndToEndTests.startGateway(setup, broker: broker)
        addTeardownBlock { await gateway.terminate(grace: 2) }

        let renamed = try await subscriber(broker, "home/$gateway/response/accessory/rename")
        try await publish(
            broker, "home/$gateway/request/accessory/rename",
            #"{"accessory": "garage/garage-door-opener", "name": "Kilgo Door", "id": "r1"}"#)
        let rename = try await answers(of: renamed)
        XCTAssertEqual(rename.first?.json["status"], "ok", "\(rename)")

        let old = "home/garage/garage-door-opener/garage-light"
        let new = "home/garage/kilgo-door/garage-light"
        // The new topic serves; the old one answers with unknown-topic where the client waits.
        let oldResult = try await subscriber(broker, "\(old)/brightness/result", count: 2)
        let errors = try await subscriber(broker, "home/$gateway/error", count: 2)
        try await publish(broker, "\(old)/brightness/set", #"{"value": 40, "id": 7}"#)
        try await publish(broker, "\(old)/brightness/set", "40")
        let setAnswers = try await answers(of: oldResult)
        XCTAssertEqual(setAnswers.count, 2)
        for (index, answer) in setAnswers.enumerated() {
            XCTAssertEqual(answer.json["status"], "error", "\(answer.json)")
            XCTAssertEqual(answer.json["code"], "unknown-topic", "\(answer.json)")
            XCTAssertEqual(answer.json["op"], "set")
            XCTAssertEqual(answer.json["id"], index == 0 ? 7 : .null)
            XCTAssertTrue(
                answer.json["message"]?.stringValue?.contains("\(old)/brightness") ?? false, "\(answer.json)")
        }
        // Still reported on $gateway/error, as before.
        let reported = try await answers(of: errors)
        XCTAssertEqual(
            reported.map { $0.json["topic"]?.stringValue }, ["\(old)/brightness/set", "\(old)/brightness/set"])

        // $toggle on the old service: its $result, and the MQTT 5 Response Topic with its
        // correlation data.
        let toggleResult = try await subscriber(broker, "\(old)/$result")
        let replies = try await subscriber(broker, "client/replies/#")
        try await publish(
            broker, "\(old)/$toggle", #"{"id": "t1"}"#,
            extra: ["-D", "publish", "response-topic", "client/replies/1", "-D", "publish", "correlation-data", "c-1"])
        let toggledAnswers = try await answers(of: toggleResult)
        let toggled = try XCTUnwrap(toggledAnswers.first)
        XCTAssertEqual(toggled.json["code"], "unknown-topic", "\(toggled.json)")
        XCTAssertEqual(toggled.json["op"], "toggle")
        XCTAssertEqual(toggled.json["id"], "t1")
        let replyAnswers = try await answers(of: replies)
        let reply = try XCTUnwrap(replyAnswers.first)
        XCTAssertEqual(reply.correlation, "c-1")
        XCTAssertEqual(reply.json, toggled.json)

        // The renamed accessory is served at its new topic.
        let newResult = try await subscriber(broker, "\(new)/brightness/result")
        try await publish(broker, "\(new)/brightness/set", #"{"value": 40, "id": 8}"#)
        let servedAnswers = try await answers(of: newResult)
        let served = try XCTUnwrap(servedAnswers.first)
        XCTAssertEqual(served.json["status"], "ok", "\(served.json)")
        XCTAssertEqual(served.json["value"], 40)
        XCTAssertTrue(gateway.isRunning)
    }
}
