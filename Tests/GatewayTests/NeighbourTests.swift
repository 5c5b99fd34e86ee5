import Foundation
import Gateway
import HomeMQTTApp
import HomeModel
import MQTT
import TestSupport
import XCTest

/// The gateway shares its broker and its base topic (`home/` is a name many people use) with
/// other clients: it clears only what it published itself, and nothing it publishes comes back
/// to it. On every enabled rig (`Rig.enabled`); moved from EndToEndTests, where the binary ran
/// with `mosquitto_pub` as the other client. The bridge's notification topic stays there
/// (`NeighbourBridgeTests`: it needs a mosquitto bridge).
final class NeighbourTests: RigTestCase {
    /// Retained topics of another client under the base, at every depth and in every shape the
    /// gateway's own topics take: beside its accessories, inside an accessory's topic, and where
    /// a request would go.
    static let foreign: [String: String] = [
        "home/alarm/state": "armed",
        "home/$bridge/state": "online",
        "home/zigbee/lamp/meta": #"{"by":"zigbee"}"#,
        "home/zigbee/lamp/$info": #"{"by":"zigbee"}"#,
        "home/zigbee/lamp/$availability": "online",
        "home/garage/zigbee-lamp/lightbulb/on/state": "true",
        "home/garage/zigbee-lamp/lightbulb/on/meta": #"{"by":"zigbee"}"#,
        "home/garage/garage-door-opener/zigbee-service/level/state": "3",
        "home/garage/garage-door-opener/$zigbee": "x",
        "home/a/b/c/d/e/f/g/state": "deep",
        "home/$gateway/other": "someone else's",
        "home/kitchen/$availability": "online",
        "home": "top",
    ]

    static func publishForeign(_ client: any MQTTTransport) async throws {
        for (topic, payload) in foreign {
            try await client.publish(topic, payload: Array(payload.utf8), qos: .atLeastOnce, retain: true)
        }
    }

    func assertForeignUntouched(_ gw: RiggedGateway, _ when: String, line: UInt = #line) async throws {
        let held = try await gw.retained("home/#")
        for (topic, payload) in Self.foreign {
            XCTAssertEqual(held[topic], payload, "\(topic) \(when)", line: line)
        }
    }

    func request(_ gw: RiggedGateway, _ op: String, _ payload: String) async throws -> [String: JSONValue] {
        try await gw.request("home/$gateway/request/\(op)", payload, answer: "home/$gateway/response/\(op)")
    }

    /// A copy of the simulated home, so that a test can remove an accessory's file.
    func homeDirectory() throws -> TemporaryDirectory {
        let directory = try TemporaryDirectory(prefix: "homemqtt-neighbour-home")
        let source = Rig.shippedAccessories.path
        for name in try FileManager.default.contentsOfDirectory(atPath: source) {
            try FileManager.default.copyItem(atPath: source + "/" + name, toPath: directory.file(name))
        }
        return directory
    }

    /// The session a config file that says nothing about it gets (persistent), or a clean one.
    static func session(clean: Bool) -> (inout GatewayConfig) -> Void {
        { config in
            if clean {
                config.mqtt.cleanStart = true
                config.mqtt.sessionExpiry = 0
            } else {
                config.mqtt.cleanStart = false
                config.mqtt.sessionExpiry = 3600
            }
        }
    }

    /// Start, rename, move, remove, values changing and the stop: other clients' retained
    /// topics stay as they were at every step, and the gateway answers none of them.
    func testOtherClientsRetainedTopicsAreNeverTouched() async throws {
        await onEveryRig(before: Self.publishForeign) { gw in
            try await assertForeignUntouched(gw, "after start")
            var answer = try await request(
                gw, "accessory/rename", #"{"accessory": "garage/garage-door-opener", "name": "Kilgo Door"}"#)
            XCTAssertEqual(answer["status"], "ok", "\(answer)")
            answer = try await request(gw, "accessory/remove", #"{"accessory": "Bedroom Lamp"}"#)
            XCTAssertEqual(answer["status"], "ok", "\(answer)")
            // Churn, shortened: values change and are set while the home changes around them.
            for round in 0..<20 {
                try await gw.publish("home/garage/kilgo-door/garage-light/brightness/set", "\(round * 5)")
            }
            answer = try await request(
                gw, "accessory/rename", #"{"accessory": "garage/kilgo-door", "name": "Garage Door Opener"}"#)
            XCTAssertEqual(answer["status"], "ok", "\(answer)")
            var held: [String: String] = [:]
            try? await waitUntil("the renamed and removed accessories' topics gone") {
                held = try await gw.retained("home/#")
                return held["home/garage/kilgo-door/$info"] == nil
                    && !held.keys.contains { $0.contains("/bedroom-lamp/") }
            }
            try await assertForeignUntouched(gw, "after renames, a removal and sets")
            XCTAssertNil(held["home/garage/kilgo-door/$info"], "the renamed accessory's old topic stayed")
            XCTAssertNotNil(held["home/garage/garage-door-opener/$info"])
            XCTAssertFalse(held.keys.contains { $0.contains("/bedroom-lamp/") }, "the removed lamp stayed")

            let stopped = await gw.stopGateway()
            XCTAssertNil(stopped, "the gateway stopped with an error")
            try await assertForeignUntouched(gw, "after the stop")
            // None of the other client's topics was taken for a request the gateway could not serve.
            let reported = gw.seen.elements.filter { $0.topic == "home/$gateway/error" }.map(\.string)
                .filter { text in Self.foreign.keys.contains { text.contains($0) } }
            XCTAssertEqual(reported, [], "the gateway answered another client's topics")
        }
    }

    /// An accessory whose file is removed while the gateway is down has every retained topic of
    /// its own cleared at the next start — its `$availability` and discovery config too — and
    /// nothing else is; with a persistent session and a clean one, and also when the state
    /// directory (and with it the record) was lost, from the tree the earlier run left on the broker.
    func testAccessoryRemovedWhileDownIsClearedAtTheNextStart() async throws {
        // A home of its own for each run: the run removes a file of it.
        let variants = [(false, false), (true, false), (false, true)]
        for ((loseTheState, cleanSession), rig) in variants.flatMap({ variant in Rig.enabled.map { (variant, $0) } }) {
            let home = try homeDirectory()
            let session = Self.session(clean: cleanSession)
            let variant = "lose the state: \(loseTheState), clean session: \(cleanSession)"
            await onEveryRig([rig], configure: session, accessories: home.url, before: Self.publishForeign) { gw in
                let before = try await gw.retained("home/#")
                let front = before.keys.filter { $0.contains("/front-door-lock/") }
                XCTAssertGreaterThan(front.count, 5, "the front door's topics: \(front)")
                let discovery = try await gw.retained("homeassistant/device/+/config")
                let stopped = await gw.stopGateway()
                XCTAssertNil(stopped, variant)

                try FileManager.default.removeItem(atPath: home.file("front-door.yml"))
                // The stopped gateway's database lock lives as long as the rig: the next run gets a
                // copy of its state directory, or none.
                let state = try TemporaryDirectory(prefix: "homemqtt-neighbour-state")
                if !loseTheState {
                    for file in try FileManager.default.contentsOfDirectory(atPath: gw.state.path) {
                        try FileManager.default.copyItem(atPath: gw.state.file(file), toPath: state.file(file))
                    }
                }
                let next = try await gw.another(
                    clientID: "gateway-under-test", state: state, accessories: home.url, configure: session)
                var after: [String: String] = [:]
                var discoveryAfter: [String: String] = [:]
                try? await waitUntil("the removed accessory's topics cleared") {
                    after = try await gw.retained("home/#")
                    discoveryAfter = try await gw.retained("homeassistant/device/+/config")
                    return !after.keys.contains { $0.contains("/front-door-lock/") }
                        && discoveryAfter.count == discovery.count - 1
                }
                let left = after.keys.filter { $0.contains("/front-door-lock/") }
                XCTAssertEqual(left, [], "\(variant); the removed accessory's topics stayed")
                try await assertForeignUntouched(gw, "after a restart (\(variant))")
                let others = before.keys.filter { !$0.contains("/front-door-lock/") && after[$0] == nil }
                XCTAssertEqual(others, [], "topics of accessories still served went away (\(variant))")
                XCTAssertEqual(
                    discoveryAfter.count, discovery.count - 1, "the removed accessory's discovery config (\(variant))")
                let nextStopped = await next.stop()
                XCTAssertNil(nextStopped, variant)
            }
        }
    }

    /// A gateway whose state directory was lost finds its own retained `$gateway/status`
    /// (`offline`, its will) at the next start: the tree it left says the base was its own, so
    /// the status is no other client's and no warning says so.
    func testItsOwnStatusIsNotAnotherClientsAfterTheStateIsLost() async throws {
        await onEveryRig(configure: Self.session(clean: false)) { gw in
            let stopped = await gw.stopGateway()
            XCTAssertNil(stopped)
            let held = try await gw.retained("home/#")
            XCTAssertEqual(held["home/$gateway/status"], "offline")

            let lost = try TemporaryDirectory(prefix: "homemqtt-lost-state")
            let next = try await gw.another(
                clientID: "gateway-under-test", state: lost, configure: Self.session(clean: false))
            // `online` is out, and the line saying so follows it (in memory the status reaches a
            // subscriber before the gateway logs it): the look at the broker, and any warning of
            // it, came before.
            try? await waitUntil("the gateway's online line") { next.log.text.contains("gateway online") }
            let log = next.log.text
            await next.stop()
            XCTAssertTrue(log.contains("gateway online"), log)
            XCTAssertTrue(log.contains("from the broker's tree"), log)
            XCTAssertFalse(log.contains("retained topics of another client"), log)
        }
    }

    /// Another client's retained topic where the gateway must publish is replaced (the gateway
    /// needs it) and said in the log, naming it; a retained request is refused and left alone.
    func testACollisionIsLoggedAndARetainedRequestIsLeftAlone() async throws {
        let info = "home/garage/garage-door-opener/$info"
        let set = "home/garage/garage-door-opener/garage-light/brightness/set"
        let before: (any MQTTTransport) async throws -> Void = { client in
            try await client.publish(info, payload: Array("not the gateway's".utf8), qos: .atLeastOnce, retain: true)
            try await client.publish(set, payload: Array("40".utf8), qos: .atLeastOnce, retain: true)
        }
        await onEveryRig(before: before) { gw in
            let refused = try await gw.next("home/garage/garage-door-opener/garage-light/brightness/result")
            XCTAssertEqual(try JSONValue(parsing: refused.payload)["code"], "retained")
            let held = try await gw.retained("home/#")
            XCTAssertEqual(held[set], "40", "the other client's retained request was cleared")
            XCTAssertNotEqual(held[info], "not the gateway's")
            let log = gw.log.text
            XCTAssertTrue(log.contains("retained topics of another client") && log.contains(info), log)
        }
    }
}
