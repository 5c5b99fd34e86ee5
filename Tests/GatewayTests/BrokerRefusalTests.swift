import Foundation
import HomeModel
import MQTT
import TestSupport
import XCTest

/// A request whose answer topic the broker would refuse, on a rig (the memory broker by
/// default, mosquitto too under CI). Moved from EndToEndTests, every assertion kept: mosquitto's
/// log of connections and of clients it dropped is the rig's count of them, the binary's exit
/// status the service group's clean stop. The limits the broker never told stay there.
final class BrokerRefusalTests: RigTestCase {
    /// A request on MQTT whose answer topic would be deeper than the broker takes
    /// (`broker.max-topic-levels: 128`, as EMQX): mosquitto takes the 150-level request itself,
    /// so the gateway must not answer on a topic made from it. The requester gets the error on
    /// `$gateway/error` and on its MQTT 5 Response Topic; one connection; a later set answered.
    func testADeepRequestUnderALevelLimitIsAnsweredWithoutLosingTheBroker() async throws {
        await onEveryRig(configure: { config in
            PacketLimitTests.config(&config)
            config.mqtt.maximumTopicLevels = 128
        }) { gw in
            let everything = try await gw.subscriber("#")
            let op = Array(repeating: "a", count: 147).joined(separator: "/")
            let request = "home/$gateway/request/" + op
            XCTAssertEqual(MQTTTopicShape.levels(request), 150)
            var properties = MQTTPublishProperties()
            properties.responseTopic = "client/replies/deep"
            properties.correlationData = Array("c-1".utf8)
            try await gw.publish(request, #"{"id": 9}"#, properties: properties)
            let error = try await everything.seen.waitFor("the error report") { $0.topic == "home/$gateway/error" }
            let report = try JSONValue(parsing: error.payload)
            XCTAssertEqual(report["code"], .string("unknown-topic"), error.string)
            XCTAssertEqual(report["topic"], .string(request))
            let reply = try await everything.seen.waitFor("the answer on the response topic") {
                $0.topic == "client/replies/deep"
            }
            let answer = try JSONValue(parsing: reply.payload)
            XCTAssertEqual(answer["status"], .string("error"), reply.string)
            XCTAssertEqual(answer["id"], .int(9))
            XCTAssertEqual(reply.properties.correlationData, Array("c-1".utf8))
            XCTAssertFalse(everything.seen.elements.contains { $0.topic.hasPrefix("home/$gateway/response/a/") })

            let light = "home/garage/garage-door-opener/garage-light/brightness"
            try await gw.publish(light + "/set", "44")
            let set = try await everything.seen.waitFor("the set's answer") { $0.topic == light + "/result" }
            XCTAssertEqual(try JSONValue(parsing: set.payload)["status"], .string("ok"), set.string)
            await everything.close()
            XCTAssertEqual(gw.connections(), 1)
            XCTAssertEqual(gw.connectionsDropped, [])
            let stopped = await gw.stopGateway()
            XCTAssertNil(stopped, "the gateway did not stop cleanly")
        }
    }
}
