import Gateway
import HomeModel

// The climate services' Home Assistant components: a thermostat or a heater-cooler as `climate`,
// a humidifier-dehumidifier as `humidifier`.

extension HomeAssistantComponents {
    static let hvacModes: [Int64: String] = [0: "off", 1: "heat", 2: "cool", 3: "heat_cool"]

    mutating func climate(_ service: TopicTree.ServiceNode) -> [String: JSONValue]? {
        let mode = find(service, "target-heating-cooling")
        let target = find(service, "target-temperature")
        guard mode != nil || target != nil else { return nil }
        var config: [String: JSONValue] = ["platform": "climate", "temperature_unit": "C", "precision": 0.1]
        if let mode {
            take(mode)
            Self.hvacModes(mode, names: Self.hvacModes, into: &config)
        } else {
            // No mode to read or set: Home Assistant would offer its six default modes, none
            // wired. One mode, what the device does by itself: heat, unless it can only cool.
            let current = find(service, "current-heating-cooling")?.haMetadata.validValues ?? [:]
            let only = current[2] != nil && current[1] == nil ? "cool" : "heat"
            config["modes"] = .array([.string(only)])
            // Without a mode state Home Assistant shows `off`; any state of the thermostat says
            // it is in its one mode.
            if let target, target.haHasState {
                config["mode_state_topic"] = .string(target.haStateTopic)
                config["mode_state_template"] = .string(HomeAssistantTemplate.lookup([], fallback: only))
            }
        }
        if let action = find(service, "current-heating-cooling"), action.haHasState {
            take(action)
            config["action_topic"] = .string(action.haStateTopic)
            config["action_template"] = .string(
                HomeAssistantTemplate.lookup(
                    [("0", "idle"), ("1", "heating"), ("2", "cooling")], fallback: "None"))
        }
        if let current = find(service, "current-temperature"), current.haHasState {
            take(current)
            config["current_temperature_topic"] = .string(current.haStateTopic)
        }
        if let target {
            take(target)
            Self.temperature(
                target, into: &config, state: "temperature_state_topic", command: "temperature_command_topic")
            if target.haIsWritable, let clamp = HomeAssistantTemplate.within(target.haMetadata) {
                config["temperature_command_template"] = .string(clamp)
            }
            if let low = target.haMetadata.minValue { config["min_temp"] = .double(low) }
            // The highest value it takes: the top of its grid (31.5 for 4.5…32 in steps of 1).
            if let high = Self.highest(target.haMetadata) { config["max_temp"] = .double(high) }
            if let step = target.haMetadata.minStep, step > 0 { config["temp_step"] = .double(step) }
        }
        thresholds(service, into: &config)
        if let humidity = find(service, "current-relative-humidity"), humidity.haHasState {
            take(humidity)
            config["current_humidity_topic"] = .string(humidity.haStateTopic)
        }
        if let humidity = find(service, "target-relative-humidity"), humidity.haIsWritable {
            take(humidity)
            config["target_humidity_command_topic"] = .string(humidity.haSetTopic)
            if humidity.haHasState { config["target_humidity_state_topic"] = .string(humidity.haStateTopic) }
            if let low = humidity.haMetadata.minValue { config["min_humidity"] = .double(low) }
            if let high = humidity.haMetadata.maxValue { config["max_humidity"] = .double(high) }
        }
        return config
    }

    /// The highest value a characteristic takes: its grid's top, or its maximum without a step.
    static func highest(_ metadata: CharacteristicMetadata) -> Double? {
        HomeAssistantTemplate.Grid(metadata)?.top ?? metadata.maxValue
    }

    /// `min_temp`, `max_temp` and `temp_step` as one threshold's, where it states them.
    static func range(of c: TopicTree.CharacteristicNode, into config: inout [String: JSONValue]) {
        let metadata = c.haMetadata
        if let low = metadata.minValue { config["min_temp"] = .double(low) }
        if let high = highest(metadata) { config["max_temp"] = .double(high) }
        if let step = metadata.minStep, step > 0 { config["temp_step"] = .double(step) }
    }

    static func temperature(
        _ c: TopicTree.CharacteristicNode, into config: inout [String: JSONValue], state: String, command: String
    ) {
        if c.haHasState { config[state] = .string(c.haStateTopic) }
        if c.haIsWritable { config[command] = .string(c.haSetTopic) }
    }

    /// The climate's modes from a mode characteristic: the values the accessory takes (valid
    /// values within min and max) that Home Assistant has a name for, read and written through
    /// lookups both ways; written only where there are two or more to choose from.
    private static func hvacModes(
        _ mode: TopicTree.CharacteristicNode, names: [Int64: String], into config: inout [String: JSONValue]
    ) {
        let pairs = mode.haAllowedValues.compactMap { allowed in
            names[allowed.value].map { (String(allowed.value), $0) }
        }
        config["modes"] = .array(pairs.map { .string($0.1) })
        if mode.haHasState {
            config["mode_state_topic"] = .string(mode.haStateTopic)
            config["mode_state_template"] = .string(HomeAssistantTemplate.lookup(pairs, fallback: "None"))
        }
        // One mode is no choice: without a mode command Home Assistant offers no turn on or
        // off (a thermostat that only heats answered both with an error: it takes no `off`).
        if mode.haIsWritable, pairs.count > 1 {
            config["mode_command_topic"] = .string(mode.haSetTopic)
            config["mode_command_template"] = .string(
                HomeAssistantTemplate.lookup(pairs.map { ($0.1, $0.0) }, fallback: ""))
        }
    }

    /// The heating and cooling thresholds as the low and high targets of a range. Home Assistant
    /// has one `min_temp`…`max_temp` for both, so it spans both thresholds, and each command is
    /// kept within its own threshold's range (the nearest value it takes).
    private mutating func thresholds(_ service: TopicTree.ServiceNode, into config: inout [String: JSONValue]) {
        let heating = find(service, "heating-threshold"), cooling = find(service, "cooling-threshold")
        take(heating)
        take(cooling)
        for (c, side) in [(heating, "low"), (cooling, "high")] {
            guard let c else { continue }
            Self.temperature(
                c, into: &config, state: "temperature_\(side)_state_topic", command: "temperature_\(side)_command_topic"
            )
            if c.haIsWritable, let clamp = HomeAssistantTemplate.within(c.haMetadata) {
                config["temperature_\(side)_command_template"] = .string(clamp)
            }
        }
        let writable = [heating, cooling].compactMap { $0 }.filter(\.haIsWritable).map(\.haMetadata)
        guard config["min_temp"] == nil, !writable.isEmpty else { return }
        if let low = writable.compactMap(\.minValue).min() { config["min_temp"] = .double(low) }
        if let high = writable.compactMap(Self.highest).max() { config["max_temp"] = .double(high) }
        if let step = writable.compactMap(\.minStep).filter({ $0 > 0 }).min() { config["temp_step"] = .double(step) }
    }

    /// A heater-cooler's single target, where the gateway serves the accessory's `$state` and
    /// `$set`: in heating the heating threshold, in cooling the cooling one, each written alone
    /// (the other keeps its value) and held to what it takes; the mode is the entity's own state
    /// (`this.state`, which Home Assistant passes to a command template). In auto (`heat_cool`)
    /// the single target reads `None`, so Home Assistant shows the range, the two thresholds.
    /// Home Assistant has one `min_temp`…`max_temp`, so the slider spans both thresholds.
    private func singleTarget(
        _ service: TopicTree.ServiceNode, mode: TopicTree.CharacteristicNode, into config: inout [String: JSONValue]
    ) {
        guard let heating = service.characteristics.first(where: { $0.typeName == "heating-threshold" }),
            let cooling = service.characteristics.first(where: { $0.typeName == "cooling-threshold" }),
            heating.haIsWritable, cooling.haIsWritable, heating.haHasState, cooling.haHasState
        else { return }
        let fields = HomeAssistantTemplate.section(service.slug)
        func field(_ c: TopicTree.CharacteristicNode) -> String {
            "\(fields)[\(HomeAssistantTemplate.literal(c.slug))]"
        }
        let cool = "this.state == 'cool'"
        func which(_ c: String, _ h: String) -> String { "{{ \(c) if \(cool) else \(h) }}" }
        let key = which(HomeAssistantTemplate.literal(cooling.slug), HomeAssistantTemplate.literal(heating.slug))
        let value = which(
            "(\(HomeAssistantTemplate.withinExpression(cooling.haMetadata) ?? "value"))",
            "(\(HomeAssistantTemplate.withinExpression(heating.haMetadata) ?? "value"))")
        config["temperature_command_topic"] = .string(node.topic + "/$set")
        config["temperature_command_template"] = .string("{\"\(service.slug)\":{\"\(key)\":\(value)}}")
        config["temperature_state_topic"] = .string(node.topic + "/$state")
        switch options.heaterCoolerModes[mode.address] {
        case 1: Self.range(of: heating, into: &config)
        case 2: Self.range(of: cooling, into: &config)
        default: break // auto, or not known yet: both thresholds' ranges, as the range sliders have them
        }
        // The threshold of the mode shown; `None` in auto; empty (ignored) before the document
        // has the mode, or the threshold.
        config["temperature_state_template"] = .string(
            "{{ \(field(cooling)) | default('') if \(field(mode)) == 2 else (\(field(heating)) | default('') if "
                + "\(field(mode)) == 1 else ('None' if \(HomeAssistantTemplate.has(service.slug, mode.slug)) else '')) }}"
        )
    }

    /// HomeKit's heater-cooler: `active` is the power, `target-heater-cooler-state` the mode
    /// (auto keeps the temperature between the two thresholds), the thresholds the targets.
    /// Home Assistant's `off` is `active` 0: where the gateway serves the accessory's `$state` and
    /// `$set`, a mode is written as `active` and the target state together and read from both,
    /// so `off` is a mode like the others and the entity shows off when the device is.
    mutating func heaterCooler(_ service: TopicTree.ServiceNode) -> [String: JSONValue]? {
        guard let power = find(service, "active"), power.haIsWritable else { return nil }
        take(power)
        var config: [String: JSONValue] = [
            "platform": "climate", "temperature_unit": "C", "precision": 0.1,
            "power_command_topic": .string(power.haSetTopic), "payload_on": "1", "payload_off": "0",
        ]
        let names: [Int64: String] = [0: "heat_cool", 1: "heat", 2: "cool"]
        let mode = find(service, "target-heater-cooler-state")
        if let mode {
            take(mode)
            Self.hvacModes(mode, names: names, into: &config)
        } else {
            config["modes"] = ["heat_cool"]
        }
        if options.accessoryTopics, power.haHasState, let mode, mode.haIsWritable, mode.haHasState {
            let pairs = mode.haAllowedValues.compactMap { allowed in names[allowed.value].map { (allowed.value, $0) } }
            let slug = service.slug
            config["modes"] = .array([.string("off")] + pairs.map { .string($0.1) })
            config["mode_command_topic"] = .string(node.topic + "/$set")
            config["mode_command_template"] = .string(
                HomeAssistantTemplate.lookup(
                    [("off", Self.setDocument(slug, [(power.slug, "0")]))]
                        + pairs.map { ($0.1, Self.setDocument(slug, [(power.slug, "1"), (mode.slug, String($0.0))])) },
                    fallback: ""))
            config["mode_state_topic"] = .string(node.topic + "/$state")
            config["mode_state_template"] = .string(
                HomeAssistantTemplate.offOrLookup(
                    service: slug, power: power.slug, mode: mode.slug, pairs.map { (String($0.0), $0.1) }))
        }
        if options.accessoryTopics, let mode, mode.haHasState { singleTarget(service, mode: mode, into: &config) }
        if let action = find(service, "current-heater-cooler-state"), action.haHasState {
            take(action)
            config["action_topic"] = .string(action.haStateTopic)
            config["action_template"] = .string(
                HomeAssistantTemplate.lookup(
                    [("0", "off"), ("1", "idle"), ("2", "heating"), ("3", "cooling")], fallback: "None"))
        }
        if let current = find(service, "current-temperature"), current.haHasState {
            take(current)
            config["current_temperature_topic"] = .string(current.haStateTopic)
        }
        thresholds(service, into: &config)
        return config
    }

    /// A `$set` document for one service: `{"<service>":{"<characteristic>":<value>,…}}`.
    static func setDocument(_ service: String, _ values: [(String, String)]) -> String {
        let fields = values.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",")
        return "{\"\(service)\":{\(fields)}}"
    }

    /// HomeKit's humidifier-dehumidifier: `active` is the power, the mode says which of the two
    /// it does, and the threshold of what it does is the target.
    mutating func humidifier(_ service: TopicTree.ServiceNode) -> [String: JSONValue]? {
        let mode = find(service, "target-humidifier-dehumidifier-state")
        let modes = mode?.haAllowedValues ?? []
        let dehumidifierOnly = !modes.isEmpty && modes.allSatisfy { $0.value == 2 }
        let thresholds =
            dehumidifierOnly
            ? ["dehumidifier-threshold", "humidifier-threshold"] : ["humidifier-threshold", "dehumidifier-threshold"]
        // Home Assistant's humidifier needs a power and a target; without them the
        // characteristics stand alone.
        guard let power = find(service, "active"), power.haIsWritable,
            let target = thresholds.compactMap({ find(service, $0) }).first(where: \.haIsWritable)
        else { return nil }
        take(power)
        take(target)
        var config: [String: JSONValue] = [
            "platform": "humidifier", "command_topic": .string(power.haSetTopic),
            "payload_on": "1", "payload_off": "0", "device_class": dehumidifierOnly ? "dehumidifier" : "humidifier",
            "target_humidity_command_topic": .string(target.haSetTopic),
            "min_humidity": Self.int(target.haMetadata.minValue, 0),
            "max_humidity": Self.int(target.haMetadata.maxValue, 100),
        ]
        if power.haHasState { config["state_topic"] = .string(power.haStateTopic) }
        if target.haHasState { config["target_humidity_state_topic"] = .string(target.haStateTopic) }
        Self.integerish(target, into: &config, key: "target_humidity_state_template")
        // Home Assistant takes modes only with a command topic for them; only the modes the
        // accessory takes (a humidifier-only one narrows its modes to 1…1) are offered.
        let allowed = mode?.haAllowedValues ?? []
        if let mode, allowed.count > 1, mode.haIsWritable {
            take(mode)
            let pairs = allowed.map { (String($0.value), $0.name) }
            config["modes"] = .array(pairs.map { .string($0.1) })
            config["mode_command_topic"] = .string(mode.haSetTopic)
            config["mode_command_template"] = .string(
                HomeAssistantTemplate.lookup(pairs.map { ($0.1, $0.0) }, fallback: ""))
            if mode.haHasState {
                config["mode_state_topic"] = .string(mode.haStateTopic)
                config["mode_state_template"] = .string(HomeAssistantTemplate.lookup(pairs, fallback: "None"))
            }
        } else if let mode, allowed.count <= 1 {
            // One mode is no choice: the characteristic is the device's, not a person's.
            take(mode)
        }
        if let current = find(service, "current-relative-humidity"), current.haHasState {
            take(current)
            config["current_humidity_topic"] = .string(current.haStateTopic)
        }
        if let action = find(service, "current-humidifier-dehumidifier-state"), action.haHasState {
            take(action)
            config["action_topic"] = .string(action.haStateTopic)
            config["action_template"] = .string(
                HomeAssistantTemplate.lookup(
                    [("0", "off"), ("1", "idle"), ("2", "humidifying"), ("3", "drying")], fallback: "None"))
        }
        return config
    }
}
