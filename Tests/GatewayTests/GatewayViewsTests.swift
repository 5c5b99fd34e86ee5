import Foundation
import HomeModel
import MQTT
import TestSupport
import XCTest

@testable import Gateway

/// What views beside the MQTT topics (Homie, the web page) get from the gateway: the published
/// home and its changes, and requests answered by the same path as MQTT messages.
final class GatewayViewsTests: RigTestCase {
    let light = "home/garage/garage-door-opener/garage-light"

    func testAnObserverGetsTheHomeThenItsChanges() async throws {
        await onEveryRig { gw in
            var changes = await gw.gateway.observe().makeAsyncIterator()
            guard case .snapshot(let snapshot)? = await changes.next() else { return XCTFail("no snapshot first") }
            let accessories = await gw.gateway.tree.accessories.count
            XCTAssertEqual(snapshot.tree.accessories.count, accessories)
            let brightness = try XCTUnwrap(snapshot.tree.characteristic(topic: light + "/brightness"))
            XCTAssertEqual(snapshot.values[brightness.address], .int(80))

            try await gw.publish(light + "/brightness/set", "35")
            var seen: CharacteristicValue?
            while seen == nil, let change = await changes.next() {
                if case .value(let node, let value) = change, node.address == brightness.address { seen = value }
            }
            XCTAssertEqual(seen.flatMap(\.doubleValue), 35)
        }
    }

    func testARequestIsAnsweredAsTheMQTTMessageItStandsFor() async throws {
        await onEveryRig { gw in
            gw.seen.clear()
            let ok = await gw.gateway.request(topic: light + "/brightness/set", payload: Array("30".utf8))
            XCTAssertEqual(ok["status"], "ok", "\(ok)")
            XCTAssertEqual(ok["value"], 30)
            // The same answer went to the result topic, as for an MQTT client.
            let published = try await gw.next(light + "/brightness/result")
            XCTAssertEqual(try JSONValue(parsing: published.payload), ok)

            let refused = await gw.gateway.request(topic: light + "/brightness/set", payload: Array("140".utf8))
            XCTAssertEqual(refused["code"], "out-of-range")
            let toggled = await gw.gateway.request(topic: light + "/$toggle", payload: [])
            XCTAssertEqual(toggled["op"], "toggle")
            let health = await gw.gateway.request(topic: "home/$gateway/request/health", payload: Array("{}".utf8))
            XCTAssertEqual(health["status"], "ok")
            // Topics that take no request are answered too, never left waiting.
            for topic in [light + "/nothing/set", light + "/brightness/state", "home/$gateway/status", "elsewhere/x"] {
                let answer = await gw.gateway.request(topic: topic, payload: Array("1".utf8))
                XCTAssertEqual(answer["code"], "unknown-topic", "\(topic): \(answer)")
            }
        }
    }
}
