import XCTest
import Gateway
@testable import HomeAssistant
import HomeModel

@testable import HomeAssistantTestSupport

/// Accessories made from the catalog's real types, as a source would report them.
private enum HAFixture {
    struct Missing: Error { var name: String }

    static func characteristic(
        _ name: String, _ iid: UInt64, permissions: CharacteristicPermissions? = nil,
        min: Double? = nil, max: Double? = nil
    ) throws -> Characteristic {
        guard let type = Catalog.characteristicType(named: name) else { throw Missing(name: name) }
        var metadata = type.metadata
        if let permissions { metadata.permissions = permissions }
        if let min { metadata.minValue = min }
        if let max { metadata.maxValue = max }
        return Characteristic(iid: iid, type: type.uuid, value: nil, metadata: metadata)
    }

    static func service(_ name: String, _ iid: UInt64, named: String? = nil, _ characteristics: [Characteristic]) throws
        -> AccessoryService
    {
        guard let type = Catalog.serviceType(named: name) else { throw Missing(name: name) }
        return AccessoryService(iid: iid, type: type.uuid, name: named, characteristics: characteristics)
    }

    static func information(_ name: String) throws -> AccessoryService {
        try service(
            "accessory-information", 1,
            [
                characteristic("identify", 2), characteristic("manufacturer", 3), characteristic("model", 4),
                characteristic("name", 5), characteristic("serial-number", 6), characteristic("firmware-version", 7),
            ])
    }

    static func accessory(
        _ id: String, _ name: String, bridge: String? = nil, room: String? = nil, _ services: [AccessoryService]
    ) throws -> Accessory {
        Accessory(
            id: id, aid: bridge == nil ? 1 : 2, name: name, manufacturer: "Kilgo", model: "K-\(name.count)",
            serialNumber: "SN-\(id)", firmwareRevision: "1.2.3", bridgeID: bridge,
            services: [try information(name)] + services, suggestedRoom: room)
    }

    static func garage() throws -> Accessory {
        try accessory(
            "sim-garage", "Garage Door Opener",
            [
                service(
                    "garage-door-opener", 10, named: "Garage Door",
                    [
                        characteristic("current-door-state", 11), characteristic("target-door-state", 12),
                        characteristic("obstruction-detected", 13), characteristic("name", 14),
                    ]),
                service(
                    "lightbulb", 20, named: "Garage Light",
                    [
                        characteristic("power-state", 21), characteristic("brightness", 22, min: 10, max: 100),
                    ]),
            ])
    }

    static func lamp() throws -> Accessory {
        try accessory(
            "sim-lamp", "Reading Lamp",
            [
                service(
                    "lightbulb", 10,
                    [
                        characteristic("power-state", 11), characteristic("brightness", 12), characteristic("hue", 13),
                        characteristic("saturation", 14), characteristic("color-temperature", 15),
                    ])
            ])
    }

    static func lock() throws -> Accessory {
        try accessory(
            "sim-lock", "Front Door Lock",
            [
                service(
                    "lock-mechanism", 10,
                    [
                        characteristic("lock-current-state", 11), characteristic("lock-target-state", 12),
                    ])
            ])
    }

    static func thermostat() throws -> Accessory {
        try accessory(
            "sim-thermostat", "Hall Thermostat",
            [
                service(
                    "thermostat", 10,
                    [
                        characteristic("current-heating-cooling-state", 11),
                        characteristic("target-heating-cooling-state", 12),
                        characteristic("current-temperature", 13), characteristic("target-temperature", 14),
                        characteristic("temperature-display-units", 15),
                        characteristic("current-relative-humidity", 16),
                        characteristic("heating-threshold-temperature", 17),
                        characteristic("cooling-threshold-temperature", 18),
                    ])
            ])
    }

    static func fans() throws -> [Accessory] {
        [
            try accessory(
                "sim-fan", "Ceiling Fan",
                [
                    service(
                        "fan", 10,
                        [
                            characteristic("power-state", 11), characteristic("rotation-speed", 12),
                            characteristic("rotation-direction", 13),
                        ])
                ]),
            try accessory(
                "sim-fan2", "Tower Fan",
                [
                    service(
                        "fanv2", 10,
                        [
                            characteristic("active", 11), characteristic("rotation-speed", 12),
                            characteristic("swing-mode", 13),
                            characteristic("current-fan-state", 14), characteristic("target-fan-state", 15),
                        ])
                ]),
        ]
    }

    static func blinds() throws -> Accessory {
        try accessory(
            "sim-blinds", "Living Room Blinds",
            [
                service(
                    "window-covering", 10,
                    [
                        characteristic("current-position", 11), characteristic("target-position", 12),
                        characteristic("position-state", 13), characteristic("hold-position", 14),
                        characteristic("current-horizontal-tilt-angle", 15),
                        characteristic("target-horizontal-tilt-angle", 16),
                        characteristic("obstruction-detected", 17),
                    ])
            ])
    }

    static func sensors() throws -> Accessory {
        try accessory(
            "sim-sensors", "Hall Sensor",
            [
                service(
                    "temperature-sensor", 10,
                    [characteristic("current-temperature", 11), characteristic("status-active", 12)]),
                service("humidity-sensor", 20, [characteristic("current-relative-humidity", 21)]),
                service("light-sensor", 30, [characteristic("current-ambient-light-level", 31)]),
                service(
                    "contact-sensor", 40,
                    [characteristic("contact-sensor-state", 41), characteristic("status-tampered", 42)]),
                service("motion-sensor", 50, [characteristic("motion-detected", 51)]),
                service("occupancy-sensor", 60, [characteristic("occupancy-detected", 61)]),
                service("leak-sensor", 70, [characteristic("leak-detected", 71), characteristic("status-fault", 72)]),
                service("smoke-sensor", 80, [characteristic("smoke-detected", 81)]),
                service(
                    "carbon-dioxide-sensor", 90,
                    [characteristic("carbon-dioxide-detected", 91), characteristic("carbon-dioxide-level", 92)]),
                service(
                    "air-quality-sensor", 100,
                    [characteristic("air-quality", 101), characteristic("pm2-5-density", 102)]),
                service(
                    "battery", 110,
                    [
                        characteristic("battery-level", 111), characteristic("charging-state", 112),
                        characteristic("status-low-battery", 113),
                    ]),
            ])
    }

    static func switches() throws -> [Accessory] {
        [
            try accessory("sim-switch", "Porch Switch", [service("switch", 10, [characteristic("power-state", 11)])]),
            try accessory(
                "sim-outlet", "Desk Outlet",
                [
                    service("outlet", 10, [characteristic("power-state", 11), characteristic("outlet-in-use", 12)])
                ]),
        ]
    }

    static func bridged() throws -> [Accessory] {
        [
            try accessory("hue-bridge", "Hue Bridge", []),
            try accessory(
                "hue-bridge:2", "Hue Go", bridge: "hue-bridge",
                [
                    service("lightbulb", 10, [characteristic("power-state", 11), characteristic("brightness", 12)])
                ]),
        ]
    }

    /// Custom characteristics on a custom service: no natural component, so format and
    /// permissions decide.
    static func custom() throws -> Accessory {
        func custom(_ n: Int, _ iid: UInt64, _ metadata: CharacteristicMetadata, _ name: String) -> Characteristic {
            Characteristic(
                iid: iid, type: "0000000\(n)-1111-2222-3333-444455556666", value: nil, metadata: metadata, name: name)
        }
        let rw: CharacteristicPermissions = [.read, .write, .notify]
        return try accessory(
            "sim-custom", "Gadget",
            [
                AccessoryService(
                    iid: 10, type: "AAAAAAAA-1111-2222-3333-444455556666", name: "Gadget Settings",
                    characteristics: [
                        custom(1, 11, CharacteristicMetadata(format: .bool, permissions: rw), "Night Mode"),
                        custom(
                            2, 12, CharacteristicMetadata(format: .bool, permissions: [.read, .notify]), "Overheated"),
                        custom(
                            3, 13,
                            CharacteristicMetadata(
                                format: .uint8, validValues: [0: "low", 1: "medium", 2: "high"], permissions: rw),
                            "Level"),
                        custom(
                            4, 14,
                            CharacteristicMetadata(
                                format: .float, unit: "celsius", minValue: 5, maxValue: 30, minStep: 0.5,
                                permissions: rw), "Setpoint"),
                        custom(5, 15, CharacteristicMetadata(format: .string, maxLength: 32, permissions: rw), "Label"),
                        custom(6, 16, CharacteristicMetadata(format: .string, permissions: [.read]), "Status Text"),
                        custom(7, 17, CharacteristicMetadata(format: .bool, permissions: [.write]), "Reset"),
                        custom(
                            8, 18, CharacteristicMetadata(format: .uint32, unit: "seconds", permissions: [.read]),
                            "Uptime"),
                        custom(9, 19, CharacteristicMetadata(format: .tlv8, permissions: [.read]), "Blob"),
                    ])
            ])
    }

    static func everything() throws -> [Accessory] {
        try [garage(), lamp(), lock(), thermostat(), blinds(), sensors(), custom()] + fans() + switches() + bridged()
    }
}

final class HomeAssistantDiscoveryTests: XCTestCase {
    let prefix = "homeassistant"
    let status = "home/$gateway/status"

    private func makeTree(_ accessories: [Accessory], home: Home = Home(), scope: ScopeConfig = ScopeConfig()) throws
        -> TopicTree
    {
        TopicTree(base: "home", accessories: accessories, home: home, scope: try ScopeFilter(scope))
    }

    private func configs(_ tree: TopicTree, options: HomeAssistantDiscovery.Options = .init()) -> [String: JSONValue] {
        HomeAssistantDiscovery.configs(tree: tree, prefix: prefix, gatewayStatusTopic: status, options: options)
    }

    private func device(_ configs: [String: JSONValue], _ accessoryID: String) throws -> JSONValue {
        let topic = HomeAssistantDiscovery.configTopic(
            prefix: prefix, nodeID: HomeAssistantDiscovery.nodeID(accessoryID: accessoryID))
        return try XCTUnwrap(configs[topic], "no config for \(accessoryID) on \(topic)")
    }

    private func components(_ document: JSONValue) throws -> [String: [String: JSONValue]] {
        let map = try XCTUnwrap(document["components"]?.objectValue)
        return try map.mapValues { try XCTUnwrap($0.objectValue) }
    }

    private func only(_ document: JSONValue, platform: String, file: StaticString = #filePath, line: UInt = #line)
        throws -> [String: JSONValue]
    {
        let matches = try components(document).values.filter { $0["platform"]?.stringValue == platform }
        XCTAssertEqual(matches.count, 1, "\(platform) components", file: file, line: line)
        return try XCTUnwrap(matches.first, file: file, line: line)
    }

    private func entity(
        _ document: JSONValue, stateOf topic: String, file: StaticString = #filePath, line: UInt = #line
    ) throws -> [String: JSONValue] {
        let matches = try components(document).values.filter { $0["state_topic"]?.stringValue == topic + "/state" }
        XCTAssertEqual(matches.count, 1, "entities on \(topic)/state", file: file, line: line)
        return try XCTUnwrap(matches.first, file: file, line: line)
    }

    private func render(_ template: JSONValue?, _ value: String) throws -> String? {
        let text = try XCTUnwrap(template?.stringValue, "no template")
        return try HATemplate.render(text, value: value)
    }

    // MARK: - Every config against Home Assistant's schema and our own topics

    func testEveryConfigFitsHomeAssistantsSchema() throws {
        let tree = try makeTree(HAFixture.everything())
        let all = configs(tree)
        XCTAssertEqual(all.count, 13, "one device per accessory with entities: \(all.keys.sorted())")
        for (topic, document) in all {
            let object = try XCTUnwrap(document.objectValue)
            XCTAssertEqual(
                Set(object.keys), ["device", "origin", "availability", "availability_mode", "components"], topic)
            XCTAssertEqual(document["origin"]?["name"], "HomeMQTT")
            XCTAssertTrue(HASchema.fits(try XCTUnwrap(document["availability"]), .availabilityList), topic)
            let device = try XCTUnwrap(document["device"]?.objectValue)
            XCTAssertNotNil(device["name"]?.stringValue, topic)
            XCTAssertEqual(device["identifiers"]?.arrayValue?.count, 1, topic)
            // The discovery topic's ids may only hold [a-zA-Z0-9_-].
            let parts = topic.split(separator: "/")
            XCTAssertEqual(parts.count, 4, topic)
            XCTAssertTrue(
                parts[2].allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") }, topic)
            let map = try components(document)
            XCTAssertFalse(map.isEmpty, topic)
            for (key, component) in map {
                XCTAssertTrue(
                    key.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") }, key)
                XCTAssertEqual(HASchema.problems(component), [], "\(topic) \(key)")
            }
        }
        let uniqueIDs = try all.values.flatMap { try components($0).values.compactMap { $0["unique_id"]?.stringValue } }
        XCTAssertEqual(uniqueIDs.count, Set(uniqueIDs).count, "unique ids are unique")
    }

    /// Every topic a config names is one of the gateway's: a `state` topic of an in-scope
    /// characteristic, or the `set` topic of a writable one; every payload Home Assistant can
    /// send through a command topic (after its template) is one `set` accepts; every payload
    /// the gateway can publish on a state topic (after its template) is one Home Assistant
    /// understands for that option.
    func testTopicsTemplatesAndPayloadsFitTheGateway() throws {
        let tree = try makeTree(HAFixture.everything())
        var checkedCommands = 0
        var checkedStates = 0
        for document in configs(tree).values {
            for (key, component) in try components(document) {
                let platform = try XCTUnwrap(component["platform"]?.stringValue)
                for (option, value) in component where option.hasSuffix("_topic") {
                    let topic = try XCTUnwrap(value.stringValue)
                    if topic.hasSuffix("/$availability") { continue }
                    let isCommand = option.contains("command") || option == "set_position_topic"
                    let suffix = isCommand ? "/set" : "/state"
                    XCTAssertTrue(topic.hasSuffix(suffix), "\(key).\(option) = \(topic)")
                    let node = try XCTUnwrap(
                        tree.characteristic(topic: String(topic.dropLast(suffix.count))),
                        "\(key).\(option): \(topic) is no characteristic")
                    if isCommand {
                        XCTAssertTrue(node.characteristic.metadata.permissions.contains(.write), "\(key).\(option)")
                        for payload in try commandPayloads(platform: platform, option: option, component) {
                            let text =
                                try commandTemplate(option, component).map {
                                    try XCTUnwrap(HATemplate.render($0, value: payload))
                                } ?? payload
                            XCTAssertNoThrow(
                                try ValueCodec.parse(
                                    text: text, metadata: node.characteristic.metadata, label: node.typeName),
                                "\(key).\(option): Home Assistant sends '\(payload)' → '\(text)'")
                            checkedCommands += 1
                        }
                    } else {
                        for payload in statePayloads(node) {
                            let rendered =
                                try stateTemplate(platform: platform, option: option, component)
                                .map { try HATemplate.render($0, value: payload) } ?? payload
                            let accepted = try XCTUnwrap(rendered, "\(key).\(option): template fails on '\(payload)'")
                            let unknownAllowed = [("air-quality", "0"), ("current-lock-mechanism-state", "3")]
                                .contains { $0 == (node.typeName, payload) }
                            XCTAssertTrue(
                                acceptsState(
                                    platform: platform, option: option, component, accepted,
                                    unknownAllowed: unknownAllowed),
                                "\(key).\(option): the gateway publishes '\(payload)', Home Assistant gets '\(accepted)'"
                            )
                            checkedStates += 1
                        }
                    }
                }
            }
        }
        XCTAssertGreaterThan(checkedCommands, 50)
        XCTAssertGreaterThan(checkedStates, 100)
    }

    /// The payloads Home Assistant publishes on a command topic, from its documented behaviour.
    private func commandPayloads(platform: String, option: String, _ c: [String: JSONValue]) throws -> [String] {
        func int(_ key: String) throws -> Int64 { try XCTUnwrap(c[key]?.int64Value, key) }
        func number(_ key: String) throws -> Double { try XCTUnwrap(c[key]?.doubleValue, key) }
        func python(_ d: Double) -> String { "\(d)" } // Python's str(float): 21.0, 21.5
        switch option {
        case "command_topic":
            switch platform {
            case "light", "switch", "fan":
                return [try XCTUnwrap(c["payload_on"]?.stringValue), try XCTUnwrap(c["payload_off"]?.stringValue)]
            case "cover": return ["payload_open", "payload_close"].compactMap { c[$0]?.stringValue }
            case "lock":
                return [try XCTUnwrap(c["payload_lock"]?.stringValue), try XCTUnwrap(c["payload_unlock"]?.stringValue)]
            case "select": return try XCTUnwrap(c["options"]?.arrayValue).compactMap(\.stringValue)
            case "number":
                // Integral values go out as integers, others as floats.
                return try [number("min"), number("max")].map { Int64(exactly: $0).map(String.init) ?? python($0) }
            case "text": return ["hello"]
            case "button": return [try XCTUnwrap(c["payload_press"]?.stringValue)]
            default: XCTFail("no command payloads for \(platform)"); return []
            }
        case "brightness_command_topic": return ["1", String(try int("brightness_scale"))]
        case "color_temp_command_topic": return [String(try int("min_mireds")), String(try int("max_mireds"))]
        case "percentage_command_topic":
            return [String(try int("speed_range_min")), String(try int("speed_range_max"))]
        case "set_position_topic": return [String(try int("position_closed")), String(try int("position_open"))]
        case "tilt_command_topic": return [String(try int("tilt_min")), String(try int("tilt_max"))]
        case "mode_command_topic": return try XCTUnwrap(c["modes"]?.arrayValue).compactMap(\.stringValue)
        case "temperature_command_topic", "temperature_low_command_topic", "temperature_high_command_topic":
            // Within the characteristic's own range, stepped as its metadata says.
            return platform == "climate" && option == "temperature_command_topic"
                ? [python(try number("min_temp")), python(try number("max_temp"))]
                : ["21.5", "22.0"]
        case "target_humidity_command_topic":
            return [python(try number("min_humidity")), python(try number("max_humidity"))]
        case "direction_command_topic": return ["forward", "reverse"]
        case "oscillation_command_topic":
            return [
                try XCTUnwrap(c["payload_oscillation_on"]?.stringValue),
                try XCTUnwrap(c["payload_oscillation_off"]?.stringValue),
            ]
        default:
            XCTFail("unknown command option \(option)")
            return []
        }
    }

    private func commandTemplate(_ option: String, _ c: [String: JSONValue]) -> String? {
        let key = option.replacingOccurrences(of: "_topic", with: "_template")
        return c[key]?.stringValue
    }

    private func stateTemplate(platform: String, option: String, _ c: [String: JSONValue]) -> String? {
        let key: String =
            switch option {
            case "state_topic": (platform == "light" || platform == "fan") ? "state_value_template" : "value_template"
            case "position_topic": "position_template"
            case "tilt_status_topic": "tilt_status_template"
            case "mode_state_topic": "mode_state_template"
            case "action_topic": "action_template"
            case "current_temperature_topic": "current_temperature_template"
            case "current_humidity_topic": "current_humidity_template"
            default: option.replacingOccurrences(of: "_state_topic", with: "_value_template")
            }
        // Climate names its state templates `<x>_state_template`.
        return c[key]?.stringValue ?? c[option.replacingOccurrences(of: "_topic", with: "_template")]?.stringValue
    }

    /// What the gateway can publish on a characteristic's `state`.
    private func statePayloads(_ node: TopicTree.CharacteristicNode) -> [String] {
        let metadata = node.characteristic.metadata
        let format = metadata.format
        if format == .bool { return ["true", "false"] }
        if !metadata.validValues.isEmpty {
            return metadata.validValues.keys.sorted().map {
                ValueCodec.text(format == .int ? .int($0) : .uint(UInt64($0)), format: format)
            }
        }
        if format.isNumeric {
            let low = metadata.minValue ?? 0
            let high = metadata.maxValue ?? 1000
            let samples = [low, high, ((low + high) / 2).rounded()]
            return samples.map { d in
                switch format {
                case .float: ValueCodec.text(.float(d), format: format)
                case .int: ValueCodec.text(.int(Int64(d)), format: format)
                default: ValueCodec.text(.uint(UInt64(max(0, d))), format: format)
                }
            }
        }
        return ["some text"]
    }

    private func acceptsState(
        platform: String, option: String, _ c: [String: JSONValue], _ v: String, unknownAllowed: Bool
    ) -> Bool {
        if v == "None" { return unknownAllowed }
        func list(_ key: String) -> Set<String> { Set(c[key]?.arrayValue?.compactMap(\.stringValue) ?? []) }
        switch (platform, option) {
        case ("light", "state_topic"), ("switch", "state_topic"), ("fan", "state_topic"):
            return v == c["payload_on"]?.stringValue || v == c["payload_off"]?.stringValue
        case ("cover", "state_topic"):
            return ["open", "closed", "opening", "closing", "stopped"].contains(v)
        case ("lock", "state_topic"):
            return ["LOCKED", "UNLOCKED", "JAMMED"].contains(v)
        case ("binary_sensor", "state_topic"):
            return v == (c["payload_on"]?.stringValue ?? "ON") || v == (c["payload_off"]?.stringValue ?? "OFF")
        case ("sensor", "state_topic"):
            if c["options"] != nil { return list("options").contains(v) }
            if c["unit_of_measurement"] != nil || c["device_class"] != nil { return Double(v) != nil }
            return true
        case ("select", "state_topic"): return list("options").contains(v)
        case ("number", "state_topic"): return Double(v) != nil
        case ("text", "state_topic"): return true
        case (_, "brightness_state_topic"), (_, "color_temp_state_topic"), (_, "percentage_state_topic"),
            (_, "position_topic"), (_, "tilt_status_topic"):
            return Int(v) != nil // Home Assistant reads these with int()
        case (_, "current_temperature_topic"), (_, "temperature_state_topic"), (_, "temperature_low_state_topic"),
            (_, "temperature_high_state_topic"), (_, "current_humidity_topic"), (_, "target_humidity_state_topic"):
            return Double(v) != nil
        case (_, "mode_state_topic"): return list("modes").contains(v)
        case (_, "action_topic"):
            return ["off", "heating", "cooling", "drying", "idle", "fan", "preheating", "defrosting"].contains(v)
        case (_, "direction_state_topic"): return v == "forward" || v == "reverse"
        case (_, "oscillation_state_topic"):
            return v == c["payload_oscillation_on"]?.stringValue || v == c["payload_oscillation_off"]?.stringValue
        default:
            XCTFail("no acceptance rule for \(platform).\(option)")
            return false
        }
    }

    // MARK: - Each mapped service type

    func testLightbulbIsALightWithBrightnessAndColourTemperature() throws {
        let tree = try makeTree([HAFixture.lamp()])
        let light = try only(device(configs(tree), "sim-lamp"), platform: "light")
        let service = "home/default-room/reading-lamp/lightbulb"
        XCTAssertEqual(light["command_topic"], .string("\(service)/power-state/set"))
        XCTAssertEqual(light["state_topic"], .string("\(service)/power-state/state"))
        XCTAssertEqual(light["payload_on"], "true")
        XCTAssertEqual(light["payload_off"], "false")
        XCTAssertEqual(light["brightness_command_topic"], .string("\(service)/brightness/set"))
        XCTAssertEqual(light["brightness_state_topic"], .string("\(service)/brightness/state"))
        XCTAssertEqual(light["brightness_scale"], 100)
        XCTAssertEqual(light["color_temp_command_topic"], .string("\(service)/color-temperature/set"))
        XCTAssertEqual(light["min_mireds"], 140)
        XCTAssertEqual(light["max_mireds"], 500)
        XCTAssertEqual(light["name"], .null, "the accessory's only service is its main entity")
        XCTAssertNil(light["hs_command_topic"], "without the gateway's colour topics the light takes no hs")
        XCTAssertNil(light["color_mode_state_topic"], "one colour mode: Home Assistant needs no colour-mode state")
        // Hue and saturation stay controllable as numbers in their own ranges.
        let document = try device(configs(tree), "sim-lamp")
        let hue = try entity(document, stateOf: "\(service)/hue")
        XCTAssertEqual(hue["platform"], "number")
        XCTAssertEqual(hue["min"], 0)
        XCTAssertEqual(hue["max"], 360)
        XCTAssertEqual(hue["unit_of_measurement"], "°")
        XCTAssertEqual(try entity(document, stateOf: "\(service)/saturation")["max"], 100)
    }

    func testLightbulbTakesColourThroughTheAccessorysStateAndSet() throws {
        let tree = try makeTree([HAFixture.lamp()])
        let document = try device(configs(tree, options: .init(accessoryTopics: true)), "sim-lamp")
        let light = try only(document, platform: "light")
        XCTAssertEqual(light["hs_command_topic"], "home/default-room/reading-lamp/$set")
        XCTAssertEqual(light["hs_state_topic"], "home/default-room/reading-lamp/$state")
        let command = try XCTUnwrap(light["hs_command_template"]?.stringValue)
        XCTAssertEqual(
            try HATemplate.render(command, variables: ["hue": .float(27.45), "sat": .float(99.6)]),
            #"{"lightbulb":{"hue":27,"saturation":100}}"#)
        let state = #"{"lightbulb":{"power-state":true,"hue":27.0,"saturation":100.0}}"#
        XCTAssertEqual(try render(light["hs_value_template"], state), "27.0,100.0")
        XCTAssertTrue(
            try components(document).values.allSatisfy { $0["platform"] != "number" },
            "hue and saturation are the light's now")
        // Colour temperature and hue/saturation: the mode in effect is read from `$state` too.
        XCTAssertEqual(light["color_mode_state_topic"], "home/default-room/reading-lamp/$state")
        let mode = try XCTUnwrap(light["color_mode_value_template"])
        let lamp = #"{"lightbulb":{"color-temperature":370,"hue":0,"saturation":100,"$color-mode":"#
        XCTAssertEqual(try render(mode, lamp + #""color-temperature"}}"#), "color_temp")
        XCTAssertEqual(try render(mode, lamp + #""hue-saturation"}}"#), "hs")
        XCTAssertEqual(try render(mode, state), "", "an empty mode, which Home Assistant ignores")
        XCTAssertEqual(try render(mode, "{}"), "", "nor a document without the light raises")
    }

    func testSwitchAndOutletAreSwitches() throws {
        let all = configs(try makeTree(HAFixture.switches()))
        let porch = try only(device(all, "sim-switch"), platform: "switch")
        XCTAssertEqual(porch["device_class"], "switch")
        XCTAssertEqual(porch["command_topic"], "home/default-room/porch-switch/switch/power-state/set")
        XCTAssertEqual(porch["payload_on"], "true")
        let outletDevice = try device(all, "sim-outlet")
        XCTAssertEqual(try only(outletDevice, platform: "switch")["device_class"], "outlet")
        let inUse = try only(outletDevice, platform: "binary_sensor")
        XCTAssertEqual(inUse["device_class"], "power")
        XCTAssertEqual(inUse["state_topic"], "home/default-room/desk-outlet/outlet/outlet-in-use/state")
    }

    func testGarageDoorIsAGarageCoverWithTravelStatesAndObstruction() throws {
        let document = try device(configs(try makeTree([HAFixture.garage()])), "sim-garage")
        let door = "home/default-room/garage-door-opener/garage-door"
        let cover = try only(document, platform: "cover")
        XCTAssertEqual(cover["device_class"], "garage")
        XCTAssertEqual(cover["state_topic"], .string("\(door)/current-door-state/state"))
        XCTAssertEqual(cover["command_topic"], .string("\(door)/target-door-state/set"))
        XCTAssertEqual(cover["payload_open"], "0")
        XCTAssertEqual(cover["payload_close"], "1")
        XCTAssertEqual(cover["payload_stop"], .null, "HomeKit garage doors cannot stop")
        XCTAssertNil(cover["position_topic"])
        let states = try ["0", "1", "2", "3", "4", "9"].map { try render(cover["value_template"], $0) }
        XCTAssertEqual(states, ["open", "closed", "opening", "closing", "stopped", "None"])
        XCTAssertEqual(cover["name"], .null, "the device's name says Garage Door: its main feature")

        let obstruction = try entity(document, stateOf: "\(door)/obstruction-detected")
        XCTAssertEqual(obstruction["platform"], "binary_sensor")
        XCTAssertEqual(obstruction["device_class"], "problem")
        XCTAssertEqual(obstruction["payload_on"], "true")
        XCTAssertEqual(obstruction["payload_off"], "false")

        let light = try only(document, platform: "light")
        XCTAssertEqual(light["name"], "Light", "Garage Light less what the device name Garage Door Opener says")
        XCTAssertEqual(light["brightness_scale"], 100)
        XCTAssertFalse(
            try components(document).values.contains { $0["state_topic"]?.stringValue?.contains("/name/") == true },
            "the Name characteristic is no entity")
    }

    func testLockMechanismIsALock() throws {
        let lock = try only(device(configs(try makeTree([HAFixture.lock()])), "sim-lock"), platform: "lock")
        let service = "home/default-room/front-door-lock/lock-mechanism"
        XCTAssertEqual(lock["command_topic"], .string("\(service)/target-lock-mechanism-state/set"))
        XCTAssertEqual(lock["payload_lock"], "1")
        XCTAssertEqual(lock["payload_unlock"], "0")
        XCTAssertEqual(lock["state_topic"], .string("\(service)/current-lock-mechanism-state/state"))
        XCTAssertEqual(
            try ["0", "1", "2", "3"].map { try render(lock["value_template"], $0) },
            ["UNLOCKED", "LOCKED", "JAMMED", "None"])
    }

    func testThermostatIsAClimateWithModesAndTemperatures() throws {
        let document = try device(configs(try makeTree([HAFixture.thermostat()])), "sim-thermostat")
        let climate = try only(document, platform: "climate")
        let service = "home/default-room/hall-thermostat/thermostat"
        XCTAssertEqual(climate["modes"], ["off", "heat", "cool", "heat_cool"])
        XCTAssertEqual(climate["mode_state_topic"], .string("\(service)/target-heating-cooling/state"))
        XCTAssertEqual(climate["mode_command_topic"], .string("\(service)/target-heating-cooling/set"))
        XCTAssertEqual(
            try ["0", "1", "2", "3"].map { try render(climate["mode_state_template"], $0) },
            ["off", "heat", "cool", "heat_cool"])
        XCTAssertEqual(
            try ["off", "heat", "cool", "heat_cool"].map { try render(climate["mode_command_template"], $0) },
            ["0", "1", "2", "3"])
        XCTAssertEqual(
            try ["0", "1", "2"].map { try render(climate["action_template"], $0) }, ["idle", "heating", "cooling"])
        XCTAssertEqual(climate["current_temperature_topic"], .string("\(service)/current-temperature/state"))
        XCTAssertEqual(climate["temperature_state_topic"], .string("\(service)/target-temperature/state"))
        XCTAssertEqual(climate["temperature_command_topic"], .string("\(service)/target-temperature/set"))
        XCTAssertEqual(climate["temperature_low_command_topic"], .string("\(service)/heating-threshold/set"))
        XCTAssertEqual(climate["temperature_high_command_topic"], .string("\(service)/cooling-threshold/set"))
        XCTAssertEqual(climate["current_humidity_topic"], .string("\(service)/current-relative-humidity/state"))
        XCTAssertEqual(climate["temperature_unit"], "C")
        XCTAssertEqual(climate["min_temp"]?.doubleValue, 10)
        XCTAssertEqual(climate["max_temp"]?.doubleValue, 38)
        XCTAssertEqual(climate["temp_step"]?.doubleValue, 0.1)
        // Display units are a setting of the device, not part of the climate entity.
        XCTAssertEqual(try entity(document, stateOf: "\(service)/temperature-units")["platform"], "select")
    }

    func testThermostatModesFollowTheAccessorysValidValues() throws {
        var accessory = try HAFixture.thermostat()
        accessory.services[1].characteristics[1].metadata.validValues = [0: "off", 1: "heat"]
        let climate = try only(device(configs(try makeTree([accessory])), "sim-thermostat"), platform: "climate")
        XCTAssertEqual(climate["modes"], ["off", "heat"])
    }

    func testFansAreFans() throws {
        let all = configs(try makeTree(HAFixture.fans()))
        let ceiling = try only(device(all, "sim-fan"), platform: "fan")
        XCTAssertEqual(ceiling["command_topic"], "home/default-room/ceiling-fan/fan/power-state/set")
        XCTAssertEqual(ceiling["payload_on"], "true")
        XCTAssertEqual(ceiling["percentage_command_topic"], "home/default-room/ceiling-fan/fan/rotation-speed/set")
        XCTAssertEqual(ceiling["speed_range_min"], 1)
        XCTAssertEqual(ceiling["speed_range_max"], 100)
        XCTAssertEqual(try render(ceiling["percentage_value_template"], "37.0"), "37", "rotation speed is a float")
        XCTAssertEqual(
            try ["forward", "reverse"].map { try render(ceiling["direction_command_template"], $0) }, ["0", "1"])

        let towerDocument = try device(all, "sim-fan2")
        let tower = try only(towerDocument, platform: "fan")
        XCTAssertEqual(tower["command_topic"], "home/default-room/tower-fan/ventilation-fan/active/set")
        XCTAssertEqual(tower["payload_on"], "1")
        XCTAssertEqual(tower["payload_off"], "0")
        XCTAssertEqual(tower["oscillation_command_topic"], "home/default-room/tower-fan/ventilation-fan/swing-mode/set")
        XCTAssertEqual(
            try entity(towerDocument, stateOf: "home/default-room/tower-fan/ventilation-fan/target-fan-state")[
                "options"], ["manual", "auto"])
    }

    func testWindowCoveringIsACoverWithPositionAndTilt() throws {
        let document = try device(configs(try makeTree([HAFixture.blinds()])), "sim-blinds")
        let cover = try only(document, platform: "cover")
        let service = "home/default-room/living-room-blinds/window-covering"
        XCTAssertEqual(cover["device_class"], "shade")
        XCTAssertEqual(cover["position_topic"], .string("\(service)/current-position/state"))
        XCTAssertEqual(cover["set_position_topic"], .string("\(service)/target-position/set"))
        XCTAssertEqual(cover["command_topic"], .string("\(service)/target-position/set"))
        XCTAssertEqual(cover["payload_open"], "100")
        XCTAssertEqual(cover["payload_close"], "0")
        XCTAssertEqual(cover["payload_stop"], .null)
        XCTAssertEqual(
            try ["0", "1", "2"].map { try render(cover["value_template"], $0) }, ["closing", "opening", "stopped"])
        XCTAssertEqual(cover["tilt_command_topic"], .string("\(service)/target-horizontal-tilt/set"))
        XCTAssertEqual(cover["tilt_status_topic"], .string("\(service)/current-horizontal-tilt/state"))
        XCTAssertEqual(cover["tilt_min"], -90)
        XCTAssertEqual(cover["tilt_max"], 90)
        let hold = try XCTUnwrap(
            try components(document).values.first { $0["command_topic"] == .string("\(service)/hold-position/set") })
        XCTAssertEqual(hold["platform"], "button", "hold-position is write-only")
        XCTAssertEqual(try entity(document, stateOf: "\(service)/obstruction-detected")["device_class"], "problem")
    }

    func testSensorsHaveDeviceClassesAndUnits() throws {
        let document = try device(configs(try makeTree([HAFixture.sensors()])), "sim-sensors")
        let base = "home/default-room/hall-sensor"
        func check(_ path: String, _ platform: String, _ deviceClass: String?, _ unit: String?, line: UInt = #line)
            throws -> [String: JSONValue]
        {
            let e = try entity(document, stateOf: "\(base)/\(path)", line: line)
            XCTAssertEqual(e["platform"]?.stringValue, platform, path, line: line)
            XCTAssertEqual(e["device_class"]?.stringValue, deviceClass, path, line: line)
            XCTAssertEqual(e["unit_of_measurement"]?.stringValue, unit, path, line: line)
            return e
        }
        XCTAssertEqual(
            try check("temperature-sensor/current-temperature", "sensor", "temperature", "°C")["state_class"],
            "measurement")
        _ = try check("humidity-sensor/current-relative-humidity", "sensor", "humidity", "%")
        _ = try check("light-sensor/current-light-level", "sensor", "illuminance", "lx")
        _ = try check("carbon-dioxide-sensor/carbon-dioxide-level", "sensor", "carbon_dioxide", "ppm")
        _ = try check("air-quality-sensor/pm2-5-density", "sensor", "pm25", "µg/m³")
        let battery = try check("battery/battery-level", "sensor", "battery", "%")
        XCTAssertEqual(battery["entity_category"], "diagnostic")
        let low = try check("battery/status-low-battery", "binary_sensor", "battery", nil)
        XCTAssertEqual(low["payload_on"], "1", "1 is battery-level-low; battery class: on means low")
        let charging = try check("battery/charging-state", "binary_sensor", "battery_charging", nil)
        XCTAssertEqual(try ["0", "1", "2"].map { try render(charging["value_template"], $0) }, ["OFF", "ON", "OFF"])

        // Contact: HomeKit 0 is "contact detected" (closed); Home Assistant's opening: on means open.
        let contact = try check("contact-sensor/contact-state", "binary_sensor", "opening", nil)
        XCTAssertEqual(contact["payload_on"], "1")
        XCTAssertEqual(contact["payload_off"], "0")
        XCTAssertEqual(try check("motion-sensor/motion-detected", "binary_sensor", "motion", nil)["payload_on"], "true")
        XCTAssertEqual(
            try check("occupancy-sensor/occupancy-detected", "binary_sensor", "occupancy", nil)["payload_on"], "1")
        XCTAssertEqual(try check("leak-sensor/leak-detected", "binary_sensor", "moisture", nil)["payload_on"], "1")
        XCTAssertEqual(try check("smoke-sensor/smoke-detected", "binary_sensor", "smoke", nil)["payload_on"], "1")
        _ = try check("contact-sensor/status-tampered", "binary_sensor", "tamper", nil)
        _ = try check("leak-sensor/status-fault", "binary_sensor", "problem", nil)

        let quality = try check("air-quality-sensor/air-quality", "sensor", "enum", nil)
        let options = try XCTUnwrap(quality["options"]?.arrayValue?.compactMap(\.stringValue))
        for value in ["1", "2", "3", "4", "5"] {
            XCTAssertTrue(options.contains(try XCTUnwrap(try render(quality["value_template"], value))), value)
        }
        XCTAssertEqual(try render(quality["value_template"], "0"), "None", "0 is HomeKit's unknown")
    }

    func testCharacteristicsWithoutAComponentGoByFormatAndPermissions() throws {
        let document = try device(configs(try makeTree([HAFixture.custom()])), "sim-custom")
        let byName = Dictionary(
            try components(document).values.map { ($0["name"]?.stringValue ?? "", $0) }, uniquingKeysWith: { a, _ in a }
        )
        XCTAssertEqual(byName["Night Mode"]?["platform"], "switch")
        XCTAssertEqual(byName["Overheated"]?["platform"], "binary_sensor")
        XCTAssertEqual(byName["Level"]?["platform"], "select")
        XCTAssertEqual(byName["Level"]?["options"], ["low", "medium", "high"])
        XCTAssertEqual(try render(byName["Level"]?["value_template"], "2"), "high")
        let setpoint = try XCTUnwrap(byName["Setpoint"])
        XCTAssertEqual(setpoint["platform"], "number")
        XCTAssertEqual(setpoint["min"], 5)
        XCTAssertEqual(setpoint["max"], 30)
        XCTAssertEqual(setpoint["step"], 0.5)
        XCTAssertEqual(setpoint["unit_of_measurement"], "°C")
        XCTAssertEqual(byName["Label"]?["platform"], "text")
        XCTAssertEqual(byName["Label"]?["max"], 32)
        XCTAssertEqual(byName["Status Text"]?["platform"], "sensor")
        XCTAssertEqual(byName["Reset"]?["platform"], "button")
        XCTAssertEqual(byName["Uptime"]?["platform"], "sensor")
        XCTAssertEqual(byName["Uptime"]?["unit_of_measurement"], "s")
        XCTAssertNil(byName["Blob"], "tlv8 has no entity")
        XCTAssertEqual(byName.count, 8)
    }

    // MARK: - Device, availability, ids

    func testDeviceBlockAndAvailability() throws {
        var home = Home()
        let garageRoom = Room(name: "Garage")
        home.rooms = [garageRoom]
        home.assignments["sim-garage"] = garageRoom.id
        let tree = try makeTree([HAFixture.garage(), HAFixture.lamp()], home: home)
        let all = configs(tree, options: .init(defaultRoomID: home.roomForEntireHome.id))
        let garage = try device(all, "sim-garage")
        XCTAssertEqual(
            garage["device"],
            [
                "identifiers": ["homemqtt_sim_garage"], "name": "Garage Door Opener", "manufacturer": "Kilgo",
                "model": "K-18", "serial_number": "SN-sim-garage", "sw_version": "1.2.3", "suggested_area": "Garage",
            ])
        XCTAssertEqual(
            garage["availability"],
            [
                [
                    "topic": "home/garage/garage-door-opener/$availability", "payload_available": "online",
                    "payload_not_available": "offline",
                ],
                ["topic": "home/$gateway/status", "payload_available": "online", "payload_not_available": "offline"],
            ])
        XCTAssertEqual(
            garage["availability_mode"], "all", "unavailable when either the accessory or the gateway is offline")
        XCTAssertNil(try device(all, "sim-lamp")["device"]?["suggested_area"], "the default room is no area")
    }

    func testBridgedAccessoryNamesItsBridgeAsViaDevice() throws {
        let all = configs(try makeTree(HAFixture.bridged()))
        let go = try device(all, "hue-bridge:2")
        XCTAssertEqual(go["device"]?["via_device"], "homemqtt_hue_bridge")
        XCTAssertEqual(go["device"]?["identifiers"], ["homemqtt_hue_bridge_2"])
        // The bridge itself becomes a device, or Home Assistant would have nothing to link to.
        let bridge = try device(all, "hue-bridge")
        XCTAssertEqual(bridge["device"]?["identifiers"], ["homemqtt_hue_bridge"])
        XCTAssertNil(bridge["device"]?["via_device"])
        let connectivity = try only(bridge, platform: "binary_sensor")
        XCTAssertEqual(connectivity["device_class"], "connectivity")
        XCTAssertEqual(connectivity["state_topic"], "home/default-room/hue-bridge/$availability")
        XCTAssertEqual(
            connectivity["availability"],
            [["topic": "home/$gateway/status", "payload_available": "online", "payload_not_available": "offline"]])
    }

    func testIdsAndTopicsSurviveRenamesAndMoves() throws {
        let accessories = try HAFixture.everything()
        let before = configs(try makeTree(accessories))
        var home = Home()
        let room = Room(name: "Workshop")
        home.rooms = [room]
        for accessory in accessories {
            home.accessoryNames[accessory.id] = "Renamed \(accessory.name)"
            home.assignments[accessory.id] = room.id
            for service in accessory.services {
                home.serviceNames[Home.serviceKey(accessoryID: accessory.id, iid: service.iid)] = "Svc \(service.iid)"
            }
        }
        let after = configs(try makeTree(accessories, home: home))
        XCTAssertEqual(Set(after.keys), Set(before.keys), "same config topics")
        for (topic, old) in before {
            let new = try XCTUnwrap(after[topic])
            XCTAssertEqual(Set(try components(new).keys), Set(try components(old).keys), topic)
            for (key, component) in try components(old) {
                XCTAssertEqual(try components(new)[key]?["unique_id"], component["unique_id"], "\(topic) \(key)")
                XCTAssertEqual(try components(new)[key]?["platform"], component["platform"], "\(topic) \(key)")
            }
            XCTAssertEqual(new["device"]?["identifiers"], old["device"]?["identifiers"])
            XCTAssertNotEqual(new["device"]?["name"], old["device"]?["name"], "the name follows the rename")
        }
        XCTAssertEqual(try device(after, "sim-lamp")["device"]?["name"], "Renamed Reading Lamp")
        XCTAssertEqual(
            try only(device(after, "sim-lamp"), platform: "light")["command_topic"],
            "home/workshop/renamed-reading-lamp/svc-10/power-state/set", "entities follow the new topics")
    }

    func testSameTreeGivesTheSameConfigs() throws {
        let first = configs(try makeTree(HAFixture.everything()))
        let second = configs(try makeTree(Array(HAFixture.everything().reversed())))
        XCTAssertEqual(first.mapValues { $0.encoded() }, second.mapValues { $0.encoded() })
    }

    func testAnAccessoryThatLeavesHasNoConfig() throws {
        let all = try HAFixture.everything()
        let full = configs(try makeTree(all))
        let lampTopic = HomeAssistantDiscovery.configTopic(prefix: prefix, nodeID: "homemqtt_sim_lamp")
        XCTAssertNotNil(full[lampTopic])

        let removed = configs(try makeTree(all.filter { $0.id != "sim-lamp" }))
        XCTAssertNil(removed[lampTopic])
        XCTAssertEqual(
            Set(full.keys).subtracting(removed.keys), [lampTopic], "only the removed accessory's config goes")

        var scope = ScopeConfig()
        scope.accessories = ScopeList(deny: ["Reading Lamp"])
        let outOfScope = configs(try makeTree(all, scope: scope))
        XCTAssertEqual(Set(full.keys).subtracting(outOfScope.keys), [lampTopic])
    }

    func testCharacteristicTypesOutOfScopeLeaveTheirEntities() throws {
        var scope = ScopeConfig()
        scope.characteristicTypes = ScopeList(deny: ["obstruction-detected"])
        let document = try device(configs(try makeTree([HAFixture.garage()], scope: scope)), "sim-garage")
        XCTAssertTrue(try components(document).values.allSatisfy { $0["platform"] != "binary_sensor" })
        XCTAssertEqual(try only(document, platform: "cover")["device_class"], "garage")
    }

    func testReadOnlyScopeOffersNoCommands() throws {
        var scope = ScopeConfig()
        scope.readOnly = ["Reading Lamp", "home/default-room/garage-door-opener/#"]
        let all = configs(try makeTree([HAFixture.lamp(), HAFixture.garage()], scope: scope))
        for document in all.values {
            for component in try components(document).values {
                XCTAssertFalse(
                    component.keys.contains { $0.contains("command") || $0 == "set_position_topic" }, "\(component)")
                XCTAssertEqual(HASchema.problems(component), [])
            }
        }
        // A light nobody may switch is reported, not offered as a control.
        let lamp = try device(all, "sim-lamp")
        XCTAssertEqual(
            try entity(lamp, stateOf: "home/default-room/reading-lamp/lightbulb/power-state")["platform"],
            "binary_sensor")
        let garageCover = try only(device(all, "sim-garage"), platform: "cover")
        XCTAssertEqual(garageCover["payload_open"], .null)
        XCTAssertEqual(garageCover["payload_close"], .null)
    }

    func testNodeIDsAreStableAndDistinct() {
        XCTAssertEqual(HomeAssistantDiscovery.nodeID(accessoryID: "sim-garage:2"), "homemqtt_sim_garage_2")
        let ids = HomeAssistantDiscovery.nodeIDs(for: ["a:b", "a-b", "c"])
        XCTAssertEqual(Set(ids.values).count, 3, "ids that fold alike still differ: \(ids)")
        XCTAssertEqual(ids["a-b"], "homemqtt_a_b", "the first by id keeps the plain form")
        XCTAssertEqual(HomeAssistantDiscovery.nodeIDs(for: ["c", "a-b", "a:b"]), ids, "independent of order")
    }

    /// Two gateways on one broker (two bases) give distinct node and unique ids for the same
    /// accessories; the default base keeps the ids of before, and an earlier run's configs of
    /// either form are recognised as ours.
    func testNodeIDsCarryTheBaseTopic() throws {
        XCTAssertEqual(HomeAssistantDiscovery.nodeID(accessoryID: "sim-garage", base: "home"), "homemqtt_sim_garage")
        XCTAssertEqual(
            HomeAssistantDiscovery.nodeID(accessoryID: "sim-garage", base: "site-b"), "homemqtt_site_b__sim_garage")
        XCTAssertEqual(
            HomeAssistantDiscovery.nodeID(accessoryID: "sim-garage", base: "sites/north"),
            "homemqtt_sites_north__sim_garage")
        let accessories = try [HAFixture.garage(), HAFixture.lamp()]
        var topics: [String: JSONValue] = [:]
        for base in ["home", "site-b"] {
            let tree = TopicTree(
                base: base, accessories: accessories, home: Home(), scope: try ScopeFilter(ScopeConfig()))
            let status = "\(base)/$gateway/status"
            let configs = HomeAssistantDiscovery.configs(tree: tree, prefix: prefix, gatewayStatusTopic: status)
            XCTAssertEqual(configs.count, 2)
            for (topic, document) in configs {
                XCTAssertTrue(
                    HomeAssistantDiscovery.isOwnConfig(
                        topic: topic, payload: document, prefix: prefix, gatewayStatusTopic: status), topic)
                XCTAssertFalse(
                    HomeAssistantDiscovery.isOwnConfig(
                        topic: topic, payload: document, prefix: prefix,
                        gatewayStatusTopic: base == "home" ? "site-b/$gateway/status" : "home/$gateway/status"),
                    "not the other gateway's: \(topic)")
                topics[topic] = document
            }
        }
        XCTAssertEqual(topics.count, 4, "\(topics.keys.sorted())")
        let uniqueIDs = try topics.values.flatMap {
            try components($0).values.compactMap { $0["unique_id"]?.stringValue }
        }
        XCTAssertEqual(uniqueIDs.count, Set(uniqueIDs).count)
    }

    func testOddMetadataGivesConfigsNotCrashes() throws {
        let huge = 1e300
        let accessory = try HAFixture.accessory(
            "sim-odd", "Odd",
            [
                HAFixture.service(
                    "lightbulb", 10,
                    [
                        HAFixture.characteristic("power-state", 11),
                        HAFixture.characteristic("brightness", 12, min: huge, max: -huge),
                        HAFixture.characteristic("color-temperature", 13, min: -huge, max: huge),
                    ]),
                HAFixture.service(
                    "fan", 20,
                    [
                        HAFixture.characteristic("power-state", 21),
                        HAFixture.characteristic("rotation-speed", 22, min: huge, max: huge),
                    ]),
                HAFixture.service(
                    "window-covering", 30,
                    [
                        HAFixture.characteristic("current-position", 31, min: .nan, max: .infinity),
                        HAFixture.characteristic("target-position", 32, min: -huge, max: huge),
                        HAFixture.characteristic("position-state", 33),
                    ]),
            ])
        let document = try device(configs(try makeTree([accessory])), "sim-odd")
        XCTAssertEqual(
            Set(try components(document).values.compactMap { $0["platform"]?.stringValue }), ["light", "fan", "cover"])
        XCTAssertNoThrow(try JSONValue(parsing: document.encoded()), "the config is valid JSON")
    }

    // MARK: - Helpers for the gateway

    func testBirthMessage() {
        XCTAssertTrue(
            HomeAssistantDiscovery.isBirthMessage(
                topic: "homeassistant/status", payload: Array("online".utf8), prefix: "homeassistant"))
        XCTAssertFalse(
            HomeAssistantDiscovery.isBirthMessage(
                topic: "homeassistant/status", payload: Array("offline".utf8), prefix: "homeassistant"))
        XCTAssertFalse(
            HomeAssistantDiscovery.isBirthMessage(
                topic: "ha/status", payload: Array("online".utf8), prefix: "homeassistant"))
        XCTAssertTrue(
            HomeAssistantDiscovery.isBirthMessage(topic: "ha/status", payload: Array("online".utf8), prefix: "ha"))
    }

    func testRemovingOneComponentOfADeviceSendsItsPlatformOnly() throws {
        let full = try device(configs(try makeTree([HAFixture.garage()])), "sim-garage")
        var scope = ScopeConfig()
        scope.characteristicTypes = ScopeList(deny: ["obstruction-detected"])
        let fewer = try device(configs(try makeTree([HAFixture.garage()], scope: scope)), "sim-garage")
        let merged = HomeAssistantDiscovery.withRemovedComponents(previous: full, next: fewer)
        let gone = Set(try components(full).keys).subtracting(try components(fewer).keys)
        XCTAssertEqual(gone.count, 1)
        for key in gone {
            XCTAssertEqual(try components(merged)[key], ["platform": "binary_sensor"])
        }
        XCTAssertEqual(merged["device"], fewer["device"])
        XCTAssertEqual(HomeAssistantDiscovery.withRemovedComponents(previous: nil, next: fewer), fewer)
        XCTAssertEqual(HomeAssistantDiscovery.withRemovedComponents(previous: fewer, next: full), full)
    }

    func testOwnConfigsAreRecognised() throws {
        let all = configs(try makeTree([HAFixture.lamp()]))
        let (topic, payload) = try XCTUnwrap(all.first)
        XCTAssertTrue(
            HomeAssistantDiscovery.isOwnConfig(
                topic: topic, payload: payload, prefix: prefix, gatewayStatusTopic: status))
        XCTAssertFalse(
            HomeAssistantDiscovery.isOwnConfig(
                topic: topic, payload: payload, prefix: prefix, gatewayStatusTopic: "other/$gateway/status"),
            "another gateway's config is not ours to clear")
        XCTAssertFalse(
            HomeAssistantDiscovery.isOwnConfig(
                topic: "homeassistant/device/zigbee_1/config", payload: ["origin": ["name": "Zigbee2MQTT"]],
                prefix: prefix, gatewayStatusTopic: status))
        XCTAssertFalse(
            HomeAssistantDiscovery.isOwnConfig(
                topic: "homeassistant/light/homemqtt_x/config", payload: payload, prefix: prefix,
                gatewayStatusTopic: status))
    }
}
