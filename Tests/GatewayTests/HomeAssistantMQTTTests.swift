import Foundation
import Gateway
@testable import HomeAssistant
import HomeModel
import MQTT
import TestSupport
import XCTest

/// Discovery through the broker: configs retained at start, republished on Home Assistant's
/// birth message, cleared when an accessory leaves. On every enabled rig (`Rig.enabled`).
final class HomeAssistantMQTTTests: RigTestCase {
    func discoveryConfigs(_ gw: RiggedGateway) async throws -> [String: String] {
        try await gw.retained("homeassistant/#")
    }

    func testConfigsAreRetainedOnePerAccessoryAndUseOurTopics() async throws {
        await onEveryRig { gw in
            let configs = try await discoveryConfigs(gw)
            let accessories = await gw.gateway.tree.accessories.count
            XCTAssertGreaterThan(configs.count, 5)
            XCTAssertLessThanOrEqual(configs.count, accessories)
            for (topic, payload) in configs {
                XCTAssertTrue(topic.hasPrefix("homeassistant/device/homemqtt_") && topic.hasSuffix("/config"), topic)
                let json = try JSONValue(parsing: payload)
                XCTAssertEqual(json["origin"]?["name"], .string("HomeMQTT"))
                let components = try XCTUnwrap(json["components"]?.objectValue, topic)
                for (_, component) in components {
                    for key in ["state_topic", "command_topic"] {
                        if let value = component[key]?.stringValue {
                            XCTAssertTrue(value.hasPrefix("home/"), "\(key) \(value)")
                        }
                    }
                }
            }
            let garage = try XCTUnwrap(configs.values.first { $0.contains("Kilgo Devices") })
            XCTAssertTrue(garage.contains("\"device_class\":\"garage\""), garage)
        }
    }

    func testBirthMessageRepublishesEveryConfig() async throws {
        await onEveryRig { gw in
            let before = try await discoveryConfigs(gw)
            let listener = try await gw.subscriber("homeassistant/device/#")
            // The retained configs a new subscription gets (after its SUBACK, on mosquitto).
            try await listener.seen.waitFor(count: before.count, "retained configs") { $0.retain }
            listener.seen.clear()
            try await gw.publish("homeassistant/status", "offline")
            try await Task.sleep(for: .milliseconds(300))
            XCTAssertEqual(listener.seen.elements.count, 0, "offline republishes nothing")
            try await gw.publish("homeassistant/status", "online")
            let again = try await listener.seen.waitFor(count: before.count, "republished configs", timeout: 10)
            var seen: [String: String] = [:]
            for message in again { seen[message.topic] = message.string }
            XCTAssertEqual(seen, before, "the same configs, byte for byte")
            await listener.close()
        }
    }

    func testAnAccessoryThatLeavesLeavesNoRetainedConfig() async throws {
        await onEveryRig { gw in
            let lampID = try await gw.accessoryID(named: "Garage Door Opener")
            let topic = "homeassistant/device/\(HomeAssistantDiscovery.nodeID(accessoryID: lampID))/config"
            let before = try await discoveryConfigs(gw)
            XCTAssertNotNil(before[topic])
            // Renaming keeps the config topic.
            try await gw.database.renameAccessory(id: lampID, to: "Kilgo Door")
            try await gw.next("home/$gateway/event") { $0.contains("accessory-renamed") }
            try await waitUntil("renamed device") {
                try await self.discoveryConfigs(gw)[topic]?.contains("Kilgo Door") == true
            }
            // Leaving scope clears it.
            _ = try await gw.request(
                "home/$gateway/request/scope/set", #"{"scope": {"manufacturers": {"deny": ["Kilgo Devices, Inc."]}}}"#,
                answer: "home/$gateway/response/scope/set")
            try await waitUntil("config cleared") { try await self.discoveryConfigs(gw)[topic] == nil }
            let after = try await discoveryConfigs(gw)
            XCTAssertEqual(Set(after.keys), Set(before.keys).subtracting([topic]))
        }
    }

    func testDiscoveryCanBeTurnedOff() async throws {
        await onEveryRig(configure: { $0[HomeAssistantConfig.self].enabled = false }) { gw in
            let configs = try await discoveryConfigs(gw)
            XCTAssertEqual(configs, [:])
        }
    }

    func testStaleConfigsOfOursAreClearedAndOthersLeftAlone() async throws {
        let foreign = #"{"device":{"identifiers":["zigbee_1"]},"components":{}}"#
        await onEveryRig(before: { publisher in
            // What an earlier run left for an accessory that is gone now: a config naming our status topic.
            let ghost =
                #"{"origin":{"name":"HomeMQTT"},"device":{"identifiers":["homemqtt_sim_gone"]},"availability":[{"topic":"home/$gateway/status"}],"components":{}}"#
            try await publisher.publish(
                "homeassistant/device/homemqtt_sim_gone/config", payload: Array(ghost.utf8), qos: .atLeastOnce,
                retain: true)
            try await publisher.publish(
                "homeassistant/device/zigbee_1/config", payload: Array(foreign.utf8), qos: .atLeastOnce, retain: true)
        }) { gw in
            try await waitUntil("ghost config cleared") {
                try await self.discoveryConfigs(gw)["homeassistant/device/homemqtt_sim_gone/config"] == nil
            }
            let configs = try await discoveryConfigs(gw)
            XCTAssertEqual(configs["homeassistant/device/zigbee_1/config"], foreign)
        }
    }

    /// Issue 26: Eve's voltage, a float32 of 120.6 that JSON gives as 120.5999984741211, is
    /// 120.6 on `state`, in `$state` and in a `get`'s result; its sensor suggests one decimal.
    func testFloatsReachTheBrokerAtTheirPrecision() async throws {
        await onEveryRig { gw in
            let retained = try await gw.retained("home/#")
            let (topic, text) = try XCTUnwrap(
                retained.first { $0.key.contains("eve-energy") && $0.key.hasSuffix("voltage/state") }, "no voltage")
            XCTAssertEqual(text, "120.6")
            let accessory = topic.split(separator: "/").prefix(3).joined(separator: "/")
            let document = try JSONValue(parsing: try XCTUnwrap(retained[accessory + "/$state"]))
            XCTAssertTrue(
                document.objectValue?.values.contains { $0["eve-voltage"] == .double(120.6) } ?? false, "\(document)")
            let path = String(topic.dropLast("/state".count))
            let answer = try await gw.request(path + "/get", "", answer: path + "/result")
            XCTAssertEqual(answer["value"], .double(120.6), "\(answer)")
            let configs = try await discoveryConfigs(gw)
            let sensor = try XCTUnwrap(
                configs.values.lazy.compactMap { try? JSONValue(parsing: $0) }
                    .flatMap { $0["components"]?.objectValue?.values.map { $0 } ?? [] }
                    .first { $0["state_topic"]?.stringValue == topic })
            XCTAssertEqual(sensor["suggested_display_precision"], 1)
        }
    }

    /// On a base other than `home`, node ids carry the base: an earlier version's configs (ids
    /// without it) that name this gateway's status topic are cleared at start; another
    /// gateway's (another status topic) stay.
    func testUpgradingToIdsWithTheBaseClearsTheOldConfigsOnly() async throws {
        func config(_ status: String) -> [UInt8] {
            Array(
                #"{"origin":{"name":"HomeMQTT"},"device":{"identifiers":["homemqtt_sim_garage"]},"availability":[{"topic":"\#(status)"}],"components":{}}"#
                    .utf8)
        }
        let old = "homeassistant/device/homemqtt_sim_garage/config"
        let other = "homeassistant/device/homemqtt_sim_lamp/config"
        await onEveryRig(
            configure: { $0.baseTopic = "site-b" },
            before: { publisher in
                try await publisher.publish(
                    old, payload: config("site-b/$gateway/status"), qos: .atLeastOnce, retain: true)
                try await publisher.publish(
                    other, payload: config("home/$gateway/status"), qos: .atLeastOnce, retain: true)
            }
        ) { gw in
            try await waitUntil("the old config cleared") { try await self.discoveryConfigs(gw)[old] == nil }
            let configs = try await discoveryConfigs(gw)
            XCTAssertNotNil(configs[other], "another gateway's config stays")
            let ours = configs.keys.filter { $0.hasPrefix("homeassistant/device/homemqtt_site_b__") }
            XCTAssertGreaterThan(ours.count, 5, "\(configs.keys.sorted())")
        }
    }
}
