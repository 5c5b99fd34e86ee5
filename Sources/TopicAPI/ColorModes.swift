import Foundation
import Gateway
import HomeModel

/// Which colour a light with both colour temperature and hue/saturation shows: its `$state`'s
/// `$color-mode` (`color-temperature` or `hue-saturation`), which Home Assistant reads as the
/// light's colour mode. HomeKit has no colour-mode characteristic, so the gateway tells it from
/// which of the two was changed last, comparing each `$state` document's values with the last
/// document's (so a change from anywhere counts: Home Assistant, a `set`, the accessory itself).
///
/// A real bulb set to a colour temperature reports hue and saturation too, matching that
/// temperature (HomeKit's Home app shows the colour from them): that change of hue and
/// saturation is the colour temperature's, not a colour. So a colour temperature that changed
/// wins over a hue/saturation that changed with it (in one burst, one document), and a hue and
/// saturation that arrive on their own (the bulb's report a moment later, perhaps one of them at
/// a time) choose `hue-saturation` only when they are not the colour of the colour temperature
/// in effect (`isWhite`); when they are, the light shows that temperature, the same colour.
/// Setting a colour changes no bulb's colour temperature, so a changed colour temperature is
/// never a colour's echo.
///
/// The last document's values and mode outlive a restart on the broker: the `$state` an earlier
/// run retained is read at start (`readEarlier`), so the mode last in effect is kept, and a
/// value that changed while the gateway was down is a change like any other.
struct ColorModes {
    static let field = "$color-mode"

    enum Mode: String {
        case colorTemperature = "color-temperature"
        case hueSaturation = "hue-saturation"
    }

    /// One light's values in the last document, and the mode it said.
    struct Last {
        var temperature: Double
        var hue: Double
        var saturation: Double
        var mode: Mode
    }

    /// By accessory id and service instance id.
    private var last: [String: [UInt64: Last]] = [:]
    /// An earlier run's documents' lights (read at start), by accessory topic and service slug:
    /// taken by the first document of each.
    private var earlier: [String: [String: Last]] = [:]

    /// The mode of a service with `values` (its document's fields, by slug), recorded as the
    /// last; nil for a service that is not such a light.
    mutating func mode(
        _ service: TopicTree.ServiceNode, of node: TopicTree.AccessoryNode, values: [String: JSONValue]
    ) -> Mode? {
        guard service.typeName == "lightbulb", let now = Self.colours(service, values) else { return nil }
        let before = last[node.id]?[service.iid] ?? earlier[node.topic]?.removeValue(forKey: service.slug)
        let mode: Mode
        if let before {
            if now.temperature != before.temperature {
                mode = .colorTemperature
            } else if now.hue != before.hue || now.saturation != before.saturation {
                mode = Self.isWhite(now) ? .colorTemperature : .hueSaturation
            } else {
                mode = before.mode
            }
        } else {
            // Nothing known of it (a first start): a colour that is its temperature's shows as
            // the temperature.
            mode = Self.isWhite(now) ? .colorTemperature : .hueSaturation
        }
        last[node.id, default: [:]][service.iid] = Last(
            temperature: now.temperature, hue: now.hue, saturation: now.saturation, mode: mode)
        return mode
    }

    /// Forgets what the documents of accessories no longer served said, and unless `earlier`,
    /// what an earlier run's said (the first pass has taken what it could).
    mutating func keep(only ids: Set<String>, earlier: Bool) {
        last = last.filter { ids.contains($0.key) }
        if !earlier { self.earlier = [:] }
    }

    /// An earlier run's `$state` (a retained message seen at start) of `accessoryTopic`.
    mutating func readEarlier(accessoryTopic: String, document: JSONValue) {
        guard case .object(let services) = document else { return }
        var lights: [String: Last] = [:]
        for (slug, fields) in services {
            guard case .object(let values) = fields, let mode = values[Self.field]?.stringValue.flatMap(Mode.init),
                let t = values["color-temperature"]?.doubleValue, let h = values["hue"]?.doubleValue,
                let s = values["saturation"]?.doubleValue
            else { continue }
            lights[slug] = Last(temperature: t, hue: h, saturation: s, mode: mode)
        }
        if !lights.isEmpty { earlier[accessoryTopic] = lights }
    }

    /// The colour temperature, hue and saturation in a light's document, when it has all three.
    static func colours(
        _ service: TopicTree.ServiceNode, _ values: [String: JSONValue]
    ) -> (temperature: Double, hue: Double, saturation: Double)? {
        func value(_ type: String) -> Double? {
            service.characteristics.first { $0.typeName == type }.flatMap { values[$0.slug]?.doubleValue }
        }
        guard let t = value("color-temperature"), let h = value("hue"), let s = value("saturation") else { return nil }
        return (t, h, s)
    }

    /// Whether a hue and saturation are the colour of the colour temperature (in mireds): within
    /// 10 points of saturation of it on the colour wheel. Bulbs work a temperature's colour out
    /// by formulas of their own and round it to whole numbers, which moves it a few points; a
    /// colour a person picks is further from the white curve than that.
    static func isWhite(_ colour: (temperature: Double, hue: Double, saturation: Double)) -> Bool {
        let white = hueSaturation(mireds: colour.temperature)
        func point(_ hue: Double, _ saturation: Double) -> (Double, Double) {
            (saturation * cos(hue * .pi / 180), saturation * sin(hue * .pi / 180))
        }
        let (x0, y0) = point(white.hue, white.saturation)
        let (x1, y1) = point(colour.hue, colour.saturation)
        return ((x1 - x0) * (x1 - x0) + (y1 - y0) * (y1 - y0)).squareRoot() <= 10
    }

    /// A colour temperature's hue (0…360) and saturation (0…100), as Home Assistant works it out
    /// (`color_temperature_to_hs`: Tanner Helland's approximation of a black body's RGB, then HSV).
    static func hueSaturation(mireds: Double) -> (hue: Double, saturation: Double) {
        let t = 1_000_000 / max(mireds, 1) / 100
        func clamp(_ x: Double) -> Double { min(max(x, 0), 255) }
        let red = t <= 66 ? 255 : clamp(329.698727446 * pow(t - 60, -0.1332047592))
        let green =
            t <= 66
            ? clamp(99.4708025861 * log(t) - 161.1195681661) : clamp(288.1221695283 * pow(t - 60, -0.0755148492))
        let blue = t >= 66 ? 255 : t <= 19 ? 0 : clamp(138.5177312231 * log(t - 10) - 305.0447927307)
        let top = max(red, green, blue), bottom = min(red, green, blue)
        guard top > 0, top > bottom else { return (0, 0) }
        let span = top - bottom
        var hue: Double
        if top == red {
            hue = 60 * (green - blue) / span
        } else if top == green {
            hue = 60 * (2 + (blue - red) / span)
        } else {
            hue = 60 * (4 + (red - green) / span)
        }
        if hue < 0 { hue += 360 }
        return (hue, 100 * span / top)
    }
}
