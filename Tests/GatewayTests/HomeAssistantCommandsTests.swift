import Foundation
import HomeModel
import Simulator
import TestSupport
import XCTest

@testable import Gateway

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

    /// The devices the issue names, as their dumps describe them: a humidifier that only
    /// humidifies (its mode narrowed to 1…1), a fan in speed steps of 25, a heater-cooler, a
    /// colour bulb whose hue stops at 359 and whose colour temperature has no bounds of its own.
    static func issueDevices() throws -> [Accessory] {
        func c(
            _ name: String, _ iid: UInt64, min: Double? = nil, max: Double? = nil, step: Double? = nil,
            noBounds: Bool = false, unnamed: Bool = false
        ) throws -> Characteristic {
            var made = try HomeAssistantDevicesTests.characteristic(name, iid)
            if let min { made.metadata.minValue = min }
            if let max { made.metadata.maxValue = max }
            if let step { made.metadata.minStep = step }
            // A dump's valid values are numbers without names, when it lists them at all.
            if unnamed { made.metadata.validValues = [:] }
            if noBounds {
                made.metadata.minValue = nil
                made.metadata.maxValue = nil
            }
            return made
        }
        func device(_ id: String, _ name: String, _ service: String, _ characteristics: [Characteristic]) throws
            -> Accessory
        {
            let type = try XCTUnwrap(Catalog.serviceType(named: service))
            let info = try AccessoryService(
                iid: 1, type: StandardUUID.accessoryInformation,
                characteristics: [c("name", 2), c("manufacturer", 3), c("identify", 4)])
            return Accessory(
                id: id, name: name, manufacturer: "Issue", model: "26", serialNumber: id, firmwareRevision: "1",
                services: [info, AccessoryService(iid: 9, type: type.uuid, characteristics: characteristics)])
        }
        // An ecobee room sensor (two services, each with the same status characteristics) and a
        // Hue dimmer switch (buttons named after the device).
        let info = try AccessoryService(
            iid: 1, type: StandardUUID.accessoryInformation, characteristics: [c("name", 2), c("identify", 3)])
        func service(_ type: String, _ iid: UInt64, _ name: String, _ characteristics: [String]) throws
            -> AccessoryService
        {
            let kind = try XCTUnwrap(Catalog.serviceType(named: type))
            return AccessoryService(
                iid: iid, type: kind.uuid, name: name,
                characteristics: try characteristics.enumerated().map { try c($0.element, iid + 1 + UInt64($0.offset)) }
            )
        }
        let ecobee = Accessory(
            id: "ecobee-sensor", name: "Bedroom", manufacturer: "ecobee", model: "EBRSE4", serialNumber: "E1",
            firmwareRevision: "1",
            services: [
                info,
                try service(
                    "temperature-sensor", 10, "Bedroom", ["current-temperature", "status-low-battery", "status-active"]),
                try service(
                    "occupancy-sensor", 20, "Bedroom", ["occupancy-detected", "status-low-battery", "status-active"]),
            ])
        let dimmer = Accessory(
            id: "hue-dimmer", name: "Hue dimmer switch", manufacturer: "Philips", model: "RWL021",
            serialNumber: "H1", firmwareRevision: "1",
            services: try [info]
                + (1...4).map { n in
                    try service(
                        "stateless-programmable-switch", UInt64(10 * n), "Hue dimmer switch button \(n)",
                        ["input-event"])
                })
        return [
            ecobee, dimmer,
            try device(
                "lock", "Dump Lock", "lock-mechanism",
                [
                    c("lock-current-state", 10, unnamed: true), c("lock-target-state", 11, unnamed: true),
                ]),
            try device(
                "door", "Dump Garage", "garage-door-opener",
                [
                    c("current-door-state", 10, unnamed: true), c("target-door-state", 11, unnamed: true),
                    c("obstruction-detected", 12),
                ]),
            try device(
                "alarm", "Dump Alarm", "security-system",
                [
                    c("current-security-system-state", 10, unnamed: true),
                    c("target-security-system-state", 11, unnamed: true),
                ]),
            try device(
                "vocolinc", "VOCOlinc Humidifier", "humidifier-dehumidifier",
                [
                    c("active", 10), c("current-relative-humidity", 11), c("current-humidifier-dehumidifier-state", 12),
                    c("target-humidifier-dehumidifier-state", 13, min: 1, max: 1),
                    c("relative-humidity-humidifier-threshold", 14), c("water-level", 15),
                ]),
            try device(
                "hunter", "Hunter Fan", "fanv2",
                [c("active", 10), c("rotation-speed", 11, min: 0, max: 100, step: 25), c("rotation-direction", 12)]),
            try device(
                "heater", "Heat Pump", "heater-cooler",
                [
                    c("active", 10), c("current-heater-cooler-state", 11), c("target-heater-cooler-state", 12),
                    c("current-temperature", 13), c("heating-threshold", 14, min: 0, max: 25),
                    c("cooling-threshold", 15, min: 10, max: 35), c("rotation-speed", 16),
                ]),
            try device(
                "bulb", "Colour Bulb", "lightbulb",
                [
                    c("power-state", 10), c("brightness", 11), c("hue", 12, max: 359),
                    c("saturation", 13), c("color-temperature", 14, noBounds: true),
                ]),
        ]
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
        let root = "home/default-room"
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

    static func isCommand(_ option: String) -> Bool {
        option.contains("command") || option == "set_position_topic"
    }

    /// Why the gateway refuses `payload` on `topic`, or nil when it answers `ok`.
    static func refusal(_ payload: String, topic: String, tree: TopicTree) -> String? {
        if topic.hasSuffix("/$set") {
            let path = String(topic.dropLast("/$set".count))
            guard let accessory = tree.accessories.first(where: { $0.topic == path }) else { return "no accessory" }
            guard case .object(let document)? = try? JSONValue(parsing: Array(payload.utf8)), !document.isEmpty else {
                return "not a $set document"
            }
            for (serviceKey, fields) in document {
                guard let service = try? accessory.service(named: serviceKey), let values = fields.objectValue else {
                    return "no service \(serviceKey)"
                }
                for (key, raw) in values {
                    guard let node = service.characteristics.first(where: { $0.slug == key }) else {
                        return "no characteristic \(key)"
                    }
                    let text = raw.stringValue ?? raw.encoded()
                    if case .failure(let failure) = Gateway.parseSet(Array(text.utf8), node: node) {
                        return "\(key): \(failure.message)"
                    }
                }
            }
            return nil
        }
        guard topic.hasSuffix("/set"), let node = tree.characteristic(topic: String(topic.dropLast("/set".count)))
        else { return "not a set topic" }
        if case .failure(let failure) = Gateway.parseSet(Array(payload.utf8), node: node) { return failure.message }
        return nil
    }

    typealias Variables = [String: HATemplate.Value]

    /// Home Assistant's command variables for an option, from its documented behaviour: every
    /// mode and option, the payloads, and every whole number of a range it sends whole numbers in.
    static func commands(platform: String, option: String, _ c: Config) throws -> [Variables] {
        func string(_ key: String) -> [Variables] {
            c[key]?.stringValue.map { [["value": .string($0)]] } ?? []
        }
        func strings(_ keys: [String]) -> [Variables] { keys.flatMap(string) }
        func list(_ key: String) -> [Variables] {
            (c[key]?.arrayValue ?? []).compactMap(\.stringValue).map { ["value": .string($0)] }
        }
        func ints(_ low: String, _ high: String, zero: Bool = false) throws -> [Variables] {
            let from = try XCTUnwrap(c[low]?.int64Value, low), to = try XCTUnwrap(c[high]?.int64Value, high)
            return ((zero ? [0] : []) + Array(from...to)).map { ["value": .int($0)] }
        }
        /// Home Assistant's number and climate send a float, or an int where it is whole.
        func numbers(_ low: Double, _ high: Double, _ step: Double) -> [Variables] {
            var out: [Variables] = []
            var k = 0.0
            while low + k * step <= high + 1e-9, out.count < 2000 {
                let d = ValueCodec.rounded(low + k * step, step: step, base: low)
                out.append([
                    "value": d == d.rounded() && option != "temperature_command_topic" ? .int(Int64(d)) : .float(d)
                ])
                k += 1
            }
            return out
        }
        switch option {
        case "command_topic":
            switch platform {
            case "light", "switch", "fan", "humidifier": return strings(["payload_on", "payload_off"])
            case "cover": return strings(["payload_open", "payload_close"])
            case "valve": return strings(["payload_open", "payload_close"])
            case "lock": return strings(["payload_lock", "payload_unlock"])
            case "alarm_control_panel":
                return strings(["payload_arm_home", "payload_arm_away", "payload_arm_night", "payload_disarm"])
            case "select": return list("options")
            case "number":
                let low = try XCTUnwrap(c["min"]?.doubleValue), high = try XCTUnwrap(c["max"]?.doubleValue)
                let step = try XCTUnwrap(c["step"]?.doubleValue)
                if (high - low) / step > 2000 { return [["value": .int(Int64(low))], ["value": .int(Int64(high))]] }
                return numbers(low, high, step)
            case "text": return [["value": .string("hello")]]
            case "button": return string("payload_press")
            default:
                XCTFail("no commands for \(platform)")
                return []
            }
        case "power_command_topic": return strings(["payload_on", "payload_off"])
        case "brightness_command_topic":
            let scale = try XCTUnwrap(c["brightness_scale"]?.int64Value)
            return (1...scale).map { ["value": .int($0)] }
        case "color_temp_command_topic": return try ints("min_mireds", "max_mireds")
        case "hs_command_topic":
            return [0, 27.45, 180.5, 359.6, 360].flatMap { hue in
                [0, 50.5, 99.6, 100].map { sat in
                    ["hue": .float(hue), "sat": .float(sat), "value": .string("\(hue),\(sat)")]
                }
            }
        case "percentage_command_topic": return try ints("speed_range_min", "speed_range_max", zero: true)
        case "set_position_topic": return try ints("position_closed", "position_open")
        case "tilt_command_topic": return try ints("tilt_min", "tilt_max")
        case "mode_command_topic": return list("modes")
        case "temperature_command_topic", "temperature_low_command_topic", "temperature_high_command_topic":
            // Home Assistant's climate defaults: 7…35 in steps of 1 (0.1 with precision 0.1).
            let low = c["min_temp"]?.doubleValue ?? 7, high = c["max_temp"]?.doubleValue ?? 35
            return numbers(low, high, c["temp_step"]?.doubleValue ?? 1).map { v in
                v.mapValues { if case .int(let i) = $0 { .float(Double(i)) } else { $0 } }
            }
        case "target_humidity_command_topic":
            if platform == "humidifier" { return try ints("min_humidity", "max_humidity") }
            let low = c["min_humidity"]?.doubleValue ?? 30, high = c["max_humidity"]?.doubleValue ?? 99
            return numbers(low, high, 1).map { v in
                v.mapValues { if case .int(let i) = $0 { .float(Double(i)) } else { $0 } }
            }
        case "direction_command_topic": return [["value": .string("forward")], ["value": .string("reverse")]]
        case "oscillation_command_topic": return strings(["payload_oscillation_on", "payload_oscillation_off"])
        default:
            XCTFail("unknown command option \(option)")
            return []
        }
    }
}
