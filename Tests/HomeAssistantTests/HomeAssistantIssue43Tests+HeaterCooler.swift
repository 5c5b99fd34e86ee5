import Foundation
import HomeModel
import TestSupport
import XCTest

@testable import Gateway
@testable import HomeAssistant
@testable import HomeAssistantTestSupport

/// Issue 43, item 6: a heater-cooler (heating threshold 0…25, cooling threshold 10…35) offered
/// with one target. It set both thresholds, each held to its own range, so 35 in heat mode set
/// the heating threshold to 25 and the cooling one to 35, and the range collapsed. Now the
/// target is the threshold of the mode the entity shows, written alone; auto shows the range.
/// Every template is rendered by the real Jinja2, every command taken by the gateway's `set`.
extension HomeAssistantIssue43Tests {
    /// The heat pump as Home Assistant shows and drives it, its values as the gateway holds them.
    struct HeatPump {
        let climate: Config
        let tree: TopicTree
        let service: TopicTree.ServiceNode
        var values: [String: CharacteristicValue] = [
            "active": .int(1), "target-heater-cooler-state": .int(1), "current-temperature": .float(22),
            "heating-threshold": .float(20), "cooling-threshold": .float(24),
        ]

        init() throws {
            let (tree, all) = try HomeAssistantIssue43Tests.components(
                try HomeAssistantCommandsTests.issueDevices(), accessoryTopics: true)
            self.tree = tree
            climate = try XCTUnwrap(all["Heat Pump | (main)"])
            service = try XCTUnwrap(
                tree.accessories.first { $0.id == "heater" }?.services.first { $0.slug == "heater-cooler" })
        }

        func node(_ slug: String) throws -> TopicTree.CharacteristicNode {
            try XCTUnwrap(service.characteristics.first { $0.slug == slug }, slug)
        }

        func option(_ key: String) throws -> String { try XCTUnwrap(climate[key]?.stringValue, key) }

        /// The accessory's `$state`, as the gateway publishes it.
        func document() throws -> String {
            var fields: [String: JSONValue] = [:]
            for (slug, value) in values {
                fields[slug] = ValueCodec.json(ValueCodec.rounded(value, metadata: try node(slug).haMetadata))
            }
            return JSONValue.object([service.slug: .object(fields)]).encoded()
        }

        /// A characteristic's `state` topic's payload.
        func text(_ slug: String) throws -> String {
            ValueCodec.text(try XCTUnwrap(values[slug]), metadata: try node(slug).haMetadata)
        }

        /// What the entity shows: its mode, its one target (nil: `None`, Home Assistant shows the
        /// range instead) and the range's low and high.
        func shown() async throws -> (mode: String?, target: Double?, low: Double?, high: Double?) {
            let state = try document()
            let rendered = try await HAJinja.render([
                .init(template: try option("mode_state_template"), payload: state),
                .init(template: try option("temperature_state_template"), payload: state),
            ])
            XCTAssertNil(climate["temperature_low_state_template"], "the low target is the threshold's own state")
            let target = rendered[1] == "None" ? nil : try XCTUnwrap(rendered[1].flatMap(Double.init), "\(rendered)")
            return (rendered[0], target, Double(try text("heating-threshold")), Double(try text("cooling-threshold")))
        }

        /// A payload on a topic, as the gateway's `set` (or `$set`) takes it, into `values`.
        mutating func write(_ payload: String, topic: String) throws {
            let accepted = try HomeAssistantCommandsTests.accepted(
                payload, topic: topic, service: service.slug, tree: tree, node: node)
            values.merge(accepted) { $1 }
        }

        /// Home Assistant's `set_hvac_mode`.
        mutating func setMode(_ mode: String) async throws {
            let sent = try await HAJinja.render([
                .init(template: try option("mode_command_template"), variables: ["value": .string(mode)])
            ])
            try write(try XCTUnwrap(sent[0]), topic: try option("mode_command_topic"))
        }

        /// Home Assistant's `set_temperature` of the one target, in the mode the entity shows
        /// (`this.state`); the fields it sent, by characteristic.
        @discardableResult
        mutating func setTarget(_ value: Double) async throws -> [String: Double] {
            let mode = try await shown().mode ?? ""
            let sent = try await HAJinja.render([
                .init(
                    template: try option("temperature_command_template"),
                    variables: ["value": .float(value), "this": .dict(["state": .string(mode)])])
            ])
            let payload = try XCTUnwrap(sent[0], "Jinja2 refused it")
            try write(payload, topic: try option("temperature_command_topic"))
            let fields = try JSONValue(parsing: Array(payload.utf8))[service.slug]?.objectValue ?? [:]
            return fields.compactMapValues(\.doubleValue)
        }

        /// Home Assistant's `set_temperature` of the range's `low` or `high`.
        mutating func setRange(_ side: String, _ value: Double) async throws {
            let sent = try await HAJinja.render([
                .init(template: try option("temperature_\(side)_command_template"), variables: ["value": .float(value)])
            ])
            try write(try XCTUnwrap(sent[0]), topic: try option("temperature_\(side)_command_topic"))
        }
    }

    func testAHeaterCoolersOneTargetIsTheThresholdOfItsMode() async throws {
        var pump = try HeatPump()
        // One slider for both thresholds: Home Assistant has one min_temp…max_temp.
        XCTAssertEqual(pump.climate["min_temp"]?.doubleValue, 0)
        XCTAssertEqual(pump.climate["max_temp"]?.doubleValue, 35)
        var now = try await pump.shown()
        XCTAssertEqual(now.mode, "heat")
        XCTAssertEqual(now.target, 20)

        // Heating: the heating threshold alone; the cooling one keeps its 24.
        var sent = try await pump.setTarget(22)
        XCTAssertEqual(sent, ["heating-threshold": 22])
        now = try await pump.shown()
        XCTAssertEqual(now.target, 22)
        XCTAssertEqual(now.high, 24)
        // 35 is beyond what heating takes: the most it does, 25, shown at once; cooling untouched
        // (it was set to 35 as well, and the range collapsed).
        sent = try await pump.setTarget(35)
        XCTAssertEqual(sent, ["heating-threshold": 25])
        now = try await pump.shown()
        XCTAssertEqual(now.target, 25)
        XCTAssertEqual(now.low, 25)
        XCTAssertEqual(now.high, 24)

        // Cooling: the target is the cooling threshold, and it alone is written.
        try await pump.setMode("cool")
        now = try await pump.shown()
        XCTAssertEqual(now.mode, "cool")
        XCTAssertEqual(now.target, 24)
        sent = try await pump.setTarget(5)
        XCTAssertEqual(sent, ["cooling-threshold": 10], "the least cooling takes")
        sent = try await pump.setTarget(27)
        XCTAssertEqual(sent, ["cooling-threshold": 27])
        now = try await pump.shown()
        XCTAssertEqual(now.target, 27)
        XCTAssertEqual(now.low, 25, "the heating threshold kept")

        // Auto: no one target (Home Assistant then shows the range); each end is its threshold.
        try await pump.setMode("heat_cool")
        now = try await pump.shown()
        XCTAssertEqual(now.mode, "heat_cool")
        XCTAssertNil(now.target)
        try await pump.setRange("low", 18)
        try await pump.setRange("high", 30)
        now = try await pump.shown()
        XCTAssertEqual(now.low, 18)
        XCTAssertEqual(now.high, 30)
        // Back in heating, the target is the heating threshold set in auto.
        try await pump.setMode("heat")
        now = try await pump.shown()
        XCTAssertEqual(now.target, 18)
        XCTAssertEqual(now.high, 30)
    }
}
