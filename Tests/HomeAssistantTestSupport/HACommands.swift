import Foundation
import HomeModel
import XCTest

/// The commands Home Assistant sends on a discovery config's command topics: for
/// `HomeAssistantCommandsTests`, and for the end-to-end test that sends them through the binary.
enum HACommands {
    typealias Config = [String: JSONValue]
    typealias Variables = [String: HATemplate.Value]

    static func isCommand(_ option: String) -> Bool {
        option.contains("command") || option == "set_position_topic"
    }

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
            // Its frontend steps by temp_step from the value shown, and a service call takes any
            // value within min_temp…max_temp: the grid from min_temp and the one from 0 (13 and 14
            // as well as 13.5 for 4.5…32 in steps of 1).
            let low = c["min_temp"]?.doubleValue ?? 7, high = c["max_temp"]?.doubleValue ?? 35
            let step = c["temp_step"]?.doubleValue ?? 1
            let fromZero = numbers((low / step).rounded(.up) * step, high, step)
            var seen = Set<String>()
            let values: [Variables] = (numbers(low, high, step) + fromZero).map { v in
                v.mapValues { if case .int(let i) = $0 { .float(Double(i)) } else { $0 } }
            }.filter { seen.insert($0["value"]?.text ?? "").inserted }
            // A template that reads the entity's mode (`this.state`: a heater-cooler's single
            // target writes the threshold of its mode) is sent in every mode.
            let template = option.replacingOccurrences(of: "_topic", with: "_template")
            guard c[template]?.stringValue?.contains("this.") == true else { return values }
            return (c["modes"]?.arrayValue ?? []).compactMap(\.stringValue).flatMap { mode in
                values.map { $0.merging(["this": HATemplate.Value.dict(["state": .string(mode)])]) { $1 } }
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
