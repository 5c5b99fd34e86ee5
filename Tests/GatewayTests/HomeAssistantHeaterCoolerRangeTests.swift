import Foundation
import Gateway
import HomeModel
import MQTT
import TestSupport
import XCTest

@testable import HomeAssistantTestSupport

/// Issue 43, item 6: a heater-cooler's single target was offered over both thresholds' ranges
/// (0…35) and held to the mode's threshold, so Home Assistant's 0 in cool mode became 10 and the
/// slider jumped back. Home Assistant has one `min_temp`…`max_temp` per entity; its own HomeKit
/// integration gives the range of the mode's threshold. Now the config says the mode's range and
/// is published again when the mode changes, whoever changes it, before the `$state` that shows
/// the new mode. On every enabled rig (`Rig.enabled`).
final class HomeAssistantHeaterCoolerRangeTests: RigTestCase {
    static let heatPump = """
        name: Heat Pump
        manufacturer: Thermal Dynamics Co.
        model: HP-9
        room: Study
        services:
          - type: heater-cooler
            characteristics:
              active: 1
              current-heater-cooler-state: 1
              target-heater-cooler-state: 1
              current-temperature: 21.0
              heating-threshold: { value: 20, min: 0, max: 25, step: 0.5 }
              cooling-threshold: { value: 24, min: 10, max: 35, step: 0.5 }
        """

    /// The climate component of the heat pump's config, or nil for another message.
    static func climate(_ message: MQTTMessage) -> [String: JSONValue]? {
        guard message.topic.hasPrefix("homeassistant/device/"), message.string.contains("\"Heat Pump\""),
            let document = try? JSONValue(parsing: message.payload)
        else { return nil }
        return document["components"]?.objectValue?.values.first { $0["platform"] == "climate" }?.objectValue
    }

    /// A config message's offered range: min, max, step.
    static func range(_ message: MQTTMessage) -> [Double?]? {
        climate(message).map {
            [$0["min_temp"]?.doubleValue, $0["max_temp"]?.doubleValue, $0["temp_step"]?.doubleValue]
        }
    }

    /// A `$state` whose heater-cooler section says the target mode `mode`.
    static func says(_ message: MQTTMessage, topic: String, mode: Int64) -> Bool {
        guard message.topic == topic, let document = try? JSONValue(parsing: message.payload) else { return false }
        return document["heater-cooler"]?["target-heater-cooler-state"]?.int64Value == mode
    }

    func testTheSingleTargetOffersTheRangeOfTheModesThreshold() async throws {
        let accessories = try TemporaryDirectory(prefix: "homemqtt-heat-pump")
        try Self.heatPump.write(toFile: accessories.file("heat-pump.yml"), atomically: true, encoding: .utf8)
        await onEveryRig(accessories: accessories.url) { gw in
            let id = try await gw.accessoryID(named: "Heat Pump")
            let found = await gw.gateway.tree.accessory(id: id)
            let accessory = try XCTUnwrap(found)
            let service = try XCTUnwrap(accessory.services.first { $0.typeName == "heater-cooler" })
            let mode = try XCTUnwrap(service.characteristics.first { $0.typeName == "target-heater-cooler-state" })
            let stateTopic = accessory.topic + "/$state"
            // One client sees configs and states in the order the broker has them.
            let (all, close) = try await gw.subscriber("#")
            // Heat: the heating threshold's 0…25.
            let first = try await all.waitFor("the heat pump's config", timeout: 5) { Self.climate($0) != nil }
            XCTAssertEqual(Self.range(first), [0, 25, 0.5])

            // Cool, as Home Assistant's mode command writes it (`$set` with `active` and the mode):
            // the cooling threshold's 10…35, on the broker before the `$state` that says cool.
            all.clear()
            try await gw.publish(
                accessory.topic + "/$set", #"{"heater-cooler":{"active":1,"target-heater-cooler-state":2}}"#)
            try await all.waitFor("the $state in cool", timeout: 5) { Self.says($0, topic: stateTopic, mode: 2) }
            var seen = all.elements
            let cool = try XCTUnwrap(seen.firstIndex { Self.range($0) != nil }, "no config after the change to cool")
            XCTAssertEqual(Self.range(seen[cool]), [10, 35, 0.5])
            XCTAssertLessThan(cool, try XCTUnwrap(seen.firstIndex { Self.says($0, topic: stateTopic, mode: 2) }))

            // Auto, set by the device itself: both thresholds, as the range sliders have them.
            all.clear()
            try await gw.home.setValue(mode.address, .uint(0))
            try await all.waitFor("the $state in auto", timeout: 5) { Self.says($0, topic: stateTopic, mode: 0) }
            seen = all.elements
            XCTAssertEqual(seen.compactMap(Self.range), [[0, 35, 0.5]])

            // A change of any other value publishes no config.
            all.clear()
            let current = try XCTUnwrap(service.characteristics.first { $0.typeName == "current-temperature" })
            try await gw.home.setValue(current.address, .float(22.5))
            try await all.waitFor("the $state at 22.5", timeout: 5) {
                $0.topic == stateTopic && $0.string.contains("22.5")
            }
            XCTAssertEqual(all.elements.compactMap(Self.range), [], "a config published for a change not of the mode")
            await close()
        }
    }
}
