import XCTest
import Gateway
@testable import HomeAssistant
import HomeModel

@testable import HomeAssistantTestSupport

/// What Home Assistant's documentation says each MQTT platform takes (home-assistant.io,
/// `source/_integrations/<platform>.mqtt.markdown` and the MQTT discovery page): required
/// options, the type of every option we use, and allowed values where the docs list them.
/// Options not listed here fail the check, so a misspelt key cannot slip through.
enum HASchema {
    enum Kind: Equatable {
        case string, topic, template, integer, number, boolean, stringList
        /// A string, or null to switch the feature off (cover `payload_stop`).
        case nullableString
        case oneOf(Set<String>)
        /// A list whose every element is one of these.
        case subsetOf(Set<String>)
        case availabilityList
    }

    struct Platform {
        var required: Set<String>
        var keys: [String: Kind]
    }

    static let common: [String: Kind] = [
        "platform": .string, "unique_id": .string, "name": .nullableString,
        "availability": .availabilityList, "availability_mode": .oneOf(["all", "any", "latest"]),
        "entity_category": .oneOf(["config", "diagnostic"]), "enabled_by_default": .boolean,
        "icon": .string, "qos": .integer,
    ]

    static let sensorDeviceClasses: Set<String> = [
        "apparent_power", "aqi", "atmospheric_pressure", "battery", "carbon_dioxide", "carbon_monoxide",
        "current", "data_rate", "data_size", "date", "distance", "duration", "energy", "enum", "frequency",
        "gas", "humidity", "illuminance", "irradiance", "moisture", "monetary", "nitrogen_dioxide",
        "nitrogen_monoxide", "nitrous_oxide", "ozone", "pm1", "pm10", "pm25", "power_factor", "power",
        "precipitation", "precipitation_intensity", "pressure", "reactive_power", "signal_strength",
        "sound_pressure", "speed", "sulphur_dioxide", "temperature", "timestamp", "volatile_organic_compounds",
        "voltage", "volume", "water", "weight", "wind_speed",
    ]

    static let binarySensorDeviceClasses: Set<String> = [
        "battery", "battery_charging", "carbon_monoxide", "cold", "connectivity", "door", "garage_door", "gas",
        "heat", "light", "lock", "moisture", "motion", "moving", "occupancy", "opening", "plug", "power",
        "presence", "problem", "running", "safety", "smoke", "sound", "tamper", "update", "vibration", "window",
    ]

    /// Units the sensor docs allow per device class (the ones we use).
    static let unitsByDeviceClass: [String: Set<String>] = [
        "temperature": ["°C", "°F", "K"], "humidity": ["%"], "illuminance": ["lx"], "battery": ["%"],
        "carbon_dioxide": ["ppm"], "carbon_monoxide": ["ppm"], "pm25": ["µg/m³"], "pm10": ["µg/m³"],
        "ozone": ["µg/m³"], "nitrogen_dioxide": ["µg/m³"], "sulphur_dioxide": ["µg/m³"],
        "volatile_organic_compounds": ["µg/m³", "mg/m³"], "duration": ["d", "h", "min", "s", "ms"],
        "voltage": ["V", "mV", "µV", "kV", "MV"], "current": ["A", "mA"], "power": ["W", "kW", "mW", "MW"],
        "energy": ["Wh", "kWh", "MWh"], "atmospheric_pressure": ["hPa", "kPa", "Pa", "mbar", "inHg", "mmHg"],
        "sound_pressure": ["dB", "dBA"], "distance": ["m", "cm", "mm", "km", "in", "ft", "yd", "mi"],
    ]

    static let platforms: [String: Platform] = [
        "light": Platform(
            required: ["command_topic"],
            keys: [
                "command_topic": .topic, "state_topic": .topic, "state_value_template": .template,
                "payload_on": .string, "payload_off": .string,
                "brightness_command_topic": .topic, "brightness_state_topic": .topic, "brightness_scale": .integer,
                "brightness_value_template": .template, "brightness_command_template": .template,
                "color_temp_command_topic": .topic, "color_temp_state_topic": .topic,
                "color_temp_value_template": .template,
                "min_mireds": .integer, "max_mireds": .integer,
                "hs_command_topic": .topic, "hs_state_topic": .topic, "hs_value_template": .template,
                "hs_command_template": .template,
                "color_mode_state_topic": .topic, "color_mode_value_template": .template,
            ]),
        "switch": Platform(
            required: ["command_topic"],
            keys: [
                "command_topic": .topic, "state_topic": .topic, "payload_on": .string, "payload_off": .string,
                "state_on": .string, "state_off": .string, "value_template": .template,
                "device_class": .oneOf(["outlet", "switch"]),
            ]),
        "cover": Platform(
            required: [],
            keys: [
                "command_topic": .topic, "state_topic": .topic, "value_template": .template,
                "payload_open": .nullableString, "payload_close": .nullableString, "payload_stop": .nullableString,
                "position_topic": .topic, "position_template": .template, "set_position_topic": .topic,
                "position_open": .integer, "position_closed": .integer,
                "tilt_command_topic": .topic, "tilt_status_topic": .topic, "tilt_status_template": .template,
                "tilt_min": .integer, "tilt_max": .integer, "tilt_opened_value": .integer,
                "tilt_closed_value": .integer,
                "device_class": .oneOf([
                    "awning", "blind", "curtain", "damper", "door", "garage", "gate", "shade", "shutter", "window",
                ]),
            ]),
        "lock": Platform(
            required: ["command_topic"],
            keys: [
                "command_topic": .topic, "state_topic": .topic, "value_template": .template,
                "payload_lock": .string, "payload_unlock": .string, "payload_open": .string,
                "state_locked": .string, "state_unlocked": .string, "state_jammed": .string,
            ]),
        "climate": Platform(
            required: [],
            keys: [
                "modes": .stringList, "mode_state_topic": .topic, "mode_state_template": .template,
                "mode_command_topic": .topic, "mode_command_template": .template,
                "action_topic": .topic, "action_template": .template,
                "current_temperature_topic": .topic, "current_temperature_template": .template,
                "temperature_state_topic": .topic, "temperature_state_template": .template,
                "temperature_command_topic": .topic, "temperature_command_template": .template,
                "temperature_low_state_topic": .topic, "temperature_low_command_topic": .topic,
                "temperature_high_state_topic": .topic, "temperature_high_command_topic": .topic,
                "temperature_low_command_template": .template, "temperature_high_command_template": .template,
                "current_humidity_topic": .topic, "target_humidity_state_topic": .topic,
                "target_humidity_command_topic": .topic,
                "min_temp": .number, "max_temp": .number, "temp_step": .number, "precision": .number,
                "min_humidity": .number, "max_humidity": .number,
                "temperature_unit": .oneOf(["C", "F"]),
                "power_command_topic": .topic, "payload_on": .string, "payload_off": .string,
            ]),
        // home-assistant.io alarm_control_panel.mqtt: states disarmed, armed_home, armed_away,
        // armed_night, armed_vacation, armed_custom_bypass, pending, arming, disarming, triggered.
        "alarm_control_panel": Platform(
            required: ["command_topic", "state_topic"],
            keys: [
                "command_topic": .topic, "state_topic": .topic, "value_template": .template,
                "command_template": .template, "code_arm_required": .boolean, "code_disarm_required": .boolean,
                "payload_arm_home": .string, "payload_arm_away": .string, "payload_arm_night": .string,
                "payload_disarm": .string,
                "supported_features": .subsetOf(
                    ["arm_home", "arm_away", "arm_night", "arm_vacation", "arm_custom_bypass", "trigger"]),
            ]),
        // event.mqtt: the payload (after value_template) is JSON with an `event_type` of event_types.
        "event": Platform(
            required: ["state_topic", "event_types"],
            keys: [
                "state_topic": .topic, "value_template": .template, "event_types": .stringList,
                "device_class": .oneOf(["button", "doorbell", "motion"]),
            ]),
        // humidifier.mqtt: modes go with mode_command_topic; actions off, humidifying, drying, idle.
        "humidifier": Platform(
            required: ["command_topic", "target_humidity_command_topic"],
            keys: [
                "command_topic": .topic, "state_topic": .topic, "state_value_template": .template,
                "payload_on": .string, "payload_off": .string, "device_class": .oneOf(["humidifier", "dehumidifier"]),
                "target_humidity_command_topic": .topic, "target_humidity_state_topic": .topic,
                "target_humidity_state_template": .template, "current_humidity_topic": .topic,
                "current_humidity_template": .template, "action_topic": .topic, "action_template": .template,
                "modes": .stringList, "mode_command_topic": .topic, "mode_state_topic": .topic,
                "mode_state_template": .template, "mode_command_template": .template,
                "min_humidity": .integer, "max_humidity": .integer,
            ]),
        // valve.mqtt: without reports_position, payload_open/close and state_open/closed.
        "valve": Platform(
            required: [],
            keys: [
                "command_topic": .topic, "state_topic": .topic, "value_template": .template,
                "payload_open": .nullableString, "payload_close": .nullableString, "payload_stop": .string,
                "state_open": .string, "state_closed": .string, "state_opening": .string, "state_closing": .string,
                "device_class": .oneOf(["water", "gas"]), "reports_position": .boolean,
            ]),
        "fan": Platform(
            required: ["command_topic"],
            keys: [
                "command_topic": .topic, "state_topic": .topic, "state_value_template": .template,
                "payload_on": .string, "payload_off": .string,
                "percentage_command_topic": .topic, "percentage_state_topic": .topic,
                "percentage_value_template": .template, "percentage_command_template": .template,
                "speed_range_min": .integer, "speed_range_max": .integer,
                "direction_command_topic": .topic, "direction_command_template": .template,
                "direction_state_topic": .topic, "direction_value_template": .template,
                "oscillation_command_topic": .topic, "oscillation_state_topic": .topic,
                "payload_oscillation_on": .string, "payload_oscillation_off": .string,
            ]),
        "sensor": Platform(
            required: ["state_topic"],
            keys: [
                "state_topic": .topic, "value_template": .template, "unit_of_measurement": .string,
                "device_class": .oneOf(sensorDeviceClasses),
                "state_class": .oneOf(["measurement", "total", "total_increasing"]), "options": .stringList,
                "suggested_display_precision": .integer,
            ]),
        "binary_sensor": Platform(
            required: ["state_topic"],
            keys: [
                "state_topic": .topic, "value_template": .template, "payload_on": .string, "payload_off": .string,
                "device_class": .oneOf(binarySensorDeviceClasses),
            ]),
        "number": Platform(
            required: ["command_topic"],
            keys: [
                "command_topic": .topic, "state_topic": .topic, "value_template": .template,
                "min": .number, "max": .number, "step": .number, "mode": .oneOf(["auto", "box", "slider"]),
                "command_template": .template,
                "unit_of_measurement": .string, "device_class": .oneOf(sensorDeviceClasses),
            ]),
        "select": Platform(
            required: ["command_topic", "options"],
            keys: [
                "command_topic": .topic, "state_topic": .topic, "value_template": .template, "options": .stringList,
                "command_template": .template,
            ]),
        "text": Platform(
            required: ["command_topic"],
            keys: [
                "command_topic": .topic, "state_topic": .topic, "value_template": .template, "min": .integer,
                "max": .integer,
            ]),
        "button": Platform(
            required: ["command_topic"],
            keys: [
                "command_topic": .topic, "payload_press": .string,
                "device_class": .oneOf(["identify", "restart", "update"]),
            ]),
    ]

    /// Problems with one component's config, empty when it fits the documented schema.
    static func problems(_ config: [String: JSONValue]) -> [String] {
        guard let platformName = config["platform"]?.stringValue, let platform = platforms[platformName] else {
            return ["unknown platform \(config["platform"].map { $0.encoded() } ?? "nil")"]
        }
        var out: [String] = []
        for key in platform.required.union(["platform", "unique_id"]) where config[key] == nil {
            out.append("\(platformName): missing required \(key)")
        }
        for (key, value) in config {
            guard let kind = platform.keys[key] ?? common[key] else {
                out.append("\(platformName): undocumented option \(key)")
                continue
            }
            if !fits(value, kind) { out.append("\(platformName): \(key) = \(value.encoded()) is not \(kind)") }
        }
        if let deviceClass = config["device_class"]?.stringValue, let unit = config["unit_of_measurement"]?.stringValue,
            let allowed = unitsByDeviceClass[deviceClass], !allowed.contains(unit)
        {
            out.append("\(platformName): unit \(unit) is not one of \(allowed.sorted()) for \(deviceClass)")
        }
        if config["device_class"] == "enum" {
            if config["options"] == nil { out.append("enum sensor without options") }
            if config["unit_of_measurement"] != nil || config["state_class"] != nil {
                out.append("enum sensor with a unit or state class")
            }
        }
        return out
    }

    static func fits(_ value: JSONValue, _ kind: Kind) -> Bool {
        switch kind {
        case .string: return value.stringValue != nil
        case .topic:
            guard let s = value.stringValue else { return false }
            return !s.isEmpty && !s.contains("+") && !s.contains("#")
        case .template:
            guard let s = value.stringValue else { return false }
            return (try? HATemplate.parse(s)) != nil
        case .integer: return value.int64Value != nil && value.stringValue == nil && value.boolValue == nil
        case .number: return value.doubleValue != nil
        case .boolean: return value.boolValue != nil
        case .stringList:
            return value.arrayValue.map { !$0.isEmpty && $0.allSatisfy { $0.stringValue != nil } } ?? false
        case .nullableString: return value.isNull || value.stringValue != nil
        case .oneOf(let allowed): return value.stringValue.map(allowed.contains) ?? false
        case .subsetOf(let allowed):
            return value.arrayValue.map { $0.allSatisfy { $0.stringValue.map(allowed.contains) ?? false } } ?? false
        case .availabilityList:
            guard let list = value.arrayValue, !list.isEmpty else { return false }
            return list.allSatisfy { entry in
                guard let object = entry.objectValue, let topic = object["topic"]?.stringValue, !topic.isEmpty else {
                    return false
                }
                return object.keys.allSatisfy {
                    ["topic", "payload_available", "payload_not_available", "value_template"].contains($0)
                }
                    && object.values.allSatisfy { $0.stringValue != nil }
            }
        }
    }
}

final class HomeAssistantSchemaTests: XCTestCase {
    func testEvaluatorFollowsJinjaForTheLookupForm() throws {
        let template = "{{ {'0': 'open', '1': 'it\\'s'}[value] | default('None') }}"
        XCTAssertEqual(try HATemplate.render(template, value: "0"), "open")
        XCTAssertEqual(try HATemplate.render(template, value: "1"), "it's")
        // A missing key is undefined in Jinja, and `default` replaces undefined.
        XCTAssertEqual(try HATemplate.render(template, value: "7"), "None")
        XCTAssertEqual(try HATemplate.render("{{ value | float | round(0) | int }}", value: "49.6"), "50")
        XCTAssertEqual(try HATemplate.render("{{ value | float | round(0) | int }}", value: "20.0"), "20")
        XCTAssertEqual(try HATemplate.render("{{ [value | int, 10] | max }}", value: "3"), "10")
        XCTAssertEqual(try HATemplate.render("{{ [value | int, 10] | max }}", value: "55"), "55")
    }

    func testEvaluatorFollowsJinjaForExpressionsAndJSON() throws {
        // Filters bind tighter than arithmetic; `/` gives a float; Home Assistant's round(0) an int.
        XCTAssertEqual(try HATemplate.render("{{ value | int * 25 + 0 }}", variables: ["value": .int(3)]), "75")
        XCTAssertEqual(try HATemplate.render("{{ ((value | float - 0) / 25) | round(0) | int }}", value: "75.0"), "3")
        XCTAssertEqual(try HATemplate.render("{{ hue | round(0) }}", variables: ["hue": .float(27.5)]), "28")
        XCTAssertEqual(try HATemplate.render("{{ sat | round(1) }}", variables: ["sat": .float(27.46)]), "27.5")
        XCTAssertEqual(
            try HATemplate.render(#"{"a":{"b":{{ '1' if value | int > 0 else '0' }}}}"#, variables: ["value": .int(0)]),
            #"{"a":{"b":0}}"#)
        let state = #"{"heater-cooler":{"active":0,"target-heater-cooler-state":2}}"#
        let mode =
            "{{ 'off' if value_json['heater-cooler']['active'] == 0 else {'2': 'cool'}"
            + "[value_json['heater-cooler']['target-heater-cooler-state'] | string] | default('None') }}"
        XCTAssertEqual(try HATemplate.render(mode, value: state), "off")
        XCTAssertEqual(try HATemplate.render(mode, value: state.replacingOccurrences(of: ":0,", with: ":1,")), "cool")
        // A key of a missing service raises in Jinja; the evaluator gives nil, where Home Assistant
        // takes the payload itself (HomeAssistantJinjaParityTests).
        XCTAssertNil(try HATemplate.render("{{ value_json['x']['y'] }}", value: "{}"))
        XCTAssertNil(try HATemplate.render("{{ value | int }}", value: "abc"))
    }

    func testEvaluatorRefusesOtherForms() {
        for template in [
            "{{ states('sensor.x') }}", "{% if value %}1{% endif %}", "{{ value | abs }}", "{{ now() }}", "{{ value",
        ] {
            XCTAssertThrowsError(try HATemplate.parse(template), template)
        }
    }

    func testSchemaCheckCatchesMistakes() {
        XCTAssertFalse(
            HASchema.problems(["platform": "light", "unique_id": "x"]).isEmpty, "light without command_topic")
        XCTAssertFalse(
            HASchema.problems(["platform": "sensor", "unique_id": "x", "state_topic": "a/state", "stat_topic": "a"])
                .isEmpty)
        XCTAssertFalse(
            HASchema.problems([
                "platform": "sensor", "unique_id": "x", "state_topic": "a/state",
                "device_class": "temperature", "unit_of_measurement": "%",
            ]).isEmpty)
        XCTAssertFalse(
            HASchema.problems([
                "platform": "light", "unique_id": "x", "command_topic": "a/set", "brightness_scale": "100",
            ]).isEmpty)
        XCTAssertEqual(HASchema.problems(["platform": "light", "unique_id": "x", "command_topic": "a/set"]), [])
    }
}
