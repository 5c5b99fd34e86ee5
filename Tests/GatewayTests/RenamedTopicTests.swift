import Foundation
import HomeModel
import MQTT
import TestSupport
import XCTest

/// After a rename, a client still using the old topics is answered where it waits: a `set` on
/// the old `result`, a `$toggle` on the old `$result`, each with its `id`, and an MQTT 5 request
/// on its Response Topic. On every enabled rig (`Rig.enabled`); moved from EndToEndTests, where
/// mosquitto's own clients sent them to the binary.
final class RenamedTopicTests: RigTestCase {
    func testARequestToATopicFromBeforeARenameIsAnsweredOnItsResultTopic() async throws {
        await onEveryRig { gw in
            let rename = try await gw.request(
                "home/$gateway/request/accessory/rename",
                #"{"accessory": "garage/garage-door-opener", "name": "Kilgo Door", "id": "r1"}"#,
                answer: "home/$gateway/response/accessory/rename")
            XCTAssertEqual(rename["status"], "ok", "\(rename)")

            let old = "home/garage/garage-door-opener/garage-light"
            let new = "home/garage/kilgo-door/garage-light"
            // The new topic serves; the old one answers with unknown-topic where the client waits.
            gw.seen.clear()
            try await gw.publish("\(old)/brightness/set", #"{"value": 40, "id": 7}"#)
            try await gw.publish("\(old)/brightness/set", "40")
            let setAnswers = try await gw.seen.waitFor(count: 2, "answers on the old result") {
                $0.topic == "\(old)/brightness/result"
            }
            XCTAssertEqual(setAnswers.count, 2)
            for (index, message) in setAnswers.enumerated() {
                let answer = try JSONValue(parsing: message.payload)
                XCTAssertEqual(answer["status"], "error", "\(answer)")
                XCTAssertEqual(answer["code"], "unknown-topic", "\(answer)")
                XCTAssertEqual(answer["op"], "set")
                XCTAssertEqual(answer["id"], index == 0 ? 7 : .null)
                XCTAssertTrue(answer["message"]?.stringValue?.contains("\(old)/brightness") ?? false, "\(answer)")
            }
            // Still reported on $gateway/error, as before.
            let reported = try await gw.seen.waitFor(count: 2, "errors") { $0.topic == "home/$gateway/error" }
            XCTAssertEqual(
                try reported.map { try JSONValue(parsing: $0.payload)["topic"]?.stringValue },
                ["\(old)/brightness/set", "\(old)/brightness/set"])

            // $toggle on the old service: its $result, and the MQTT 5 Response Topic with its
            // correlation data.
            let replies = try await gw.subscriber("client/replies/#")
            var properties = MQTTPublishProperties()
            properties.responseTopic = "client/replies/1"
            properties.correlationData = Array("c-1".utf8)
            gw.seen.clear()
            try await gw.publish("\(old)/$toggle", #"{"id": "t1"}"#, properties: properties)
            let toggled = try JSONValue(parsing: try await gw.next("\(old)/$result").payload)
            XCTAssertEqual(toggled["code"], "unknown-topic", "\(toggled)")
            XCTAssertEqual(toggled["op"], "toggle")
            XCTAssertEqual(toggled["id"], "t1")
            let reply = try await replies.seen.waitFor("the reply")
            XCTAssertEqual(reply.properties.correlationData, Array("c-1".utf8))
            XCTAssertEqual(try JSONValue(parsing: reply.payload), toggled)
            await replies.close()

            // The renamed accessory is served at its new topic.
            let served = try await gw.request(
                "\(new)/brightness/set", #"{"value": 40, "id": 8}"#, answer: "\(new)/brightness/result")
            XCTAssertEqual(served["status"], "ok", "\(served)")
            XCTAssertEqual(served["value"], 40)
            // And the gateway still runs, online.
            let status = try await gw.retained("home/$gateway/status")
            XCTAssertEqual(status["home/$gateway/status"], "online")
        }
    }
}
