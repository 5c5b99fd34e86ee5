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

        var yaml: String {
            switch self {
            case .colourLight:
                "power-state: false\n      brightness: 50\n      hue: 0\n      saturation: 0\n      color-temperature: 200"
            case .colourLightNoTemperature:
                "power-state: false\n      brightness: 50\n      hue: 0\n      saturation: 0"
            }
        }

        /// Characteristics in scope per service: the listed ones and the service's Name.
        var characteristicsPerService: Int {
            switch self {
            case .colourLight: 6
            case .colourLightNoTemperature: 5
            }
        }
    }

    /// `accessories` files of `services` lightbulbs each, spread over `rooms` rooms.
    static func write(to directory: URL, accessories: Int, services: Int, shape: Shape, rooms: Int = 20) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let digits = String(accessories).count
        for index in 1...max(accessories, 1) {
            let number = String(repeating: "0", count: digits - String(index).count) + String(index)
            var text = """
                name: Bench Light \(number)
                manufacturer: HomeMQTT Bench
                model: BL-\(services)
                serial: BENCH-\(number)
                firmware: 1.0.0
                room: Room \((index - 1) % max(rooms, 1) + 1)
                services:

                """
            for service in 1...max(services, 1) {
                text += """
                      - type: lightbulb
                        name: Lamp \(service)
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
