import Foundation
import Gateway
import HomeMQTTApp
import HomeModel
import Simulator
import TestSupport
import XCTest

@testable import HomeAssistant

/// Issue 43, item 9: an accessory's Home Assistant identity (its config topic, device identifier
/// and unique ids) is the one it was first discovered with, kept in the state directory
/// (`HomeAssistantIdentity`), wherever it moves and across restarts; a state directory from
/// before gives today's ids; two gateways on one broker never share an id, and with site names
/// their devices are told apart. GatewayTests' HomeAssistantIdentityMQTTTests moves accessories
/// between the homes of a running gateway.
final class HomeAssistantIdentityTests: XCTestCase {
    static func accessories() throws -> [Accessory] {
        try AccessoryFileLoader.load(directory: repositoryRoot.appendingPathComponent("Config/accessories")).accessories
    }

    static func tree(_ accessories: [Accessory], base: String) throws -> TopicTree {
        TopicTree(base: base, accessories: accessories, home: Home(), scope: try ScopeFilter(ScopeConfig()))
    }

    /// Every config of `tree` as its gateway publishes them with `identity`'s ids.
    static func configs(
        _ tree: TopicTree, identity: HomeAssistantIdentity?, options: HomeAssistantDiscovery.Options = .init()
    ) -> [String: JSONValue] {
        let context = HomeAssistantDiscovery.Context(
            tree: tree, prefix: "homeassistant", gatewayStatusTopic: "\(tree.base)/$gateway/status", options: options,
            nodeIDs: identity?.nodeIDs(for: tree.accessories.map(\.id), base: tree.base))
        var out: [String: JSONValue] = [:]
        for node in tree.accessories {
            if let (topic, document) = context.config(node) { out[topic] = document }
        }
        return out
    }

    /// Config topic → every unique id of its components, checked to name the topic's device.
    static func identities(_ configs: [String: JSONValue], _ tree: TopicTree) throws -> [String: [String]] {
        var out: [String: [String]] = [:]
        for (topic, document) in configs {
            let identifier = try XCTUnwrap(document["device"]?["identifiers"]?.arrayValue?.first?.stringValue)
            XCTAssertEqual(topic, "homeassistant/device/\(identifier)/config", "the topic names the device")
            let components = try XCTUnwrap(document["components"]?.objectValue, topic)
            let uniqueIDs = components.values.compactMap { $0["unique_id"]?.stringValue }.sorted()
            XCTAssertEqual(uniqueIDs.count, components.count, topic)
            XCTAssertTrue(uniqueIDs.allSatisfy { $0.hasPrefix(identifier + "_") }, "\(topic): \(uniqueIDs)")
            out[topic] = uniqueIDs
        }
        return out
    }

    func testAStateDirectoryFromBeforeGivesTodaysIdsAndRecordsThem() throws {
        let state = try TemporaryDirectory(prefix: "homemqtt-ha-identity")
        let accessories = try Self.accessories()
        for base in ["home", "site-b"] {
            let tree = try Self.tree(accessories, base: base)
            let identity = try HomeAssistantIdentity(stateDirectory: state.file(base))
            let today = HomeAssistantDiscovery.configs(
                tree: tree, prefix: "homeassistant", gatewayStatusTopic: "\(base)/$gateway/status")
            let now = Self.configs(tree, identity: identity)
            XCTAssertGreaterThan(today.count, 5)
            XCTAssertEqual(now, today, "no new entity and no `_2` for an existing user on \(base)")
            try identity.flush()
            let file = URL(fileURLWithPath: state.file(base)).appendingPathComponent(HomeAssistantIdentity.fileName)
            let stored = try JSONValue(parsing: Array(try Data(contentsOf: file)))
            XCTAssertEqual(stored["version"], 1)
            XCTAssertEqual(
                stored["accessories"]?.objectValue?.mapValues { $0["node-id"] },
                Dictionary(
                    uniqueKeysWithValues: HomeAssistantDiscovery.nodeIDs(
                        for: accessories.map(\.id), base: base
                    ).map { ($0.key, JSONValue.string($0.value)) }),
                "every accessory's node id is recorded as today's rule gives it")
        }
    }

    func testAnAccessoryMovedToAnotherHomeAndBackKeepsItsConfigTopicAndUniqueIDsAcrossARestart() throws {
        let state = try TemporaryDirectory(prefix: "homemqtt-ha-identity")
        let accessories = try Self.accessories()
        let garage = try XCTUnwrap(accessories.first { $0.name.contains("Garage") })
        let others = accessories.filter { $0.id != garage.id }
        let identity = try HomeAssistantIdentity(stateDirectory: state.path)

        let home = try Self.tree(accessories, base: "home")
        let before = try Self.identities(Self.configs(home, identity: identity), home)
        let cabinTree = try Self.tree([garage], base: "home-cabin")
        let inCabin = try Self.identities(Self.configs(cabinTree, identity: identity), cabinTree)
        let garageTopic = try XCTUnwrap(inCabin.keys.first)
        XCTAssertEqual(inCabin.count, 1)
        XCTAssertEqual(inCabin[garageTopic], before[garageTopic], "the same config topic and every unique id")
        // Without the record it would have been another device (today's rule on the cabin's base).
        XCTAssertNotEqual(
            garageTopic,
            HomeAssistantDiscovery.configTopic(
                prefix: "homeassistant",
                nodeID: HomeAssistantDiscovery.nodeID(accessoryID: garage.id, base: "home-cabin")))
        let left = try Self.tree(others, base: "home")
        XCTAssertEqual(
            try Self.identities(Self.configs(left, identity: identity), left), before.filter { $0.key != garageTopic })

        // A new accessory in the cabin whose id folds to the garage's slug there: its own id.
        var twin = garage
        twin.id = garage.id.replacingOccurrences(of: ":", with: "-")
        XCTAssertEqual(
            HomeAssistantDiscovery.nodeID(accessoryID: twin.id, base: "home-cabin"),
            HomeAssistantDiscovery.nodeID(accessoryID: garage.id, base: "home-cabin"))
        let pair = try Self.tree([garage, twin], base: "home-cabin")
        let both = try Self.identities(Self.configs(pair, identity: identity), pair)
        XCTAssertEqual(both.count, 2, "two devices: \(both.keys.sorted())")
        XCTAssertEqual(both[garageTopic], before[garageTopic])
        try identity.flush()

        // A restart (the file read again), then back home: nothing changed.
        let restarted = try HomeAssistantIdentity(stateDirectory: state.path)
        let back = try Self.identities(Self.configs(home, identity: restarted), home)
        XCTAssertEqual(back, before)
        let pairAgain = try Self.identities(Self.configs(pair, identity: restarted), pair)
        XCTAssertEqual(pairAgain, both, "the twin's id was recorded too")
    }

    func testAnUnreadableRecordIsAnErrorNotANewSetOfIds() throws {
        let state = try TemporaryDirectory(prefix: "homemqtt-ha-identity")
        let file = URL(fileURLWithPath: state.path).appendingPathComponent(HomeAssistantIdentity.fileName)
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data("{ not json".utf8).write(to: file)
        XCTAssertThrowsError(try HomeAssistantIdentity(stateDirectory: state.path)) { error in
            XCTAssertTrue((error as? ModelError)?.message.contains(file.path) == true, "\(error)")
        }
        XCTAssertEqual(try Data(contentsOf: file), Data("{ not json".utf8), "left as it was")
    }

    /// Two gateways on one broker: their own state directories, their own bases.
    func testTwoGatewaysOnOneBrokerNeverShareAnIdAndTheirSitesAreToldApart() throws {
        let accessories = try Self.accessories()
        var topics: [Set<String>] = []
        var uniqueIDs: [Set<String>] = []
        var deviceNames: [Set<String>] = []
        var gatewayNames: [String] = []
        for (base, site) in [("site-a", "Town"), ("site-b", "Cabin")] {
            let state = try TemporaryDirectory(prefix: "homemqtt-ha-identity")
            let identity = try HomeAssistantIdentity(stateDirectory: state.path)
            let tree = try Self.tree(accessories, base: base)
            let plain = Self.configs(tree, identity: identity)
            let named = Self.configs(
                tree, identity: identity, options: .init(site: .init(name: site)))
            XCTAssertEqual(Set(named.keys), Set(plain.keys), "a site name changes no id")
            topics.append(Set(named.keys))
            uniqueIDs.append(Set(try Self.identities(named, tree).values.joined()))
            let names = named.values.compactMap { $0["device"]?["name"]?.stringValue }
            XCTAssertTrue(names.allSatisfy { $0.hasPrefix(site + " ") }, "\(names)")
            XCTAssertEqual(
                Set(names.map { String($0.dropFirst(site.count + 1)) }),
                Set(plain.values.compactMap { $0["device"]?["name"]?.stringValue }))
            deviceNames.append(Set(names))
            let gateway = HomeAssistantDiscovery.gatewayConfig(
                base: base, healthTopic: "\(base)/$gateway/health", prefix: "homeassistant",
                gatewayStatusTopic: "\(base)/$gateway/status", options: .init(site: .init(name: site)))
            gatewayNames.append(try XCTUnwrap(gateway.document["device"]?["name"]?.stringValue))
        }
        XCTAssertTrue(topics[0].isDisjoint(with: topics[1]), "no config topic shared")
        XCTAssertTrue(uniqueIDs[0].isDisjoint(with: uniqueIDs[1]), "no unique id shared")
        XCTAssertTrue(deviceNames[0].isDisjoint(with: deviceNames[1]), "no device name shared")
        XCTAssertEqual(gatewayNames, ["HomeMQTT Town site-a", "HomeMQTT Cabin site-b"])
    }

    func testASiteNameMayBeShownInAreasInstead() throws {
        let accessories = try Self.accessories()
        let tree = try Self.tree(accessories, base: "home")
        let plain = Self.configs(tree, identity: nil)
        let inAreas = Self.configs(
            tree, identity: nil, options: .init(site: .init(name: "Cabin", inDeviceNames: false, inAreas: true)))
        var areas = 0
        for (topic, document) in plain {
            let device = try XCTUnwrap(inAreas[topic]?["device"], topic)
            XCTAssertEqual(device["name"], document["device"]?["name"], "names as they were")
            let area = document["device"]?["suggested_area"]?.stringValue
            XCTAssertEqual(device["suggested_area"]?.stringValue, area.map { "Cabin \($0)" } ?? "Cabin", topic)
            if area != nil { areas += 1 }
        }
        XCTAssertGreaterThan(areas, 3, "rooms became the site's areas")
        let gateway = HomeAssistantDiscovery.gatewayConfig(
            base: "home", healthTopic: "home/$gateway/health", prefix: "homeassistant",
            gatewayStatusTopic: "home/$gateway/status",
            options: .init(site: .init(name: "Cabin", inDeviceNames: false, inAreas: true)))
        XCTAssertEqual(gateway.document["device"]?["name"], "HomeMQTT")
        XCTAssertEqual(gateway.document["device"]?["suggested_area"], "Cabin")
    }

    func testTheSiteNameIsConfiguredAndChecked() throws {
        func parse(_ text: String) throws -> HomeAssistantConfig {
            try HomeMQTTApp.parseConfig(text, file: "gateway.yml", environment: [:])[HomeAssistantConfig.self]
        }
        XCTAssertNil(try parse("base-topic: home\n").site, "off by default")
        XCTAssertEqual(
            try parse("homeassistant:\n  site-name: Cabin\n").site, .init(name: "Cabin"), "in device names by default")
        XCTAssertEqual(
            try parse("homeassistant:\n  site-name: Cabin\n  site-name-in: area\n").site,
            .init(name: "Cabin", inDeviceNames: false, inAreas: true))
        XCTAssertEqual(
            try parse("homeassistant:\n  site-name: Cabin\n  site-name-in: [device-name, area]\n").site,
            .init(name: "Cabin", inDeviceNames: true, inAreas: true))
        let bad: [(String, String)] = [
            ("homeassistant:\n  site-name: \"\"\n", "homeassistant.site-name"),
            ("homeassistant:\n  site-name: \" Cabin\"\n", "homeassistant.site-name"),
            ("homeassistant:\n  site-name: \(String(repeating: "x", count: 41))\n", "homeassistant.site-name"),
            ("homeassistant:\n  site-name: Cabin\n  site-name-in: roof\n", "homeassistant.site-name-in"),
            ("homeassistant:\n  site-name-in: area\n", "homeassistant.site-name-in"),
        ]
        for (text, key) in bad {
            XCTAssertThrowsError(try parse(text), text) { error in
                let error = error as? ConfigError
                XCTAssertEqual(error?.key, key, text)
                XCTAssertEqual(error?.file, "gateway.yml", text)
                XCTAssertTrue(
                    error?.description.hasPrefix("gateway.yml: \(key): ") == true, "\(String(describing: error))")
            }
        }
    }
}
