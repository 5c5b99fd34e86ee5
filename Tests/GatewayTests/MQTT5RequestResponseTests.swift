import Foundation
import HomeModel
import MQTT
import TestSupport
import XCTest

/// MQTT 5 as its clients speak it: an answer goes to a request's Response Topic with its
/// Correlation Data, and every publication says what its payload is. MQTT 3.1.1 clients keep
/// getting every answer on `result`. On every enabled rig (`Rig.enabled`); moved from
/// EndToEndTests, where mosquitto's own clients sent and read them through the binary.
final class MQTT5RequestResponseTests: RigTestCase {
    let light = "home/garage/garage-door-opener/garage-light"

    func testAnswersGoToTheResponseTopicWithTheCorrelationData() async throws {
        let light = light
        await onEveryRig { gw in
            let replies = try await gw.subscriber("client/replies/#")
            let results = try await gw.subscriber("\(light)/brightness/result")
            func request(_ topic: String, _ payload: String, reply: String, correlation: String) async throws {
                var properties = MQTTPublishProperties()
                properties.responseTopic = reply
                properties.correlationData = Array(correlation.utf8)
                try await gw.publish(topic, payload, properties: properties)
            }
            try await request("\(light)/brightness/set", "40", reply: "client/replies/a", correlation: "req-1")
            try await request("\(light)/brightness/set", "140", reply: "client/replies/b", correlation: "req-2")
            try await request("home/$gateway/request/health", "{}", reply: "client/replies/c", correlation: "req-3")
            try await request("\(light)/$toggle", "", reply: "client/replies/d", correlation: "req-4")
            let answers = try await replies.seen.waitFor(count: 4, "replies", timeout: 10)
            func reply(_ topic: String) throws -> (correlation: String, json: JSONValue, message: MQTTMessage) {
                let message = try XCTUnwrap(answers.first { $0.topic == topic }, "no reply on \(topic)")
                let correlation = String(decoding: message.properties.correlationData ?? [], as: UTF8.self)
                return (correlation, try JSONValue(parsing: message.payload), message)
            }
            let ok = try reply("client/replies/a")
            XCTAssertEqual(ok.message.properties.contentType, "application/json")
            XCTAssertTrue(ok.message.properties.isUTF8Text, "the payload format says UTF-8")
            XCTAssertEqual(ok.correlation, "req-1")
            XCTAssertEqual(ok.json["status"], "ok")
            let refused = try reply("client/replies/b")
            XCTAssertEqual(refused.correlation, "req-2")
            XCTAssertEqual(refused.json["code"], "out-of-range")
            let health = try reply("client/replies/c")
            XCTAssertEqual(health.correlation, "req-3")
            XCTAssertEqual(health.json["status"], "ok")
            let toggled = try reply("client/replies/d")
            XCTAssertEqual(toggled.correlation, "req-4")
            XCTAssertEqual(toggled.json["op"], "toggle")
            // The same answers still come on the result topic, as before.
            let onResult = try await results.seen.waitFor(count: 2, "answers on result")
            XCTAssertEqual(onResult.count, 2, onResult.map(\.string).joined(separator: "\n"))
            await replies.close()
            await results.close()
        }
    }

    func testEveryPublicationSaysItsContentTypeAndMQTT311StillGetsResults() async throws {
        let light = light
        await onEveryRig { gw in
            // Retained topics of every kind, as a new MQTT 5 subscriber gets them. A `state` is
            // typed by its text: a number is JSON (NodeRedStateTests has the texts that are not).
            let kinds = [
                "\(light)/brightness/state": "application/json", "\(light)/brightness/meta": "application/json",
                "home/garage/garage-door-opener/$info": "application/json",
                "home/garage/garage-door-opener/$availability": "text/plain",
                "home/$gateway/status": "text/plain", "home/$gateway/tree": "application/json",
            ]
            for (topic, type) in kinds {
                let sub = try await gw.subscriber(topic)
                let message = try await sub.seen.waitFor("the retained \(topic)") { $0.retain }
                await sub.close()
                XCTAssertEqual(message.properties.contentType, type, "\(topic): \(message.string.prefix(120))")
                XCTAssertTrue(message.properties.isUTF8Text, "\(topic): the payload format says UTF-8")
            }

            // An MQTT 3.1.1 client: no properties, and its answer on result as always.
            let result = try await gw.subscriber("\(light)/brightness/result", version: .v311)
            let sender = try await gw.broker.client("v311-sender", version: .v311)
            try await sender.publish("\(light)/brightness/set", payload: Array("55".utf8), qos: .atLeastOnce)
            let answer = try await result.seen.waitFor("the answer on result")
            XCTAssertEqual(try JSONValue(parsing: answer.payload)["value"], 55)
            XCTAssertNil(answer.properties.contentType, "an MQTT 3.1.1 client gets no properties")
            await gw.broker.disconnect(sender)
            await result.close()
        }
    }
}
