import Foundation
import HomeModel
import MQTT
import TestSupport
import XCTest

/// The gateway with a broker that grants less than it asks for, on a rig: QoS 0 only, as
/// mqttools' MQTT 5 broker grants it (the memory broker so limited by default; mqttools itself
/// too under CI, never mosquitto, which grants QoS 2). Moved from EndToEndTests, every
/// assertion kept: the binary's stderr is the rig's log, its exit status the service group's
/// clean stop. The MQTT 3.1.1 fallback (RabbitMQ) and the stop's DISCONNECT stay there.
final class BrokerDowngradeTests: RigTestCase {
    /// A broker that grants QoS 0 only: the gateway publishes everything at QoS 0, says so once
    /// at start, has no publish failure, and answers sets.
    func testAQoS0OnlyBrokerGetsEverythingAtQoS0() async throws {
        await onEveryRig(Rig.qos0Only, broker: .init(maximumQoS: .atMostOnce), configure: PacketLimitTests.config) {
            gw in
            let light = "home/garage/garage-door-opener/garage-light/brightness"
            gw.seen.clear()
            for value in [20, 40, 60] {
                try await gw.publish(light + "/set", "\(value)", qos: .atMostOnce)
            }
            let answers = try await gw.seen.waitFor(count: 3, "answers", timeout: 15) { $0.topic == light + "/result" }
            XCTAssertEqual(
                answers.compactMap { try? JSONValue(parsing: $0.payload)["status"] }, ["ok", "ok", "ok"])
            // What the gateway published came at QoS 0 (the observer subscribed at QoS 2).
            XCTAssertEqual(answers.map(\.qos), [.atMostOnce, .atMostOnce, .atMostOnce])
            let log = gw.log.text
            let limits = log.split(separator: "\n").filter { $0.contains("broker limits") }
            XCTAssertEqual(limits.count, 1, log)
            XCTAssertTrue(limits.first?.contains("qos 1 sent as 0") ?? false, log)
            XCTAssertTrue(limits.first?.contains("topic-aliases=not used") ?? false, log)
            XCTAssertFalse(log.contains("publish failed") || log.contains("qos-not-supported"), log)
            let stopped = await gw.stopGateway()
            XCTAssertNil(stopped, "the gateway did not stop cleanly")
        }
    }
}
