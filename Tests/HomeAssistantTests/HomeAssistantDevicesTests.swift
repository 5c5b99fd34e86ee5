import HomeMQTTApp
import Foundation
import Gateway
@testable import HomeAssistant
import HomeModel
import TestSupport
import XCTest

@testable import HomeAssistantTestSupport

/// The Home Assistant entities real devices get: every `/accessories` dump of the fixtures, as a
/// table of what each device produces, checked against Home Assistant's documented options.
final class HomeAssistantDevicesTests: XCTestCase {
    static let fixtures = repositoryRoot.appendingPathComponent("Tests/Fixtures/hap-fixtures")

    /// One row per entity: `<name>: <platform>[/<device class>][ <unit>][ <state class>][ off][ <category>]`.
    static func rows(_ accessories: [Accessory]) throws -> [String] {
        let tree = TopicTree(
            base: "home", accessories: accessories, home: Home(), scope: try ScopeFilter(ScopeConfig()))
        let configs = HomeAssistantDiscovery.configs(
            tree: tree, prefix: "homeassistant", gatewayStatusTopic: "home/$gateway/status")
        var out: [String] = []
        for document in configs.values {
            let device = document["device"]?["name"]?.stringValue ?? "?"
            for component in document["components"]?.objectValue?.values ?? [:].values {
                guard let config = component.objectValue else { continue }
                XCTAssertEqual(HASchema.problems(config), [], "\(device): \(config)")
                let name = config["name"]?.stringValue.map { "\(device) \($0)" } ?? device
                var row = "\(name): \(config["platform"]?.stringValue ?? "?")"
                if let deviceClass = config["device_class"]?.stringValue { row += "/\(deviceClass)" }
                if let unit = config["unit_of_measurement"]?.stringValue { row += " \(unit)" }
                if let stateClass = config["state_class"]?.stringValue { row += " \(stateClass)" }
                if config["enabled_by_default"] == false { row += " off" }
                if let category = config["entity_category"]?.stringValue { row += " \(category)" }
                out.append(row)
            }
        }
        return out.sorted()
    }

    static func load(_ file: String) throws -> [Accessory] {
        let bytes = try Array(Data(contentsOf: fixtures.appendingPathComponent(file)))
        return try HAPAccessoryJSON.parse(bytes, idPrefix: file)
    }

    /// What each device of the fixtures becomes. Vendor characteristics that are known have
    /// their names and units (ecobee's targets, Eve's energy readings); unknown ones are there
    /// but off by default, as diagnostics or configuration; no "name" characteristic is an entity.
    static let expected: [String: [String]] = [
        // The camera's stream management is for the controller: no entity, so no device.
        "camera.json": [],
        "ecobee3_no_sensors.json": [
            "HomeW Away cool target: number/temperature °C config",
            "HomeW Away heat target: number/temperature °C config",
            "HomeW Clear hold: button config",
            "HomeW Current mode: sensor diagnostic",
            "HomeW Custom 1621f556: text off config",
            "HomeW Custom 1b1515f2: sensor off diagnostic",
            "HomeW Custom 1b300bc2: number off config",
            "HomeW Custom 41935e3e: binary_sensor off diagnostic",
            "HomeW Custom 48f62aec: sensor off diagnostic",
            "HomeW Custom 4a6ae4f6: sensor off diagnostic",
            "HomeW Custom a8f798e0: sensor off diagnostic",
            "HomeW Custom bfe61c70: sensor off diagnostic",
            "HomeW Custom c35da3c0: number off config",
            "HomeW Custom db7bf261: sensor off diagnostic",
            "HomeW Home cool target: number/temperature °C config",
            "HomeW Home heat target: number/temperature °C config",
            "HomeW Motion: binary_sensor/motion",
            "HomeW Occupancy: binary_sensor/occupancy",
            "HomeW Sleep cool target: number/temperature °C config",
            "HomeW Sleep heat target: number/temperature °C config",
            "HomeW Temperature units: select config",
            "HomeW: climate",
        ],
        "eve_energy.json": [
            "Eve Energy 3A35 Current: sensor/current A measurement",
            "Eve Energy 3A35 In use: binary_sensor/power",
            "Eve Energy 3A35 Lock Physical Controls: select config",
            "Eve Energy 3A35 Logging Custom e863f112: number off config",
            "Eve Energy 3A35 Power: sensor/power W measurement",
            "Eve Energy 3A35 Total consumption: sensor/energy kWh total_increasing",
            "Eve Energy 3A35 Voltage: sensor/voltage V measurement",
            "Eve Energy 3A35: switch/outlet",
        ],
        "home_assistant_bridge_camera.json": [
            "HASS Bridge V0N6 Connectivity: binary_sensor/connectivity diagnostic",
            "IPCamera Mute: switch",
            "IPCamera Mute: switch",
            "IPCamera Volume: number %",
            "IPCamera Volume: number %",
        ],
        "home_assistant_bridge_fan.json": [
            "Ceiling Fan: fan",
            "Home Assistant Bridge Connectivity: binary_sensor/connectivity diagnostic",
            "Living Room Fan: fan",
        ],
        "idevices_switch.json": [
            "iDevices Switch Custom da594802: sensor off diagnostic",
            "iDevices Switch Night Light Hue: number",
            "iDevices Switch Night Light Saturation: number",
            "iDevices Switch Night Light: light",
            "iDevices Switch: switch/switch",
        ],
        "koogeek_ls1.json": [
            "Koogeek-LS1-20833F Light Strip Hue: number °",
            "Koogeek-LS1-20833F Light Strip Saturation: number %",
            "Koogeek-LS1-20833F Light Strip: light",
            "Koogeek-LS1-20833F Time value since Epoch: number off config",
            "Koogeek-LS1-20833F Timezone: number off config",
        ],
        "nanoleaf_bulb.json": [
            "Nanoleaf A19 0US9 Active transition count: sensor",
            "Nanoleaf A19 0US9 Hue: number °",
            "Nanoleaf A19 0US9 Saturation: number %",
            "Nanoleaf A19 0US9: light",
        ],
    ]

    func testEveryFixtureDevicesEntities() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.fixtures.path)
            .filter { $0.hasSuffix(".json") }.sorted()
        XCTAssertEqual(files, Self.expected.keys.sorted(), "every fixture has its table")
        for file in files {
            XCTAssertEqual(try Self.rows(try Self.load(file)), Self.expected[file], file)
        }
    }

    // MARK: - The cases of the issue, each on a device built from the catalog

    struct Missing: Error { var name: String }

    static func characteristic(_ name: String, _ iid: UInt64, hidden: Bool = false) throws -> Characteristic {
        guard let type = Catalog.characteristicType(named: name) else { throw Missing(name: name) }
        var metadata = type.metadata
        if hidden { metadata.permissions.insert(.hidden) }
        return Characteristic(iid: iid, type: type.uuid, value: nil, metadata: metadata)
    }

    /// One accessory with one service of `service` and these characteristics (iids from 10).
    static func device(_ service: String, _ names: [String], extra: [Characteristic] = []) throws -> [Accessory] {
        guard let type = Catalog.serviceType(named: service) else { throw Missing(name: service) }
        var characteristics = try names.enumerated().map { try characteristic($0.element, UInt64(10 + $0.offset)) }
        characteristics += extra
        let info = try AccessoryService(
            iid: 1, type: StandardUUID.accessoryInformation,
            characteristics: [characteristic("name", 2), characteristic("manufacturer", 3)])
        return [
            Accessory(
                id: "dev", name: "Device", manufacturer: "Kilgo", model: "K", serialNumber: "1",
                firmwareRevision: "1.0",
                services: [info, AccessoryService(iid: 9, type: type.uuid, characteristics: characteristics)])
        ]
    }

    static func components(_ accessories: [Accessory], supportURL: String? = nil) throws -> (
        JSONValue, [[String: JSONValue]]
    ) {
        let tree = TopicTree(
            base: "home", accessories: accessories, home: Home(), scope: try ScopeFilter(ScopeConfig()))
        let configs = HomeAssistantDiscovery.configs(
            tree: tree, prefix: "homeassistant", gatewayStatusTopic: "home/$gateway/status",
            options: .init(supportURL: supportURL))
        let document = try XCTUnwrap(configs.values.first)
        let list = (document["components"]?.objectValue?.values.compactMap(\.objectValue) ?? [])
        for config in list { XCTAssertEqual(HASchema.problems(config), [], "\(config)") }
        return (document, list)
    }

    static func only(_ list: [[String: JSONValue]], _ platform: String) throws -> [String: JSONValue] {
        let matches = list.filter { $0["platform"]?.stringValue == platform }
        XCTAssertEqual(matches.count, 1, "\(platform) in \(list.map { $0["platform"] ?? .null })")
        return try XCTUnwrap(matches.first)
    }

    static func render(_ template: JSONValue?, _ value: String) throws -> String? {
        try HATemplate.render(try XCTUnwrap(template?.stringValue), value: value)
    }

    /// `set` takes what Home Assistant sends on a command topic.
    static func accepts(_ name: String, _ payload: String) throws -> Bool {
        let metadata = try XCTUnwrap(Catalog.characteristicType(named: name)).metadata
        return (try? ValueCodec.parse(text: payload, metadata: metadata, label: name)) != nil
    }

    func testAThermostatWithoutAModeHasOneModeItIsIn() throws {
        let (_, list) = try Self.components(
            try Self.device("thermostat", ["current-temperature", "target-temperature", "current-heating-cooling"]))
        let climate = try Self.only(list, "climate")
        XCTAssertEqual(climate["modes"], ["heat"], "no default modes Home Assistant would offer unwired")
        XCTAssertEqual(climate["mode_state_topic"], "home/default-room/device/thermostat/target-temperature/state")
        XCTAssertEqual(try Self.render(climate["mode_state_template"], "21.5"), "heat")
        XCTAssertNil(climate["mode_command_topic"])
    }

    func testAButtonIsAnEventWhosePressesAreEventTypes() throws {
        let (_, list) = try Self.components(try Self.device("stateless-programmable-switch", ["input-event"]))
        let event = try Self.only(list, "event")
        XCTAssertEqual(event["event_types"], ["single-press", "double-press", "long-press"])
        XCTAssertEqual(event["device_class"], "button")
        XCTAssertEqual(event["state_topic"], "home/default-room/device/stateless-programmable-switch/input-event/state")
        for (payload, type) in [("0", "single-press"), ("1", "double-press"), ("2", "long-press")] {
            let rendered = try XCTUnwrap(try Self.render(event["value_template"], payload))
            XCTAssertEqual(try JSONValue(parsing: Array(rendered.utf8))["event_type"]?.stringValue, type)
        }
        XCTAssertTrue(list.allSatisfy { $0["platform"] != "sensor" }, "no retained enum sensor for presses")
        let (_, doorbell) = try Self.components(try Self.device("doorbell", ["input-event"]))
        XCTAssertEqual(try Self.only(doorbell, "event")["device_class"], "doorbell")
    }

    func testASecuritySystemIsAnAlarmControlPanel() throws {
        let (_, list) = try Self.components(
            try Self.device("security-system", ["current-security-system-state", "target-security-system-state"]))
        let panel = try Self.only(list, "alarm_control_panel")
        XCTAssertTrue(list.allSatisfy { $0["platform"] != "select" }, "no select beside the panel")
        XCTAssertEqual(
            panel["command_topic"], "home/default-room/device/security-system/target-security-system-state/set")
        XCTAssertEqual(panel["supported_features"], ["arm_home", "arm_away", "arm_night"])
        for key in ["payload_arm_home", "payload_arm_away", "payload_arm_night", "payload_disarm"] {
            let payload = try XCTUnwrap(panel[key]?.stringValue, key)
            XCTAssertTrue(try Self.accepts("target-security-system-state", payload), "\(key) \(payload)")
        }
        let states = try (0...4).map { try Self.render(panel["value_template"], "\($0)") }
        XCTAssertEqual(states, ["armed_home", "armed_away", "armed_night", "disarmed", "triggered"])
    }

    func testAHumidifierDehumidifierIsAHumidifier() throws {
        let (_, list) = try Self.components(
            try Self.device(
                "humidifier-dehumidifier",
                [
                    "active", "current-relative-humidity", "current-humidifier-dehumidifier-state",
                    "target-humidifier-dehumidifier-state", "relative-humidity-humidifier-threshold",
                ]))
        let humidifier = try Self.only(list, "humidifier")
        XCTAssertTrue(list.allSatisfy { $0["platform"] != "select" && $0["platform"] != "number" }, "\(list)")
        XCTAssertEqual(humidifier["device_class"], "humidifier")
        XCTAssertEqual(humidifier["command_topic"], "home/default-room/device/humidifier-dehumidifier/active/set")
        XCTAssertEqual(
            humidifier["target_humidity_command_topic"],
            "home/default-room/device/humidifier-dehumidifier/humidifier-threshold/set")
        XCTAssertEqual(humidifier["modes"], ["humidifier-or-dehumidifier", "humidifier", "dehumidifier"])
        for mode in humidifier["modes"]?.arrayValue ?? [] {
            XCTAssertTrue(try Self.accepts("target-humidifier-dehumidifier-state", mode.stringValue ?? ""))
        }
        XCTAssertEqual(try Self.render(humidifier["action_template"], "3"), "drying")
    }

    func testValvesFaucetsAndIrrigationAreValves() throws {
        for service in ["valve", "faucet", "irrigation-system"] {
            let names = service == "faucet" ? ["active"] : ["active", "in-use"]
            let (_, list) = try Self.components(try Self.device(service, names))
            let valve = try Self.only(list, "valve")
            XCTAssertEqual(valve["command_topic"]?.stringValue, "home/default-room/device/\(service)/active/set")
            XCTAssertEqual(valve["device_class"], "water")
            XCTAssertTrue(try Self.accepts("active", valve["payload_open"]?.stringValue ?? ""))
            XCTAssertTrue(try Self.accepts("active", valve["payload_close"]?.stringValue ?? ""))
        }
    }

    func testAHeaterCoolerIsAClimateWithItsPowerAndModes() throws {
        let (_, list) = try Self.components(
            try Self.device(
                "heater-cooler",
                [
                    "active", "current-heater-cooler-state", "target-heater-cooler-state", "current-temperature",
                    "heating-threshold", "cooling-threshold",
                ]))
        let climate = try Self.only(list, "climate")
        XCTAssertEqual(climate["power_command_topic"], "home/default-room/device/heater-cooler/active/set")
        XCTAssertEqual(climate["modes"], ["heat_cool", "heat", "cool"])
        XCTAssertEqual(try Self.render(climate["mode_command_template"], "cool"), "2")
        XCTAssertEqual(try Self.render(climate["action_template"], "2"), "heating")
    }

    func testUnknownCharacteristicsAreOffByDefaultHiddenAndNamesAreNoEntities() throws {
        let custom = Characteristic(
            iid: 30, type: "E4489BBD-0000-4569-93E5-B345E3E5508F", value: nil,
            metadata: CharacteristicMetadata(format: .uint8, permissions: [.read, .notify]))
        let hidden = try Self.characteristic("status-fault", 31, hidden: true)
        let (_, list) = try Self.components(
            try Self.device("switch", ["power-state", "name"], extra: [custom, hidden]))
        // HomeKit hides a hidden characteristic from people, and so does the gateway's tree.
        XCTAssertEqual(list.count, 2, "the switch and the custom characteristic: \(list)")
        XCTAssertFalse(list.contains { $0["state_topic"]?.stringValue?.contains("status-fault") ?? false })
        let off = list.filter { $0["enabled_by_default"] == false }
        XCTAssertEqual(off.count, 1)
        XCTAssertTrue(off.allSatisfy { $0["entity_category"] == "diagnostic" })
        XCTAssertFalse(list.contains { $0["name"]?.stringValue?.hasSuffix("Name") ?? false })
    }

    func testTheOriginCarriesTheVersionAndTheSupportURL() throws {
        let (document, _) = try Self.components(
            try Self.device("switch", ["power-state"]), supportURL: "https://example.org/help")
        XCTAssertEqual(document["origin"]?["name"], "HomeMQTT")
        XCTAssertEqual(document["origin"]?["sw_version"]?.stringValue, HomeMQTTVersion.current)
        XCTAssertEqual(document["origin"]?["support_url"], "https://example.org/help")
    }

    func testTheSupportURLIsConfiguredAndChecked() throws {
        let configured = try HomeMQTTApp.parseConfig(
            "homeassistant:\n  support-url: https://example.org/help\n", file: "gateway.yml", environment: [:])
        XCTAssertEqual(configured[HomeAssistantConfig.self].supportURL, "https://example.org/help")
        XCTAssertNil(
            try HomeMQTTApp.parseConfig("base-topic: home\n", file: "gateway.yml", environment: [:])[
                HomeAssistantConfig.self
            ]
            .supportURL)
        XCTAssertThrowsError(
            try HomeMQTTApp.parseConfig(
                "homeassistant:\n  support-url: ftp://x\n", file: "gateway.yml", environment: [:])
        ) { error in
            XCTAssertEqual((error as? ConfigError)?.key, "homeassistant.support-url")
        }
    }
}
