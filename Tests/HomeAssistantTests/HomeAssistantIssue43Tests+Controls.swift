import Foundation
import HomeModel
import TestSupport
import XCTest

@testable import Gateway
@testable import HomeAssistant
@testable import HomeAssistantTestSupport

/// Issue 43, what a person met in Home Assistant's UI: a fan set to 0 % came back at 0 %, a
/// thermostat that only heats offered turn on and off (both answered with an error), and settings
/// stood among the controls with raw option names. Templates are rendered by the real Jinja2.
extension HomeAssistantIssue43Tests {
    typealias Components = [String: Config]

    /// Every component of every device, by `<device> | <name or (main)>`.
    static func components(_ accessories: [Accessory], accessoryTopics: Bool) throws -> (TopicTree, Components) {
        let tree = TopicTree(
            base: "home", accessories: accessories, home: Home(), scope: try ScopeFilter(ScopeConfig()))
        var out: Components = [:]
        for document in HomeAssistantDiscovery.configs(
            tree: tree, prefix: "homeassistant", gatewayStatusTopic: "home/$gateway/status",
            options: .init(accessoryTopics: accessoryTopics)
        ).values {
            let device = try XCTUnwrap(document["device"]?["name"]?.stringValue)
            for component in document["components"]?.objectValue?.values ?? [:].values {
                let config = try XCTUnwrap(component.objectValue)
                out["\(device) | \(config["name"]?.stringValue ?? "(main)")"] = config
            }
        }
        return (tree, out)
    }

    /// Home Assistant's `set_percentage 0` turns the fan off and keeps its speed; `turn_on` (the
    /// power alone) then shows it on at the speed it had, not at 0 %.
    func testAFanSetToZeroComesBackAtItsSpeed() async throws {
        let (tree, all) = try Self.components(try HomeAssistantCommandsTests.issueDevices(), accessoryTopics: true)
        let fan = try XCTUnwrap(all["Hunter Fan | (main)"])
        let setTopic = try XCTUnwrap(fan["percentage_command_topic"]?.stringValue)
        XCTAssertTrue(setTopic.hasSuffix("/$set"))
        // The fan's state as the gateway holds it: on, at 75 (step 3 of 4).
        let service = try XCTUnwrap(
            tree.accessories.first { $0.id == "hunter" }?.services.first { $0.slug == "ventilation-fan" })
        func node(_ slug: String) throws -> TopicTree.CharacteristicNode {
            try XCTUnwrap(service.characteristics.first { $0.slug == slug })
        }
        var values: [String: CharacteristicValue] = ["active": .int(1), "rotation-speed": .float(75)]
        /// A payload on a topic as the gateway's `set` takes it, into `values`.
        func write(_ payload: String, topic: String) throws {
            let accepted = try HomeAssistantCommandsTests.accepted(
                payload, topic: topic, service: "ventilation-fan", tree: tree, node: node)
            values.merge(accepted) { $1 }
        }
        /// What Home Assistant shows: on or off from `active`, the percentage from the speed.
        func shown() async throws -> (on: Bool, step: String?) {
            let speed = try node("rotation-speed")
            let text = ValueCodec.text(try XCTUnwrap(values["rotation-speed"]), metadata: speed.haMetadata)
            let step = try await HAJinja.render([
                .init(template: try XCTUnwrap(fan["percentage_value_template"]?.stringValue), payload: text)
            ])
            let power = ValueCodec.text(try XCTUnwrap(values["active"]), metadata: try node("active").haMetadata)
            return (power == fan["payload_on"]?.stringValue, step.first ?? nil)
        }
        var now = try await shown()
        XCTAssertEqual(now.on, true)
        XCTAssertEqual(now.step, "3")

        // set_percentage 0: off alone, the speed kept.
        let zero = try await render(fan["percentage_command_template"], [.int(0)])
        XCTAssertEqual(zero, [#"{"ventilation-fan":{"active":0}}"#])
        try write(try XCTUnwrap(zero[0]), topic: setTopic)
        now = try await shown()
        XCTAssertEqual(now.on, false)
        XCTAssertEqual(now.step, "3", "the speed is kept while off")

        // turn_on without a percentage: the power only, back at step 3 (75 %).
        try write(
            try XCTUnwrap(fan["payload_on"]?.stringValue), topic: try XCTUnwrap(fan["command_topic"]?.stringValue))
        now = try await shown()
        XCTAssertEqual(now.on, true)
        XCTAssertEqual(now.step, "3")

        // A speed still switches it on with the speed.
        let two = try await render(fan["percentage_command_template"], [.int(2)])
        XCTAssertEqual(two, [#"{"ventilation-fan":{"active":1,"rotation-speed":50}}"#])
        try write(try XCTUnwrap(two[0]), topic: setTopic)
        now = try await shown()
        XCTAssertEqual(now.on, true)
        XCTAssertEqual(now.step, "2")
    }

    /// A thermostat that only heats: Home Assistant shows it heating and offers no mode command,
    /// so no turn on or off the device would refuse (`off` is not among the values it takes).
    func testAThermostatThatOnlyHeatsOffersNoModeItCannotTake() async throws {
        for accessoryTopics in [false, true] {
            let (tree, all) = try Self.components(
                try HomeAssistantCommandsTests.issue43Devices(), accessoryTopics: accessoryTopics)
            let climate = try XCTUnwrap(all["Thermostat Heat Only | (main)"])
            XCTAssertEqual(climate["modes"], ["heat"])
            XCTAssertNil(climate["mode_command_topic"])
            XCTAssertNil(climate["power_command_topic"])
            let state = try XCTUnwrap(climate["mode_state_topic"]?.stringValue)
            let shown = try await HAJinja.render([
                .init(template: try XCTUnwrap(climate["mode_state_template"]?.stringValue), payload: "1")
            ])
            XCTAssertEqual(shown, ["heat"])
            // What a turn off would have sent, the gateway refuses.
            let set = state.replacingOccurrences(of: "/state", with: "/set")
            XCTAssertEqual(
                HomeAssistantCommandsTests.refusal("0", topic: set, tree: tree),
                "target-heating-cooling must be 1…1, got 0")
            // A thermostat with modes to choose from still has its mode command.
            XCTAssertNotNil(all["Thermostat Step One | (main)"]?["mode_command_topic"])
        }
    }

    /// Settings are shown apart from the controls (configuration when settable, diagnostics when
    /// read-only), and a select's options read as words.
    func testSettingsAreConfigurationWithReadableOptions() async throws {
        let (tree, all) = try Self.components(try HomeAssistantCommandsTests.issue43Devices(), accessoryTopics: true)
        func row(_ key: String) -> String {
            guard let config = all[key] else { return "missing" }
            let options = config["options"]?.arrayValue?.compactMap(\.stringValue).joined(separator: "/") ?? ""
            return
                "\(config["platform"]?.stringValue ?? "?") \(config["entity_category"]?.stringValue ?? "-") \(options)"
        }
        XCTAssertEqual(row("Thermostat Heat Only | Temperature units"), "select config Celsius/Fahrenheit")
        XCTAssertEqual(row("Panel Heater | Lock physical controls"), "select config Disabled/Enabled")
        XCTAssertEqual(row("Panel Heater | Audio feedback"), "switch config ")
        XCTAssertEqual(row("Hall Dimmer | Label index"), "sensor diagnostic ")
        XCTAssertEqual(row("Hall Dimmer | Label namespace"), "sensor diagnostic Dots/Arabic numerals")
        // The readable names are what the select sends and shows, and the gateway takes them.
        let lock = try XCTUnwrap(all["Panel Heater | Lock physical controls"])
        let sent = try await render(lock["command_template"], [.string("Disabled"), .string("Enabled")])
        XCTAssertEqual(sent, ["0", "1"])
        for payload in sent {
            let topic = try XCTUnwrap(lock["command_topic"]?.stringValue)
            XCTAssertNil(HomeAssistantCommandsTests.refusal(payload ?? "", topic: topic, tree: tree))
        }
        let shown = try await HAJinja.render([
            .init(template: try XCTUnwrap(lock["value_template"]?.stringValue), payload: "1")
        ])
        XCTAssertEqual(shown, ["Enabled"])
        // Eve Energy's child lock, from its dump.
        let eve = try Self.components(try HomeAssistantDevicesTests.load("eve_energy.json"), accessoryTopics: true).1
        let eveLock = try XCTUnwrap(eve["Eve Energy 3A35 | Lock Physical Controls"])
        XCTAssertEqual(eveLock["options"], ["Disabled", "Enabled"])
        XCTAssertEqual(eveLock["entity_category"], "config")
        // The device's own control stays a main one.
        XCTAssertNil(all["Panel Heater | (main)"]?["entity_category"])
    }
}
