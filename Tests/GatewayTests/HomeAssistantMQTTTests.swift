import Foundation
import Gateway
@testable import HomeAssistant
@testable import HomeAssistantTestSupport
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
            // One per accessory with entities, and the gateway's own (its health document's).
            XCTAssertNotNil(configs[HomeAssistantGatewayTests.configTopic])
            XCTAssertLessThanOrEqual(configs.count - 1, accessories)
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

    /// Issue 43: an accessory that leaves clears its discovery config first, once, and only then
    /// its own topics; a Home Assistant entity still subscribed to the emptied `$state` failed its
    /// template (`'value_json' is undefined`), and a config cleared three times made it warn.
    func testAnAccessoryThatLeavesClearsItsConfigFirstAndOnce() async throws {
        await onEveryRig { gw in
            let id = try await gw.accessoryID(named: "Garage Door Opener")
            let config = "homeassistant/device/\(HomeAssistantDiscovery.nodeID(accessoryID: id))/config"
            let node = await gw.gateway.tree.accessory(id: id)
            let accessoryTopic = try XCTUnwrap(node?.topic)
            let before = try await discoveryConfigs(gw)
            XCTAssertNotNil(before[config])
            let listener = try await gw.subscriber("#")
            try await gw.database.removeAccessory(id: id)
            try await waitUntil("config cleared") { try await self.discoveryConfigs(gw)[config] == nil }
            // Everything the gateway queued before its answer reached the listener before it.
            _ = try await gw.request(
                "home/$gateway/request/health", "{}", answer: "home/$gateway/response/health")
            try await listener.seen.waitFor("the health answer") { $0.topic == "home/$gateway/response/health" }
            let seen = listener.seen.elements
            await listener.close()
            // A live message comes without its retain flag: an empty payload is a clear.
            let clears = seen.enumerated().filter { $0.element.payload.isEmpty }
            let configClears = clears.filter { $0.element.topic == config }
            XCTAssertEqual(configClears.count, 1, "the config is cleared once")
            let own = clears.filter { $0.element.topic.hasPrefix(accessoryTopic + "/") }
            XCTAssertTrue(
                own.contains { $0.element.topic == accessoryTopic + "/$state" }, "\(own.map(\.element.topic))")
            XCTAssertTrue(own.contains { $0.element.topic.hasSuffix("/state") })
            let first = try XCTUnwrap(configClears.first?.offset)
            XCTAssertEqual(
                own.filter { $0.offset < first }.map(\.element.topic), [],
                "the accessory's topics are cleared after its config")
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

    // MARK: Moved from EndToEndTests' HomeAssistantBinaryTests

    /// The devices of issue 26 the shipped home lacks, as simulated accessories: a fan in speed
    /// steps of 25, a heater-cooler whose thresholds have ranges of their own, a humidifier
    /// that only humidifies.
    static let issueDevices: [String: String] = [
        "hunter-fan.yml": """
        name: Hunter Fan
        manufacturer: Hunter
        room: Bedroom
        services:
          - type: fanv2
            characteristics:
              active: 0
              rotation-speed: { value: 0, min: 0, max: 100, step: 25 }
              rotation-direction: 0
        """,
        "heat-pump.yml": """
        name: Heat Pump
        manufacturer: Daikin
        room: Living Room
        services:
          - type: heater-cooler
            characteristics:
              active: 1
              target-heater-cooler-state: 2
              current-temperature: 22
              heating-threshold: { value: 20, min: 0, max: 25 }
              cooling-threshold: { value: 24, min: 10, max: 35 }
        """,
        "humidifier.yml": """
        name: VOCOlinc Humidifier
        manufacturer: VOCOlinc
        room: Bedroom
        services:
          - type: humidifier-dehumidifier
            characteristics:
              active: 0
              target-humidifier-dehumidifier-state: { value: 1, min: 1, max: 1 }
              humidifier-threshold: 45
        """,
    ]

    func testTwoGatewaysOnOneBrokerKeepTheirConfigsApart() async throws {
        await onEveryRig(configure: { $0.baseTopic = "site-a" }) { gw in
            let one = try await gw.retained("homeassistant/device/+/config")
            XCTAssertGreaterThan(one.count, 5)
            let stateB = try TemporaryDirectory(prefix: "homemqtt-site-b")
            let second = try await gw.another(clientID: "gw-b", state: stateB) { $0.baseTopic = "site-b" }
            var both: [String: String] = [:]
            do {
                try await waitUntil("the second gateway's configs") {
                    both = try await gw.retained("homeassistant/device/+/config")
                    return both.count >= 2 * one.count
                }
            } catch {
                await second.stop()
                throw error
            }
            XCTAssertEqual(both.count, 2 * one.count, "each gateway's configs: \(both.keys.sorted())")
            var uniqueIDs: [String] = []
            for payload in both.values {
                let document = try JSONValue(parsing: payload)
                for component in document["components"]?.objectValue?.values ?? [:].values {
                    uniqueIDs += [component["unique_id"]?.stringValue ?? ""]
                }
            }
            XCTAssertEqual(uniqueIDs.count, Set(uniqueIDs).count, "unique ids are unique across the two gateways")
            // A restart gives the same topics and ids.
            await second.stop()
            let again = try await gw.another(clientID: "gw-b", state: stateB) { $0.baseTopic = "site-b" }
            let afterRestart = try await gw.retained("homeassistant/device/+/config")
            await again.stop()
            XCTAssertEqual(Set(afterRestart.keys), Set(both.keys))
        }
    }

    /// Every kind of command Home Assistant can send for the simulated home's entities and the
    /// issue's devices (every mode and payload, a range's ends and points between), sent as Home
    /// Assistant sends it (template applied): each answered `ok` on its `result` (or `$result`).
    func testWhatHomeAssistantSendsIsAnsweredOK() async throws {
        let accessories = try TemporaryDirectory(prefix: "homemqtt-ha-home")
        let shipped = Rig.shippedAccessories.path
        for name in try FileManager.default.contentsOfDirectory(atPath: shipped) {
            try FileManager.default.copyItem(atPath: shipped + "/" + name, toPath: accessories.file(name))
        }
        for (file, yaml) in Self.issueDevices {
            try yaml.write(toFile: accessories.file(file), atomically: true, encoding: .utf8)
        }
        await onEveryRig(accessories: accessories.url) { gw in
            let configs = try await gw.retained("homeassistant/device/+/config")
            XCTAssertGreaterThan(configs.count, 5)
            var sent = 0
            var throughSet = 0
            for (topic, payload) in configs.sorted(by: { $0.key < $1.key }) {
                let document = try JSONValue(parsing: payload)
                for (key, component) in document["components"]?.objectValue ?? [:] {
                    let config = try XCTUnwrap(component.objectValue)
                    let platform = try XCTUnwrap(config["platform"]?.stringValue)
                    for (option, value) in config where option.hasSuffix("_topic") {
                        guard HACommands.isCommand(option), let command = value.stringValue else { continue }
                        let all = try HACommands.commands(platform: platform, option: option, config)
                        // Every mode, option and payload; of a range, its ends and three points between.
                        let picked =
                            all.count <= 8 ? Array(all.indices) : Set((0...4).map { (all.count - 1) * $0 / 4 }).sorted()
                        for index in picked {
                            let variables = all[index]
                            var text = variables["value"]?.text ?? ""
                            if let template = config[option.replacingOccurrences(of: "_topic", with: "_template")]?
                                .stringValue
                            {
                                text = try XCTUnwrap(try HATemplate.render(template, variables: variables))
                            }
                            // `…/set` is answered on `…/result`, `<accessory>/$set` on `<accessory>/$result`.
                            let resultTopic = String(command.dropLast("set".count)) + "result"
                            gw.seen.clear()
                            try await gw.publish(command, text)
                            let answer = try await gw.next(resultTopic)
                            let json = try JSONValue(parsing: answer.string)
                            XCTAssertEqual(
                                json["status"], "ok",
                                "\(topic) \(key).\(option): '\(text)' on \(command) → \(answer.string)")
                            sent += 1
                            if command.hasSuffix("/$set") { throughSet += 1 }
                        }
                    }
                }
            }
            print("figure: \(sent) commands (\(throughSet) through $set) of Home Assistant's sent, each answered ok")
            XCTAssertGreaterThan(sent, 90)
            // What Home Assistant reads back: the heater-cooler's mode, from its `$state` through the
            // config's template, is one of the modes it offers.
            let heater = try XCTUnwrap(
                configs.values.first { $0.contains("\"Heat Pump\"") }.map { try JSONValue(parsing: $0) })
            let climate = try XCTUnwrap(
                heater["components"]?.objectValue?.values.first { $0["platform"] == "climate" }?.objectValue)
            XCTAssertEqual(climate["modes"], ["off", "heat_cool", "heat", "cool"])
            let stateTopic = try XCTUnwrap(climate["mode_state_topic"]?.stringValue)
            let template = try XCTUnwrap(climate["mode_state_template"]?.stringValue)
            var shown: String?
            // The last commands' `$state` document is out once their burst is.
            try? await waitUntil("the heater-cooler's mode shown") {
                let state = try await gw.retained(stateTopic)
                shown = try state[stateTopic].flatMap { try HATemplate.render(template, value: $0) }
                return ["off", "heat_cool", "heat", "cool"].contains(shown ?? "")
            }
            XCTAssertTrue(["off", "heat_cool", "heat", "cool"].contains(shown ?? ""), "\(shown ?? "nil")")
            let humidifier = try XCTUnwrap(configs.values.first { $0.contains("\"VOCOlinc Humidifier\"") })
            XCTAssertFalse(humidifier.contains("\"modes\""), "one mode is no choice: \(humidifier)")
            XCTAssertGreaterThan(throughSet, 0, "colours go through the accessory's $set")
        }
    }
}
