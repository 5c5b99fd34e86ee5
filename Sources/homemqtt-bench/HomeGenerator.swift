import Foundation
import HomeModel

/// Writes accessory files for the simulator, the same format a user puts in
/// `Config/accessories/`, so that loading them is part of what the start-up scenario measures.
enum HomeGenerator {
    /// The characteristics of each generated lightbulb service besides its Name.
    enum Shape: Sendable {
        /// power-state, brightness, hue, saturation, color-temperature: five that notify.
        case colourLight
        /// power-state, brightness, hue, saturation: four that notify, plus the Name.
        case colourLightNoTemperature

        /// Each characteristic and its starting value, as a literal that YAML and JSON read alike.
        var values: [(name: String, literal: String)] {
            let common = [("power-state", "false"), ("brightness", "50"), ("hue", "0"), ("saturation", "0")]
            switch self {
            case .colourLight: return common + [("color-temperature", "200")]
            case .colourLightNoTemperature: return common
            }
        }

        var yaml: String { values.map { "\($0.name): \($0.literal)" }.joined(separator: "\n      ") }

        /// Characteristics in scope per service: the listed ones and the service's Name.
        var characteristicsPerService: Int {
            switch self {
            case .colourLight: 6
            case .colourLightNoTemperature: 5
            }
        }
    }

    static let manufacturer = "HomeMQTT Bench"
    static let firmware = "1.0.0"

    /// Accessory `index` (1…) of `count`: its number, zero-padded to the count's digits.
    static func number(_ index: Int, of count: Int) -> String {
        let digits = String(count).count
        return String(repeating: "0", count: max(digits - String(index).count, 0)) + String(index)
    }

    static func name(_ index: Int, of count: Int) -> String { "Bench Light \(number(index, of: count))" }
    static func serviceName(_ service: Int) -> String { "Lamp \(service)" }

    /// The same accessories as `write` makes, as JSON for Scripts/bench-hap-python-bridge.py:
    /// names, information, and each lightbulb service's characteristics with their starting values.
    static func hapPythonHome(accessories: Int, services: Int, shape: Shape) -> String {
        let values = shape.values.map { "\"\($0.name)\": \($0.literal)" }.joined(separator: ", ")
        let list = (1...max(accessories, 1)).map { index in
            let lamps = (1...max(services, 1)).map {
                "{\"name\": \"\(serviceName($0))\", \"characteristics\": {\(values)}}"
            }
            return """
                {"name": "\(name(index, of: accessories))", "manufacturer": "\(manufacturer)", \
                "model": "BL-\(services)", "serial": "BENCH-\(number(index, of: accessories))", \
                "firmware": "\(firmware)", "services": [\(lamps.joined(separator: ", "))]}
                """
        }
        return "[\n" + list.joined(separator: ",\n") + "\n]\n"
    }

    /// `accessories` files of `services` lightbulbs each, spread over `rooms` rooms.
    static func write(to directory: URL, accessories: Int, services: Int, shape: Shape, rooms: Int = 20) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        for index in 1...max(accessories, 1) {
            let number = self.number(index, of: accessories)
            var text = """
                name: \(name(index, of: accessories))
                manufacturer: \(manufacturer)
                model: BL-\(services)
                serial: BENCH-\(number)
                firmware: \(firmware)
                room: Room \((index - 1) % max(rooms, 1) + 1)
                services:

                """
            for service in 1...max(services, 1) {
                text += """
                      - type: lightbulb
                        name: \(serviceName(service))
                        behaviour: none
                        characteristics:
                          \(shape.yaml)

                    """
            }
            try text.write(
                to: directory.appendingPathComponent("light-\(number).yml"), atomically: false, encoding: .utf8)
        }
    }

    /// A value for round `round` (1, 2, …) that differs from the previous round's and from the
    /// generated starting values, and that the characteristic accepts.
    static func value(for metadata: CharacteristicMetadata, round: Int) -> CharacteristicValue {
        let odd = round % 2 == 1
        if metadata.format == .bool { return .bool(odd) }
        let low = metadata.minValue ?? 0
        let high = metadata.maxValue ?? 100
        let point = (low + (high - low) * (odd ? 0.75 : 0.25)).rounded()
        switch metadata.format {
        case .float: return .float(point)
        case .int: return .int(Int64(point))
        default: return .uint(UInt64(max(point, 0)))
        }
    }
}
