import Foundation
import HomeModel
import Simulator
import TestSupport
import XCTest

@testable import Gateway
@testable import HomeAssistant
@testable import HomeAssistantTestSupport

/// For every fixture, the simulated home and the devices of issue 26: the entity table has no
/// duplicate or stuttering name, and every command Home Assistant can send for an entity (each
/// mode, option and payload, every step of a range) is one the gateway's own `set` validation
/// answers `ok` for, after the config's template (with and without the accessory topics).
final class HomeAssistantCommandsTests: XCTestCase {
    typealias Config = [String: JSONValue]

    /// Every home to check, by name.
    static func homes() throws -> [(String, [Accessory])] {
        let files = try FileManager.default.contentsOfDirectory(atPath: HomeAssistantDevicesTests.fixtures.path)
            .filter { $0.hasSuffix(".json") }.sorted()
        var out = try files.map { ($0, try HomeAssistantDevicesTests.load($0)) }
        let simulated = try AccessoryFileLoader.load(
            directory: repositoryRoot.appendingPathComponent("Config/accessories"))
        out.append(("simulated home", simulated.accessories))
        out.append(("issue devices", try issueDevices()))
        return out
    }

    func testEveryCommandHomeAssistantCanSendIsAccepted() throws {
        var checked = 0
        for (home, accessories) in try Self.homes() {
            let tree = TopicTree(
                base: "home", accessories: accessories, home: Home(), scope: try ScopeFilter(ScopeConfig()))
            for accessoryTopics in [false, true] {
                let configs = HomeAssistantDiscovery.configs(
                    tree: tree, prefix: "homeassistant", gatewayStatusTopic: "home/$gateway/status",
                    options: .init(accessoryTopics: accessoryTopics))
                for document in configs.values {
                    for component in document["components"]?.objectValue?.values ?? [:].values {
                        let config = try XCTUnwrap(component.objectValue)
                        XCTAssertEqual(HASchema.problems(config), [], "\(home): \(config)")
                        checked += try checkCommands(config, tree: tree, home: home)
                    }
                }
            }
        }
        XCTAssertGreaterThan(checked, 5000)
    }

    /// The table of the devices of the issue, as Home Assistant shows them.
    func testTheIssuesDevicesOfferWhatTheyTake() throws {
        let rows = try Self.table(try Self.issueDevices())
        if ProcessInfo.processInfo.environment["PRINT_HA_TABLE"] != nil {
            for (home, accessories) in try Self.homes() {
                print("## \(home)")
                for row in try Self.table(accessories) { print(row) }
            }
        }
        XCTAssertEqual(
            rows,
            [
                "Bedroom | Occupancy sensor active | binary_sensor | ",
                "Bedroom | Occupancy sensor battery low | binary_sensor | ",
                "Bedroom | Occupancy | binary_sensor | ",
                "Bedroom | Temperature sensor active | binary_sensor | ",
                "Bedroom | Temperature sensor battery low | binary_sensor | ",
                "Bedroom | Temperature | sensor | ",
                "Colour Bulb | (main) | light | hs",
                "Dump Alarm | (main) | alarm_control_panel | ",
                "Dump Garage | (main) | cover | ",
                "Dump Garage | Obstruction | binary_sensor | ",
                "Dump Lock | (main) | lock | ",
                "Heat Pump | (main) | climate | modes off/heat_cool/heat/cool",
                "Heat Pump | Rotation speed | number | 0…100 step 1",
                "Hue dimmer switch | Button 1 | event | event_types single-press/double-press/long-press",
                "Hue dimmer switch | Button 2 | event | event_types single-press/double-press/long-press",
                "Hue dimmer switch | Button 3 | event | event_types single-press/double-press/long-press",
                "Hue dimmer switch | Button 4 | event | event_types single-press/double-press/long-press",
                "Hunter Fan | (main) | fan | speeds 1…4",
                "VOCOlinc Humidifier | (main) | humidifier | ",
                "VOCOlinc Humidifier | Water level | sensor | ",
            ])
        let tree = TopicTree(
            base: "home", accessories: try Self.issueDevices(), home: Home(), scope: try ScopeFilter(ScopeConfig()))
        let configs = HomeAssistantDiscovery.configs(
            tree: tree, prefix: "homeassistant", gatewayStatusTopic: "home/$gateway/status",
            options: .init(accessoryTopics: true))
        func main(_ id: String) throws -> Config {
            let document = try XCTUnwrap(
                configs[HomeAssistantDiscovery.configTopic(prefix: "homeassistant", nodeID: "homemqtt_\(id)")])
            let all = (document["components"]?.objectValue?.values ?? [:].values).compactMap(\.objectValue)
            return try XCTUnwrap(all.first { $0["name"] == .null }, id)
        }
        // What the gateway refused in the issue, it still refuses: the check is the gateway's.
        func refusal(_ payload: String, _ path: String) -> String {
            Self.refusal(payload, topic: "home/default-room/\(path)/set", tree: tree) ?? "ok"
        }
        XCTAssertEqual(
            refusal("2", "vocolinc-humidifier/humidifier-dehumidifier/target-humidifier-dehumidifier-state"),
            "target-humidifier-dehumidifier-state must be 1…1, got 2")
        XCTAssertEqual(
            refusal("33", "hunter-fan/ventilation-fan/rotation-speed"),
            "rotation-speed must be in steps of 25 from 0, got 33")
        XCTAssertEqual(
            refusal("575", "colour-bulb/lightbulb/color-temperature"), "color-temperature must be 140…500, got 575")
        XCTAssertEqual(refusal("500", "colour-bulb/lightbulb/color-temperature"), "ok")
        XCTAssertEqual(
            refusal("open", "dump-garage/garage-door-opener/target-door-state"),
            "target-door-state must be an integer, got 'open'")

        // The humidifier only humidifies: no modes to choose.
        XCTAssertNil(try main("vocolinc")["modes"])
        // The fan: four steps, each a speed it takes; a speed switches it on, 0 off.
        let fan = try main("hunter")
        let speed = try XCTUnwrap(fan["percentage_command_template"]?.stringValue)
        XCTAssertEqual(
            try (0...4).map { try HATemplate.render(speed, variables: ["value": .int(Int64($0))]) },
            (0...4).map { #"{"ventilation-fan":{"active":\#($0 > 0 ? 1 : 0),"rotation-speed":\#($0 * 25)}}"# })
        XCTAssertEqual(
            try HATemplate.render(try XCTUnwrap(fan["percentage_value_template"]?.stringValue), value: "75.0"), "3")
        // The heater-cooler: off is a mode, read from `active`.
        let heater = try main("heater")
        let mode = try XCTUnwrap(heater["mode_command_template"]?.stringValue)
        XCTAssertEqual(
            try HATemplate.render(mode, variables: ["value": .string("off")]), #"{"heater-cooler":{"active":0}}"#)
        XCTAssertEqual(
            try HATemplate.render(mode, variables: ["value": .string("cool")]),
            #"{"heater-cooler":{"active":1,"target-heater-cooler-state":2}}"#)
        let modeState = try XCTUnwrap(heater["mode_state_template"]?.stringValue)
        XCTAssertEqual(
            try HATemplate.render(modeState, value: #"{"heater-cooler":{"active":0,"target-heater-cooler-state":2}}"#),
            "off")
        XCTAssertEqual(
            try HATemplate.render(modeState, value: #"{"heater-cooler":{"active":1,"target-heater-cooler-state":2}}"#),
            "cool")
        // One target as well as the range: the cooling threshold while cooling.
        let target = try XCTUnwrap(heater["temperature_state_template"]?.stringValue)
        let cooling =
            #"{"heater-cooler":{"active":1,"target-heater-cooler-state":2,"heating-threshold":20.0,"cooling-threshold":24.0}}"#
        XCTAssertEqual(try HATemplate.render(target, value: cooling), "24.0")
        XCTAssertEqual(heater["min_temp"]?.doubleValue, 0)
        XCTAssertEqual(heater["max_temp"]?.doubleValue, 35)
        XCTAssertEqual(
            try HATemplate.render(
                try XCTUnwrap(heater["temperature_low_command_template"]?.stringValue), variables: ["value": .float(30)]
            ),
            "25.0", "the heating threshold stops at 25")
    }

    func testNamesAreDistinctAndDoNotStutter() throws {
        for (home, accessories) in try Self.homes() {
            let tree = TopicTree(
                base: "home", accessories: accessories, home: Home(), scope: try ScopeFilter(ScopeConfig()))
            for document in HomeAssistantDiscovery.configs(
                tree: tree, prefix: "homeassistant", gatewayStatusTopic: "home/$gateway/status",
                options: .init(accessoryTopics: true)
            ).values {
                let device = try XCTUnwrap(document["device"]?["name"]?.stringValue)
                let names = (document["components"]?.objectValue?.values ?? [:].values).map {
                    $0["name"]?.stringValue?.lowercased() ?? ""
                }
                XCTAssertEqual(names.count, Set(names).count, "\(home): \(device) has \(names.sorted())")
                for name in names where !name.isEmpty {
                    XCTAssertNil(Self.stutter(device: device, entity: name), "\(home): \(device) \(name)")
                }
            }
        }
    }

    /// Why `<device> <entity>` stutters, or nil: the entity starts with the device's last word,
    /// or holds two words of the device's name in a row.
    static func stutter(device: String, entity: String) -> String? {
        let d = HomeAssistantComponents.words(device), e = HomeAssistantComponents.words(entity)
        if let last = d.last, e.first == last { return "repeats '\(last)'" }
        for index in d.indices.dropLast() where e.contains(subsequence: [d[index], d[index + 1]]) {
            return "repeats '\(d[index]) \(d[index + 1])'"
        }
        return nil
    }

    /// The entity table: `<device> | <name> | <platform> | <modes, options, steps offered>`.
    static func table(_ accessories: [Accessory], accessoryTopics: Bool = true) throws -> [String] {
        let tree = TopicTree(
            base: "home", accessories: accessories, home: Home(), scope: try ScopeFilter(ScopeConfig()))
        var rows: [String] = []
        for document in HomeAssistantDiscovery.configs(
            tree: tree, prefix: "homeassistant", gatewayStatusTopic: "home/$gateway/status",
            options: .init(accessoryTopics: accessoryTopics)
        ).values {
            let device = document["device"]?["name"]?.stringValue ?? "?"
            for component in document["components"]?.objectValue?.values ?? [:].values {
                let config = component.objectValue ?? [:]
                var offered: [String] = []
                for key in ["modes", "options", "event_types"] {
                    if let list = config[key]?.arrayValue?.compactMap(\.stringValue) {
                        offered.append("\(key) " + list.joined(separator: "/"))
                    }
                }
                if let low = config["speed_range_min"], let high = config["speed_range_max"] {
                    offered.append("speeds \(low.encoded())…\(high.encoded())")
                }
                if let low = config["min"], let high = config["max"], config["platform"] == "number" {
                    offered.append("\(low.encoded())…\(high.encoded()) step \(config["step"]?.encoded() ?? "?")")
                }
                if config["hs_command_topic"] != nil { offered.append("hs") }
                let name = config["name"]?.stringValue ?? "(main)"
                rows.append(
                    "\(device) | \(name) | \(config["platform"]?.stringValue ?? "?") | "
                        + offered.joined(separator: "; "))
            }
        }
        return rows.sorted()
    }

    // MARK: - What Home Assistant sends

    /// Checks every command of one component; returns how many.
    func checkCommands(_ config: Config, tree: TopicTree, home: String) throws -> Int {
        let (count, problems) = try Self.commandProblems(config, tree: tree)
        let label = "\(home): \(config["unique_id"]?.stringValue ?? "?")"
        for problem in problems { XCTFail("\(label).\(problem)") }
        return count
    }

    /// How many commands Home Assistant can send for one component, and those the gateway refuses.
    static func commandProblems(_ config: Config, tree: TopicTree) throws -> (Int, [String]) {
        let platform = try XCTUnwrap(config["platform"]?.stringValue)
        var count = 0
        var problems: [String] = []
        for (option, value) in config where option.hasSuffix("_topic") && Self.isCommand(option) {
            let topic = try XCTUnwrap(value.stringValue)
            let templateKey = option.replacingOccurrences(of: "_topic", with: "_template")
            for variables in try Self.commands(platform: platform, option: option, config) {
                count += 1
                var payload = variables["value"]?.text ?? ""
                if let template = config[templateKey]?.stringValue {
                    guard let rendered = try HATemplate.render(template, variables: variables) else {
                        problems.append("\(option): template fails on \(variables)")
                        continue
                    }
                    payload = rendered
                }
                if let refusal = Self.refusal(payload, topic: topic, tree: tree) {
                    problems.append(
                        "\(option): Home Assistant sends \(variables) → '\(payload)' on \(topic): \(refusal)")
                }
            }
        }
        return (count, problems)
    }

    /// The check finds what the issue found: the old fan config (1…100 for a fan in steps of 25)
    /// and modes the humidifier refuses.
    func testTheCheckFindsWhatTheGatewayRefuses() throws {
        let tree = TopicTree(
            base: "home", accessories: try Self.issueDevices(), home: Home(), scope: try ScopeFilter(ScopeConfig()))
        let root = "home/default-room"
        let fan: Config = [
            "platform": "fan", "command_topic": .string("\(root)/hunter-fan/ventilation-fan/active/set"),
            "payload_on": "1", "payload_off": "0",
            "percentage_command_topic": .string("\(root)/hunter-fan/ventilation-fan/rotation-speed/set"),
            "speed_range_min": 1, "speed_range_max": 100,
        ]
        let (count, problems) = try Self.commandProblems(fan, tree: tree)
        XCTAssertEqual(count, 103)
        XCTAssertEqual(problems.count, 96, "every speed but 0, 25, 50, 75 and 100")
        let humidifier: Config = [
            "platform": "humidifier",
            "mode_command_topic": .string(
                "\(root)/vocolinc-humidifier/humidifier-dehumidifier/target-humidifier-dehumidifier-state/set"),
            "modes": ["humidifier-or-dehumidifier", "humidifier", "dehumidifier"],
        ]
        XCTAssertEqual(try Self.commandProblems(humidifier, tree: tree).1.count, 2)
    }
}
