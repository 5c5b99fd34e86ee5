import Foundation
import HomeModel
import TestSupport
import XCTest

@testable import Gateway
@testable import HomeAssistant
@testable import HomeAssistantTestSupport

/// The gateway's own device and the accessories' last-seen sensors (issue 44) against Home
/// Assistant's schema, and their value templates rendered by the real Jinja2 with Home
/// Assistant's filters (`HAJinja`) on documents the gateway's own code makes
/// (`GatewayHealth.document`, `$last-seen`'s form): what Home Assistant shows, and the evaluator
/// GatewayTests renders the published documents with agrees. HomeAssistantGatewayTests (in
/// GatewayTests) reads them from a running gateway.
final class HomeAssistantGatewayDeviceTests: XCTestCase {
    static func gatewayConfig(base: String = "home") -> (topic: String, document: JSONValue) {
        HomeAssistantDiscovery.gatewayConfig(
            base: base, healthTopic: "\(base)/$gateway/health", prefix: "homeassistant",
            gatewayStatusTopic: "\(base)/$gateway/status")
    }

    static func simulatedTree() throws -> TopicTree {
        let home = try XCTUnwrap(try HomeAssistantCommandsTests.homes().first { $0.0 == "simulated home" })
        return TopicTree(base: "home", accessories: home.1, home: Home(), scope: try ScopeFilter(ScopeConfig()))
    }

    func testTheGatewayDeviceAndTheLastSeenSensorsFitHomeAssistantsSchema() throws {
        let (topic, document) = Self.gatewayConfig()
        XCTAssertEqual(topic, "homeassistant/device/homemqtt__gateway/config")
        let components = try XCTUnwrap(document["components"]?.objectValue)
        XCTAssertEqual(components.count, 8)
        for (key, component) in components {
            XCTAssertEqual(HASchema.problems(try XCTUnwrap(component.objectValue)), [], key)
        }
        XCTAssertTrue(
            HomeAssistantDiscovery.isOwnConfig(
                topic: topic, payload: document, prefix: "homeassistant", gatewayStatusTopic: "home/$gateway/status"),
            "an earlier run's gateway config is known as ours, and cleared when no longer published")

        let tree = try Self.simulatedTree()
        let configs = HomeAssistantDiscovery.configs(
            tree: tree, prefix: "homeassistant", gatewayStatusTopic: "home/$gateway/status",
            options: .init(lastSeen: true))
        XCTAssertNil(configs[topic], "no accessory's config is the gateway's")
        XCTAssertGreaterThan(configs.count, 5)
        for (topic, config) in configs {
            let sensor = try XCTUnwrap(config["components"]?["last_seen"]?.objectValue, topic)
            XCTAssertEqual(HASchema.problems(sensor), [], topic)
            XCTAssertEqual(sensor["enabled_by_default"], false)
        }
        let without = HomeAssistantDiscovery.configs(
            tree: tree, prefix: "homeassistant", gatewayStatusTopic: "home/$gateway/status")
        XCTAssertTrue(without.values.allSatisfy { $0["components"]?["last_seen"] == nil }, "none when off")
    }

    func testTheGatewayDeviceIsOnePerBaseAndNoAccessorysID() {
        XCTAssertEqual(HomeAssistantDiscovery.gatewayNodeID(), "homemqtt__gateway")
        XCTAssertEqual(HomeAssistantDiscovery.gatewayNodeID(base: "site-b"), "homemqtt_site_b___gateway")
        // Accessory ids that come closest: none folds to the gateway's node id.
        for (id, base) in [("gateway", "home"), ("_gateway", "home"), ("gateway", "site-b"), ("_gateway", "site-b")] {
            XCTAssertNotEqual(
                HomeAssistantDiscovery.nodeID(accessoryID: id, base: base),
                HomeAssistantDiscovery.gatewayNodeID(base: base), id)
        }
        let named = HomeAssistantDiscovery.gatewayConfig(
            base: "lake", healthTopic: "lake/$gateway/health", prefix: "homeassistant",
            gatewayStatusTopic: "lake/$gateway/status", options: .init(homeName: "Cabin"))
        XCTAssertEqual(named.document["device"]?["name"], "HomeMQTT Cabin")
        XCTAssertEqual(named.document["device"]?["suggested_area"], "Cabin", "the home's area, as its accessories'")
        XCTAssertNil(Self.gatewayConfig().document["device"]?["suggested_area"])
        XCTAssertEqual(Self.gatewayConfig(base: "site-b").document["device"]?["name"], "HomeMQTT site-b")
    }

    /// The gateway's health document as it makes it, with `errors` answered before.
    static func health(errors: [String]) -> String {
        let activity = GatewayActivity()
        for message in errors {
            activity.answered(
                "home/a/b/c/result", op: "set",
                Result<Int, GatewayFailure>.failure(GatewayFailure(code: .outOfRange, message: message)))
        }
        let inputs = GatewayHealth.Inputs(
            status: "online", uptime: .seconds(3_661.6), brokerURL: "mqtt://localhost:1883", brokerState: "connected",
            connected: true, lastError: nil, activity: activity, backlog: 3, sourceName: "sim",
            accessories: [("sim:1", true), ("sim:2", false), ("sim:3", true)], rooms: 1, characteristics: 9,
            retainedTopics: 20, publishesNotSent: 0, publishesRefused: 0, interval: 60)
        return GatewayHealth(interval: 60).document(inputs).encoded()
    }

    func testTheTemplatesShowTheDocumentsAsJinja2Does() async throws {
        let components = try XCTUnwrap(Self.gatewayConfig().document["components"]?.objectValue)
        let keys = components.keys.sorted()
        let documents = [Self.health(errors: []), Self.health(errors: ["first", "500 is above 100"])]
        var jobs: [HAJinja.Job] = []
        for document in documents {
            for key in keys {
                let template = try XCTUnwrap(components[key]?["value_template"]?.stringValue)
                jobs.append(.init(template: template, payload: document))
            }
        }
        let lastSeen = HomeAssistantDiscovery.lastSeenSensor(
            node: try XCTUnwrap(try Self.simulatedTree().accessories.first), nodeID: "homemqtt_x",
            gatewayStatusTopic: "home/$gateway/status")
        let stamp = "2026-11-27T17:30:00.120Z"
        jobs.append(
            .init(
                template: try XCTUnwrap(lastSeen.config["value_template"]?.stringValue),
                payload: #"{"last-seen":"\#(stamp)","reconnects":1}"#))

        let jinja = try await HAJinja.render(jobs)
        for (index, job) in jobs.enumerated() {
            XCTAssertEqual(try HATemplate.render(job.template, value: job.payload ?? ""), jinja[index], job.template)
        }
        let shown = Dictionary(uniqueKeysWithValues: zip(keys, jinja.prefix(keys.count)))
        XCTAssertEqual(shown["uptime"], "3662")
        XCTAssertEqual(shown["broker"], "ON")
        XCTAssertEqual(shown["reachable"], "2")
        XCTAssertEqual(shown["unreachable"], "1")
        XCTAssertEqual(shown["backlog"], "3")
        XCTAssertEqual(shown["received_rate"], "0.0")
        XCTAssertEqual(shown["last_error"], "None", "Home Assistant's unknown")
        let withErrors = Dictionary(uniqueKeysWithValues: zip(keys, jinja.dropFirst(keys.count).prefix(keys.count)))
        XCTAssertEqual(withErrors["last_error"], "500 is above 100", "the newest")
        XCTAssertEqual(jinja.last, stamp, "the timestamp as Home Assistant parses it")
    }
}
