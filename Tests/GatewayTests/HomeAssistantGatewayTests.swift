import Foundation
import Gateway
@testable import HomeAssistant
@testable import HomeAssistantTestSupport
import HomeModel
import MQTT
import TestSupport
import XCTest

/// The gateway in Home Assistant (issue 44): a device of diagnostic entities read from the
/// retained health document, and a disabled last-seen sensor per accessory read from its
/// `$last-seen`, each only while the gateway publishes what it reads. What Home Assistant shows
/// is each value template rendered against the documents the gateway published (`HATemplate`,
/// held to the real Jinja2 by HomeAssistantJinjaParityTests). On every enabled rig.
final class HomeAssistantGatewayTests: RigTestCase {
    static let configTopic = "homeassistant/device/homemqtt__gateway/config"
    static let healthTopic = "home/$gateway/health"

    /// Each component of the gateway's config, by key, as Home Assistant would show it on `health`.
    private static func shown(_ config: JSONValue, _ health: String) throws -> [String: String] {
        var out: [String: String] = [:]
        for (key, component) in config["components"]?.objectValue ?? [:] {
            let template = try XCTUnwrap(component["value_template"]?.stringValue, key)
            out[key] = try XCTUnwrap(HATemplate.render(template, value: health), "\(key) renders")
        }
        return out
    }

    func testTheGatewayIsADeviceOfDiagnosticsReadFromItsHealthDocument() async {
        let manual = ManualGatewayClock()
        await onEveryRig(configure: { $0.healthInterval = 30 }, clock: .manual(manual)) { gw in
            let configs = try await gw.retained("homeassistant/#")
            let config = try JSONValue(parsing: Array(try XCTUnwrap(configs[Self.configTopic]).utf8))
            XCTAssertEqual(config["device"]?["identifiers"], ["homemqtt__gateway"])
            XCTAssertEqual(config["device"]?["name"], "HomeMQTT")
            XCTAssertEqual(config["origin"]?["name"], "HomeMQTT")
            XCTAssertEqual(
                config["availability"]?.arrayValue?.compactMap { $0["topic"]?.stringValue }, [gw.gateway.statusTopic])
            let components = try XCTUnwrap(config["components"]?.objectValue)
            XCTAssertEqual(
                Set(components.keys),
                [
                    "uptime", "broker", "reachable", "unreachable", "received_rate", "published_rate", "backlog",
                    "last_error",
                ])
            for (key, component) in components {
                XCTAssertEqual(component["state_topic"]?.stringValue, Self.healthTopic, key)
                XCTAssertEqual(component["entity_category"], "diagnostic", key)
                XCTAssertEqual(component["unique_id"]?.stringValue, "homemqtt__gateway_\(key)")
            }
            XCTAssertEqual(components["broker"]?["device_class"], "connectivity")
            XCTAssertEqual(components["uptime"]?["device_class"], "duration")

            // What Home Assistant shows of the document the gateway published.
            let tree = await gw.gateway.tree
            let healthRetained = try await gw.retained(Self.healthTopic)
            let text = try XCTUnwrap(healthRetained[Self.healthTopic])
            let health = try JSONValue(parsing: Array(text.utf8))
            let shown = try Self.shown(config, text)
            XCTAssertEqual(shown["broker"], "ON")
            XCTAssertEqual(shown["reachable"], "\(tree.accessories.count)")
            XCTAssertEqual(shown["unreachable"], "0")
            XCTAssertEqual(shown["last_error"], "None", "no error yet: unknown")
            XCTAssertEqual(shown["uptime"], "\(Int((health["uptime"]?.doubleValue ?? -1).rounded()))")
            XCTAssertEqual(shown["backlog"], "\(health["outbox"]?["backlog"]?.intValue ?? -1)")
            for (key, field) in [("received_rate", "received-per-second"), ("published_rate", "published-per-second")] {
                let rate = try XCTUnwrap(Double(try XCTUnwrap(shown[key])), key)
                XCTAssertEqual(rate, health["messages"]?[field]?.doubleValue, key)
            }

            // A request refused: the next refresh shows its message as the last error.
            let lamp = try await gw.characteristic("Bedroom Lamp", "brightness")
            let refused = try await gw.request(lamp.topic + "/set", "500", answer: lamp.topic + "/result")
            XCTAssertEqual(refused["status"], "error")
            let message = try XCTUnwrap(refused["message"]?.stringValue)
            gw.seen.clear()
            manual.advance(by: .seconds(30))
            let refreshed = try await gw.next(Self.healthTopic).string
            XCTAssertEqual(try Self.shown(config, refreshed)["last_error"], message)

            // An accessory unreachable: the document at once, and the counts with it.
            let lampID = try await gw.accessoryID(named: "Bedroom Lamp")
            gw.seen.clear()
            _ = await gw.home.setReachable(lampID, false)
            let changed = try await gw.next(Self.healthTopic) { $0.contains("\"unreachable\":1") }.string
            let after = try Self.shown(config, changed)
            XCTAssertEqual(after["unreachable"], "1")
            XCTAssertEqual(after["reachable"], "\(tree.accessories.count - 1)")
        }
    }

    func testEachAccessoryHasADisabledLastSeenTimestamp() async {
        await onEveryRig(configure: { $0.lastSeenInterval = 60 }) { gw in
            let lamp = try await gw.characteristic("Bedroom Lamp", "brightness")
            let accessoryTopic = lamp.topic.split(separator: "/").prefix(3).joined(separator: "/")
            let lampID = try await gw.accessoryID(named: "Bedroom Lamp")
            let nodeID = HomeAssistantDiscovery.nodeID(accessoryID: lampID)
            let configs = try await gw.retained("homeassistant/#")
            let configTopic = "homeassistant/device/\(nodeID)/config"
            let config = try JSONValue(parsing: Array(try XCTUnwrap(configs[configTopic]).utf8))
            let sensor = try XCTUnwrap(config["components"]?["last_seen"])
            XCTAssertEqual(sensor["platform"], "sensor")
            XCTAssertEqual(sensor["device_class"], "timestamp")
            XCTAssertEqual(sensor["entity_category"], "diagnostic")
            XCTAssertEqual(sensor["enabled_by_default"], false, "disabled until the user enables it")
            XCTAssertEqual(sensor["unique_id"]?.stringValue, "\(nodeID)_last_seen")
            XCTAssertEqual(sensor["state_topic"]?.stringValue, accessoryTopic + "/$last-seen")
            // Shown while the accessory is unreachable, when it matters most: the gateway's status alone.
            XCTAssertEqual(
                sensor["availability"]?.arrayValue?.compactMap { $0["topic"]?.stringValue }, [gw.gateway.statusTopic])
            // Every accessory with a device has one.
            for (topic, payload) in configs where topic != Self.configTopic && !payload.isEmpty {
                let document = try JSONValue(parsing: Array(payload.utf8))
                XCTAssertNotNil(document["components"]?["last_seen"], topic)
            }

            let lastSeenRetained = try await gw.retained(accessoryTopic + "/$last-seen")
            let text = try XCTUnwrap(lastSeenRetained[accessoryTopic + "/$last-seen"])
            let stamp = try XCTUnwrap(JSONValue(parsing: Array(text.utf8))["last-seen"]?.stringValue)
            let template = try XCTUnwrap(sensor["value_template"]?.stringValue)
            let shown = try XCTUnwrap(try HATemplate.render(template, value: text))
            XCTAssertEqual(shown, stamp)
            // Home Assistant's timestamp sensor takes an ISO 8601 time with its zone.
            let date = try Date(shown, strategy: .iso8601)
            XCTAssertLessThan(abs(date.timeIntervalSinceNow), 60, "seen as the gateway started")
        }
    }

    func testWithoutTheDocumentsThereAreNoEntitiesReadingThem() async {
        await onEveryRig(configure: {
            $0.healthInterval = 0
            $0.lastSeenInterval = 0
        }) { gw in
            let configs = try await gw.retained("homeassistant/#")
            XCTAssertGreaterThan(configs.count, 5, "the accessories' devices")
            XCTAssertNil(configs[Self.configTopic], "no gateway device without its health document")
            for (topic, payload) in configs {
                XCTAssertFalse(payload.contains("$last-seen"), "\(topic): no last-seen sensor without $last-seen")
            }
        }
    }
}
