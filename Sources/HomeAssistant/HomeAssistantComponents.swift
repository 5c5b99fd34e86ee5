import Gateway
import HomeModel

// The Home Assistant components of one accessory: the component and template types, and the
// builder's state, naming and the lookups its service and characteristic parts share.

/// One entry of a device config's `components`: its key (stable: instance ids only) and its
/// options, `platform` and `unique_id` included.
struct HomeAssistantComponent: Sendable, Hashable {
    var key: String
    var config: [String: JSONValue]

    var platform: String { config["platform"]?.stringValue ?? "" }
}

/// The few template forms the configs use. Our state payloads are plain text, so every template
/// works on `value` alone; keeping to these forms keeps them checkable.
enum HomeAssistantTemplate {
    /// `{{ {'0': 'open', …}[value] | default('None') }}`: a lookup; `None` is Home Assistant's
    /// payload for "unknown".
    static func lookup(_ pairs: [(String, String)], fallback: String) -> String {
        let entries = pairs.map { "\(literal($0.0)): \(literal($0.1))" }.joined(separator: ", ")
        return "{{ {\(entries)}[value] | default(\(literal(fallback))) }}"
    }

    /// For a float characteristic whose value Home Assistant reads as an integer
    /// (`int("50.0")` fails in Python).
    static let roundedInteger = "{{ value | float | round(0) | int }}"

    /// For a command whose characteristic starts above Home Assistant's smallest value (a
    /// brightness of 10…100 where Home Assistant may send 1).
    static func atLeast(_ bound: Int64) -> String { "{{ [value | int, \(bound)] | max }}" }

    /// A step count from Home Assistant as the value it stands for, and no less than `floor`:
    /// `{{ [value | int * 25 + 0, 0] | max }}` (a count of 0, a percentage of 0, gives `floor`).
    static func scaled(step: Double, offset: Double, floor: Double) -> String {
        "{{ \(scaledExpression(step: step, offset: offset, floor: floor)) }}"
    }

    static func scaledExpression(step: Double, offset: Double, floor: Double) -> String {
        "[value | int * \(number(step)) + \(number(offset)), \(number(floor))] | max"
    }

    /// A value as the step count Home Assistant reads back: `{{ ((value | float - 0) / 25) | round(0) | int }}`.
    static func steps(step: Double, offset: Double) -> String {
        "{{ ((value | float - \(number(offset))) / \(number(step))) | round(0) | int }}"
    }

    /// A service's section of its accessory's `$state`, `{}` where the document has none (before
    /// its first values): a key of it is then undefined, which `default` and `==` take quietly,
    /// where a key of an undefined section would raise, and Home Assistant log an error.
    static func section(_ service: String) -> String { "(value_json[\(literal(service))] | default({}))" }

    /// A key of `section(service)` as a test that it is there (its value, or `''`, is not `''`).
    static func has(_ service: String, _ field: String) -> String {
        "\(section(service))[\(literal(field))] | default('') != ''"
    }

    /// A heater-cooler's mode from its accessory's `$state`: `off` while `active` is 0, else the
    /// target state's mode; `None` (Home Assistant shows no mode) before the power is known.
    static func offOrLookup(service: String, power: String, mode: String, _ pairs: [(String, String)]) -> String {
        let entries = pairs.map { "\(literal($0.0)): \(literal($0.1))" }.joined(separator: ", ")
        let fields = section(service)
        return "{{ ('off' if \(fields)[\(literal(power))] == 0 else {\(entries)}[\(fields)[\(literal(mode))] "
            + "| default('') | string] | default('None')) if \(has(service, power)) else 'None' }}"
    }

    /// A light's colour mode from its accessory's `$state`: `color_temp` or `hs`, and empty (a
    /// message Home Assistant ignores) in a document without it, or without the light (a key of
    /// an undefined value would raise, and Home Assistant would take the whole payload as the mode).
    static func colorMode(service: String, field: String) -> String {
        "{{ {'color-temperature': 'color_temp', 'hue-saturation': 'hs'}"
            + "[(value_json[\(literal(service))] | default({}))[\(literal(field))]] | default('') }}"
    }

    /// Home Assistant's `variable` (0…`top`) as the characteristic takes it: rounded to its step's
    /// decimals (a whole number without a step) and no more than its maximum.
    static func roundedWithin(_ variable: String, _ metadata: CharacteristicMetadata, top: Double) -> String {
        let places = metadata.minStep.map { ValueCodec.decimals($0) } ?? 0
        let rounded = "\(variable) | round(\(places))"
        guard let high = metadata.maxValue, high < top else { return "{{ \(rounded) }}" }
        return "{{ [\(rounded), \(number(high))] | min }}"
    }

    /// Home Assistant's temperature as a characteristic with its own range takes it: the nearest
    /// value it takes. With a step, the nearest point of its grid (`snapped`); without one, the
    /// nearest value within min…max (`{{ [[value | float, 0] | max, 25] | min }}`); nil without bounds.
    static func within(_ metadata: CharacteristicMetadata) -> String? {
        withinExpression(metadata).map { "{{ \($0) }}" }
    }

    /// `within`'s expression, without the braces, to be a part of a larger one.
    static func withinExpression(_ metadata: CharacteristicMetadata) -> String? {
        if let grid = Grid(metadata) { return grid.snapped("value | float") }
        guard let low = metadata.minValue, let high = metadata.maxValue else { return nil }
        return "[[value | float, \(number(low))] | max, \(number(high))] | min\(roundedToStep(metadata))"
    }

    /// The values a characteristic with bounds and a step takes: `low + k × step` for k in
    /// 0…count, as the gateway's `set` checks them (ValueCodec.checkNumber: steps counted from
    /// the minimum, with its float tolerance). A thermostat of 4.5…32 in steps of 1 takes 4.5,
    /// 5.5 … 31.5: its top grid point, not its maximum, is the highest value it takes.
    struct Grid: Equatable {
        var low: Double
        var step: Double
        var count: Int64

        init?(_ metadata: CharacteristicMetadata) {
            guard let low = metadata.minValue, let high = metadata.maxValue, high >= low,
                let step = metadata.minStep, step > 0, step.isFinite
            else { return nil }
            let steps = (high - low) / step
            guard let count = Int64(exactly: (steps + max(1e-6, steps * 1e-9)).rounded(.down)) else { return nil }
            self.init(low: low, step: step, count: count)
        }

        init(low: Double, step: Double, count: Int64) {
            (self.low, self.step, self.count) = (low, step, count)
        }

        /// The highest value of the grid (the maximum, or the last step below it).
        var top: Double { point(count) }

        func point(_ k: Int64) -> Double { ValueCodec.rounded(low + Double(k) * step, step: step, base: low) }

        /// The decimals a grid point is printed with: 4.5 in steps of 1 needs one.
        var places: Int { max(ValueCodec.decimals(step), ValueCodec.decimals(low)) }

        /// A Jinja expression of the grid point nearest `expression` (a number), clamped to the
        /// grid: `((([[(((value | float - 4.5) / 1) | round(0)), 0] | max, 27] | min) * 1 + 4.5) | round(1))`.
        /// Home Assistant's `round(0)` is Python's (half to even) and gives an int, so the count is whole.
        func snapped(_ expression: String) -> String {
            let k = "[[(((\(expression) - \(number(low))) / \(number(step))) | round(0)), 0] | max, \(count)] | min"
            let point = "(\(k)) * \(number(step)) + \(number(low))"
            return places == 0 ? "(\(point))" : "((\(point)) | round(\(places)))"
        }
    }

    /// ` | round(n)` for a float characteristic with a step (n its decimals), else nothing.
    static func roundedToStep(_ metadata: CharacteristicMetadata) -> String {
        guard metadata.format == .float, let step = metadata.minStep, step > 0 else { return "" }
        return " | round(\(ValueCodec.decimals(step)))"
    }

    /// A number as Jinja reads it: integral values without a fraction.
    static func number(_ d: Double) -> String {
        if let i = Int64(exactly: d) { return String(i) }
        return "\(d)"
    }

    static func literal(_ text: String) -> String {
        var out = "'"
        for character in text {
            switch character {
            case "\\": out += "\\\\"
            case "'": out += "\\'"
            default: out.append(character)
            }
        }
        return out + "'"
    }
}

extension Array where Element: Equatable {
    /// Whether `part` occurs in this array as a run of consecutive elements.
    func contains(subsequence part: [Element]) -> Bool {
        guard !part.isEmpty, part.count <= count else { return part.isEmpty }
        return (0...(count - part.count)).contains { Array(self[$0..<$0 + part.count]) == part }
    }
}

extension TopicTree.CharacteristicNode {
    var haStateTopic: String { topic + "/state" }
    var haSetTopic: String { topic + "/set" }
    /// The gateway publishes `state` for what it can read or is told about.
    var haHasState: Bool {
        let permissions = characteristic.metadata.permissions
        return permissions.contains(.read) || permissions.contains(.notify)
    }
    var haIsWritable: Bool { characteristic.metadata.permissions.contains(.write) && !isReadOnlyScope }
    /// The metadata `set` checks against: the accessory's, with the standard type's bounds where
    /// the accessory gives none.
    var haMetadata: CharacteristicMetadata {
        ValueCodec.withStandardBounds(characteristic.metadata, type: characteristic.type)
    }

    /// The values a valid-values characteristic takes, by number with their names: the
    /// accessory's valid values (or the standard type's), within its min and max, so a mode the
    /// accessory narrows away (min = max = 1) is not offered.
    var haAllowedValues: [(value: Int64, name: String)] {
        let metadata = characteristic.metadata
        let standard = Catalog.characteristicType(uuid: characteristic.type)?.metadata.validValues ?? [:]
        let keys = metadata.validValues.isEmpty ? Array(standard.keys) : Array(metadata.validValues.keys)
        let low = metadata.minValue ?? -.infinity, high = metadata.maxValue ?? .infinity
        return keys.sorted().filter { Double($0) >= low && Double($0) <= high }.map { key in
            // A dump names its values by number; the standard type has their names.
            let own = metadata.validValues[key]
            let name = own.flatMap { $0 == String(key) ? nil : $0 } ?? standard[key] ?? own ?? String(key)
            return (key, name)
        }
    }
}

/// Builds the components of one accessory: each service's natural Home Assistant component
/// (light, switch, cover, lock, climate, fan), then an entity for every characteristic the
/// component did not take, by type where Home Assistant has a device class for it, else by
/// format and permissions.
struct HomeAssistantComponents {
    let node: TopicTree.AccessoryNode
    let nodeID: String
    let options: HomeAssistantDiscovery.Options
    private var consumed = Set<UInt64>()
    private var unnamedMain = 0

    init(node: TopicTree.AccessoryNode, nodeID: String, options: HomeAssistantDiscovery.Options) {
        self.node = node
        self.nodeID = nodeID
        self.options = options
    }

    mutating func build() -> [HomeAssistantComponent] {
        var out: [(component: HomeAssistantComponent, service: TopicTree.ServiceNode)] = []
        for service in node.services where !Self.streamServices.contains(service.typeName) {
            for main in mainComponents(service) {
                let name = mainName(service)
                out.append((finish(main, service: service, name: name), service))
            }
            for c in service.characteristics where !consumed.contains(c.characteristic.iid) {
                guard let entity = characteristicComponent(c, service: service) else { continue }
                out.append((entity, service))
            }
        }
        return Self.distinctNames(out, device: node.displayName)
    }

    /// Services a controller uses to set up video and audio streams: their `active` and the
    /// like are for the controller, not for a person, so they give no entity.
    static let streamServices: Set<String> = [
        "camera-rtp-stream-management", "camera-recording-management", "data-stream-transport-management",
        "siri", "siri-endpoint", "target-control-management", "audio-stream-management",
    ]

    /// The bridge's own entity: whether the bridge is reachable. It leaves out the accessory's
    /// availability, or it would turn unavailable exactly when it has something to say.
    func connectivity(gatewayStatusTopic: String) -> HomeAssistantComponent {
        HomeAssistantComponent(
            key: "connectivity",
            config: [
                "platform": "binary_sensor",
                "unique_id": .string("\(nodeID)_connectivity"),
                "name": "Connectivity",
                "device_class": "connectivity",
                "entity_category": "diagnostic",
                "state_topic": .string(node.topic + "/$availability"),
                "payload_on": "online",
                "payload_off": "offline",
                "availability": .array([HomeAssistantDiscovery.availability(gatewayStatusTopic)]),
            ])
    }

    // MARK: - Naming

    // Home Assistant shows an entity as `<device> <entity name>` (`has_entity_name`), and a null
    // name marks the device's main feature. So an entity's name is only what tells it apart from
    // the device and its other entities: a service name that repeats the device's name, or that
    // the entity's own name already says, is left out, and names stay unique within a device.

    /// A service's own name without what the device's name already says, or nil when nothing is left.
    private func serviceLabel(_ service: TopicTree.ServiceNode) -> String? {
        if node.services.count == 1 { return nil }
        let label = Self.withoutPrefix(service.displayName, node.displayName)
        let folded = label.lowercased()
        // Nil too where the device's name already holds it ("Switch" of "iDevices Switch").
        if folded.isEmpty || folded == Self.humanize(service.typeName).lowercased()
            || folded == service.typeName.lowercased()
            || Self.words(node.displayName).contains(subsequence: Self.words(label))
        {
            return nil
        }
        return label
    }

    /// `name` without the words it starts with in common with `prefix`, compared without case
    /// ("Hue dimmer switch button 1" of "Hue dimmer switch" is "Button 1"; "Bedroom temperature"
    /// of "Bedroom climate sensor" is "Temperature").
    static func withoutPrefix(_ name: String, _ prefix: String) -> String {
        let shared = zip(words(name), words(prefix)).prefix { $0 == $1 }.map(\.0)
        guard !shared.isEmpty else { return name }
        var rest = Substring(name)
        for word in shared {
            rest = rest.drop { !$0.isLetter && !$0.isNumber }
            rest = rest.dropFirst(word.count)
        }
        rest = rest.drop { !$0.isLetter && !$0.isNumber }
        guard let first = rest.first else { return "" }
        return first.uppercased() + rest.dropFirst()
    }

    /// Home Assistant shows `<device> <entity name>`; a null name marks the device's main entity.
    private mutating func mainName(_ service: TopicTree.ServiceNode) -> JSONValue {
        if let label = serviceLabel(service) { return .string(label) }
        unnamedMain += 1
        return unnamedMain == 1 ? .null : .string(Self.humanize(service.typeName))
    }

    /// The service's label and the characteristic's name, once where one contains the other
    /// ("Temperature" of a service named "Bedroom temperature" is "Bedroom temperature").
    func entityName(_ base: String, service: TopicTree.ServiceNode) -> String {
        guard let label = serviceLabel(service) else { return base }
        let labelWords = Self.words(label), baseWords = Self.words(base)
        if labelWords.contains(subsequence: baseWords) { return label }
        if baseWords.contains(subsequence: labelWords) { return base }
        return "\(label) \(base)"
    }

    /// Names unique within the device: entities that share a name are told apart by their
    /// service's kind ("Occupancy sensor battery low"), then by number in the device's order.
    static func distinctNames(
        _ list: [(component: HomeAssistantComponent, service: TopicTree.ServiceNode)], device: String
    ) -> [HomeAssistantComponent] {
        func key(_ component: HomeAssistantComponent) -> String {
            component.config["name"]?.stringValue?.lowercased() ?? ""
        }
        var out = list
        // A device named for what it measures ("Bedroom temperature") has that as its main
        // feature: the one entity whose name the device's name ends with goes unnamed, when no
        // other is the main one.
        let deviceWords = words(device)
        let echoes = out.indices.filter { index in
            guard let name = out[index].component.config["name"]?.stringValue else { return false }
            return deviceWords.reversed().starts(with: words(name).reversed())
        }
        if echoes.count == 1, !out.contains(where: { $0.component.config["name"] == .null }) {
            out[echoes[0]].component.config["name"] = .null
        }
        // Home Assistant shows `<device> <entity>`: a name that starts with the words the
        // device's name ends with says them twice ("Garden Valve Valve type" is "Garden Valve Type").
        for index in out.indices {
            guard let name = out[index].component.config["name"]?.stringValue else { continue }
            out[index].component.config["name"] = .string(withoutEcho(of: deviceWords, in: name))
        }
        var counts: [String: Int] = [:]
        for entry in out { counts[key(entry.component), default: 0] += 1 }
        for index in out.indices where counts[key(out[index].component), default: 0] > 1 {
            let kind = humanize(out[index].service.typeName)
            let name = out[index].component.config["name"]?.stringValue
            out[index].component.config["name"] = .string(
                name.map { "\(kind) \($0.prefix(1).lowercased() + $0.dropFirst())" } ?? kind)
        }
        var seen: [String: Int] = [:]
        for index in out.indices {
            let name = key(out[index].component)
            seen[name, default: 0] += 1
            guard seen[name, default: 0] > 1 else { continue }
            let shown = out[index].component.config["name"]?.stringValue ?? ""
            out[index].component.config["name"] = .string("\(shown) \(seen[name, default: 0])")
        }
        return out.map(\.component)
    }

    /// `name` without its first words where they are the last words of the device's name, the
    /// longest such run; a name that is nothing else is kept whole.
    static func withoutEcho(of deviceWords: [String], in name: String) -> String {
        let nameWords = words(name)
        let longest = min(deviceWords.count, nameWords.count - 1)
        guard longest > 0 else { return name }
        for k in stride(from: longest, through: 1, by: -1)
        where Array(deviceWords.suffix(k)) == Array(nameWords.prefix(k)) {
            return withoutPrefix(name, nameWords.prefix(k).joined(separator: " "))
        }
        return name
    }

    private func finish(
        _ main: (key: String, config: [String: JSONValue]), service: TopicTree.ServiceNode, name: JSONValue
    ) -> HomeAssistantComponent {
        var config = main.config
        config["unique_id"] = .string("\(nodeID)_\(service.iid)_\(main.key)")
        config["name"] = name
        return HomeAssistantComponent(key: "\(service.iid)_\(main.key)", config: config)
    }

    // MARK: - Shared by services and characteristics

    func find(_ service: TopicTree.ServiceNode, _ typeName: String) -> TopicTree.CharacteristicNode? {
        service.characteristics.first { $0.typeName == typeName && !consumed.contains($0.characteristic.iid) }
    }

    mutating func take(_ c: TopicTree.CharacteristicNode?) {
        if let c { consumed.insert(c.characteristic.iid) }
    }

    /// On/off payloads as the gateway writes a characteristic's state.
    static func onOff(_ c: TopicTree.CharacteristicNode) -> (on: String, off: String) {
        c.haMetadata.format == .bool ? ("true", "false") : ("1", "0")
    }
}
