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
/// answers `ok` for, after the config's template as Home Assistant renders it: the real Jinja2
/// with Home Assistant's filters (`HAJinja`), with and without the accessory topics.
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
        out.append(("issue 43 devices", try issue43Devices()))
        return out
    }

    /// Every command of every home, each rendered by the real Jinja2 with Home Assistant's filters
    /// (one batch), checked by the gateway's `set`; the hand-written evaluator, which other tests
    /// use, must render each the same.
    func testEveryCommandHomeAssistantCanSendIsAccepted() async throws {
        var commands: [Command] = []
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
                        commands += try Self.commands(config, tree: tree, home: home)
                    }
                }
            }
        }
        let (payloads, problems) = try await Self.problems(commands)
        for problem in problems { XCTFail(problem) }
        // The evaluator the other tests render with agrees with Jinja2 on every command.
        var differ = 0
        for (command, payload) in zip(commands, payloads) where command.template != nil {
            let own = try? HATemplate.render(command.template ?? "", variables: command.variables)
            if own != payload, differ < 20 {
                XCTFail("evaluator gives \(String(describing: own)), Jinja2 \(String(describing: payload)): \(command)")
            }
            if own != payload { differ += 1 }
        }
        XCTAssertEqual(differ, 0, "commands the evaluator renders unlike Jinja2")
        print(
            "HomeAssistantCommandsTests: \(commands.count) commands checked, "
                + "\(commands.count - problems.count) accepted"
        )
        XCTAssertGreaterThan(commands.count, 5000)
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
        // The fan: four steps, each a speed it takes; a speed switches it on, 0 off (and keeps
        // the speed it had, for `turn_on`).
        let fan = try main("hunter")
        let speed = try XCTUnwrap(fan["percentage_command_template"]?.stringValue)
        XCTAssertEqual(
            try (0...4).map { try HATemplate.render(speed, variables: ["value": .int(Int64($0))]) },
            [#"{"ventilation-fan":{"active":0}}"#]
                + (1...4).map { #"{"ventilation-fan":{"active":1,"rotation-speed":\#($0 * 25)}}"# })
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

    /// One command Home Assistant can send: its variables, the config's template (if any) and
    /// the topic it goes to.
    struct Command: CustomStringConvertible {
        var label: String
        var option: String
        var topic: String
        var variables: Variables
        var template: String?
        var tree: TopicTree
        var description: String { "\(label).\(option) \(variables) on \(topic)" }
    }

    /// Every command of one component.
    static func commands(_ config: Config, tree: TopicTree, home: String) throws -> [Command] {
        let platform = try XCTUnwrap(config["platform"]?.stringValue)
        let label = "\(home): \(config["unique_id"]?.stringValue ?? "?")"
        var out: [Command] = []
        for (option, value) in config where option.hasSuffix("_topic") && Self.isCommand(option) {
            let topic = try XCTUnwrap(value.stringValue)
            let template = config[option.replacingOccurrences(of: "_topic", with: "_template")]?.stringValue
            for variables in try Self.commands(platform: platform, option: option, config) {
                out.append(
                    Command(
                        label: label, option: option, topic: topic, variables: variables, template: template,
                        tree: tree))
            }
        }
        return out
    }

    /// What Home Assistant sends for each command (rendered by Jinja2 in one batch; the value's
    /// text without a template), and the commands the gateway refuses, or whose template fails.
    static func problems(_ commands: [Command]) async throws -> ([String?], [String]) {
        let templated = commands.indices.filter { commands[$0].template != nil }
        let rendered = try await HAJinja.render(
            templated.map { HAJinja.Job(template: commands[$0].template ?? "", variables: commands[$0].variables) })
        var payloads = commands.map { Optional($0.variables["value"]?.text ?? "") }
        for (index, payload) in zip(templated, rendered) { payloads[index] = payload }
        var problems: [String] = []
        for (command, payload) in zip(commands, payloads) {
            guard let payload else {
                problems.append("\(command): the template fails")
                continue
            }
            if let refusal = Self.refusal(payload, topic: command.topic, tree: command.tree) {
                problems.append("\(command) → '\(payload)': \(refusal)")
            }
        }
        return (payloads, problems)
    }

    /// How many commands Home Assistant can send for one component, and those the gateway refuses.
    static func commandProblems(_ config: Config, tree: TopicTree) async throws -> (Int, [String]) {
        let commands = try Self.commands(config, tree: tree, home: "test")
        return (commands.count, try await Self.problems(commands).1)
    }

    /// The check finds what the issue found: the old fan config (1…100 for a fan in steps of 25)
    /// and modes the humidifier refuses.
    func testTheCheckFindsWhatTheGatewayRefuses() async throws {
        let tree = TopicTree(
            base: "home", accessories: try Self.issueDevices(), home: Home(), scope: try ScopeFilter(ScopeConfig()))
        let root = "home/default-room"
        let fan: Config = [
            "platform": "fan", "command_topic": .string("\(root)/hunter-fan/ventilation-fan/active/set"),
            "payload_on": "1", "payload_off": "0",
            "percentage_command_topic": .string("\(root)/hunter-fan/ventilation-fan/rotation-speed/set"),
            "speed_range_min": 1, "speed_range_max": 100,
        ]
        let (count, problems) = try await Self.commandProblems(fan, tree: tree)
        XCTAssertEqual(count, 103)
        XCTAssertEqual(problems.count, 96, "every speed but 0, 25, 50, 75 and 100")
        let humidifier: Config = [
            "platform": "humidifier",
            "mode_command_topic": .string(
                "\(root)/vocolinc-humidifier/humidifier-dehumidifier/target-humidifier-dehumidifier-state/set"),
            "modes": ["humidifier-or-dehumidifier", "humidifier", "dehumidifier"],
        ]
        let humidifierProblems = try await Self.commandProblems(humidifier, tree: tree).1
        XCTAssertEqual(humidifierProblems.count, 2)
    }
}
