import HomeModel

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

extension TopicTree.CharacteristicNode {
    var haStateTopic: String { topic + "/state" }
    var haSetTopic: String { topic + "/set" }
    /// The gateway publishes `state` for what it can read or is told about.
    var haHasState: Bool {
        let permissions = characteristic.metadata.permissions
        return permissions.contains(.read) || permissions.contains(.notify)
    }
    var haIsWritable: Bool { characteristic.metadata.permissions.contains(.write) && !isReadOnlyScope }
    var haMetadata: CharacteristicMetadata { characteristic.metadata }
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
        var out: [HomeAssistantComponent] = []
        for service in node.services {
            for main in mainComponents(service) {
                let name = mainName(service)
                out.append(finish(main, service: service, name: name))
            }
            for c in service.characteristics where !consumed.contains(c.characteristic.iid) {
                guard let entity = characteristicComponent(c, service: service) else { continue }
                out.append(entity)
            }
        }
        return out
    }

    /// The bridge's own entity: whether the bridge is reachable. It leaves out the accessory's
    /// availability, or it would turn unavailable exactly when it has something to say.
    func connectivity(gatewayStatusTopic: String) -> HomeAssistantComponent {
        HomeAssistantComponent(key: "connectivity", config: [
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

    /// A service's own name, or nil when the accessory's name says it all.
    private func serviceLabel(_ service: TopicTree.ServiceNode) -> String? {
        let name = service.displayName
        if node.services.count == 1 || name == node.displayName || name == service.typeName { return nil }
        return name
    }

    /// Home Assistant shows `<device> <entity name>`; a null name marks the device's main entity.
    private mutating func mainName(_ service: TopicTree.ServiceNode) -> JSONValue {
        if let label = serviceLabel(service) { return .string(label) }
        unnamedMain += 1
        return unnamedMain == 1 ? .null : .string(Self.humanize(service.typeName))
    }

    private func entityName(_ base: String, service: TopicTree.ServiceNode) -> String {
        guard let label = serviceLabel(service) else { return base }
        return "\(label) \(base)"
    }

    static func humanize(_ kebab: String) -> String {
        let words = kebab.split(separator: "-").joined(separator: " ")
        guard let first = words.first else { return kebab }
        return first.uppercased() + words.dropFirst()
    }

    private func finish(_ main: (key: String, config: [String: JSONValue]), service: TopicTree.ServiceNode, name: JSONValue) -> HomeAssistantComponent {
        var config = main.config
        config["unique_id"] = .string("\(nodeID)_\(service.iid)_\(main.key)")
        config["name"] = name
        return HomeAssistantComponent(key: "\(service.iid)_\(main.key)", config: config)
    }

    // MARK: - Services

    private mutating func mainComponents(_ service: TopicTree.ServiceNode) -> [(key: String, config: [String: JSONValue])] {
        var out: [(key: String, config: [String: JSONValue])] = []
        switch service.typeName {
        case "lightbulb":
            if let c = light(service) { out.append(("light", c)) }
        case "switch", "outlet":
            if let c = switchComponent(service) { out.append(("switch", c)) }
        case "garage-door-opener":
            if let c = garageDoor(service) { out.append(("cover", c)) }
            if let c = lock(service) { out.append(("lock", c)) }
        case "lock-mechanism":
            if let c = lock(service) { out.append(("lock", c)) }
        case "window-covering", "door", "window":
            if let c = positionCover(service) { out.append(("cover", c)) }
        case "thermostat":
            if let c = climate(service) { out.append(("climate", c)) }
        case "fan", "ventilation-fan", "air-purifier":
            if let c = fan(service) { out.append(("fan", c)) }
        default:
            break
        }
        return out
    }

    private func find(_ service: TopicTree.ServiceNode, _ typeName: String) -> TopicTree.CharacteristicNode? {
        service.characteristics.first { $0.typeName == typeName && !consumed.contains($0.characteristic.iid) }
    }

    private mutating func take(_ c: TopicTree.CharacteristicNode?) {
        if let c { consumed.insert(c.characteristic.iid) }
    }

    /// On/off payloads as the gateway writes a characteristic's state.
    private static func onOff(_ c: TopicTree.CharacteristicNode) -> (on: String, off: String) {
        c.haMetadata.format == .bool ? ("true", "false") : ("1", "0")
    }

    private static func integerish(_ c: TopicTree.CharacteristicNode, into config: inout [String: JSONValue], key: String) {
        if c.haMetadata.format == .float { config[key] = .string(HomeAssistantTemplate.roundedInteger) }
    }

    private static func int(_ value: Double?, _ fallback: Int64) -> JSONValue {
        .int(value.flatMap { Int64(exactly: $0.rounded()) } ?? fallback)
    }

    private mutating func light(_ service: TopicTree.ServiceNode) -> [String: JSONValue]? {
        guard let power = find(service, "power-state"), power.haIsWritable else { return nil }
        take(power)
        var config: [String: JSONValue] = [
            "platform": "light",
            "command_topic": .string(power.haSetTopic),
            "payload_on": "true",
            "payload_off": "false",
        ]
        if power.haHasState { config["state_topic"] = .string(power.haStateTopic) }
        if let brightness = find(service, "brightness"), brightness.haIsWritable {
            take(brightness)
            config["brightness_command_topic"] = .string(brightness.haSetTopic)
            config["brightness_scale"] = Self.int(brightness.haMetadata.maxValue, 100)
            if let low = brightness.haMetadata.minValue.flatMap({ Int64(exactly: $0.rounded(.up)) }), low > 0 {
                config["brightness_command_template"] = .string(HomeAssistantTemplate.atLeast(low))
            }
            if brightness.haHasState {
                config["brightness_state_topic"] = .string(brightness.haStateTopic)
                Self.integerish(brightness, into: &config, key: "brightness_value_template")
            }
        }
        // HomeKit and Home Assistant both count colour temperature in mireds.
        if let temperature = find(service, "color-temperature"), temperature.haIsWritable {
            take(temperature)
            config["color_temp_command_topic"] = .string(temperature.haSetTopic)
            config["min_mireds"] = Self.int(temperature.haMetadata.minValue, 140)
            config["max_mireds"] = Self.int(temperature.haMetadata.maxValue, 500)
            if temperature.haHasState {
                config["color_temp_state_topic"] = .string(temperature.haStateTopic)
                Self.integerish(temperature, into: &config, key: "color_temp_value_template")
            }
        }
        if options.colorTopics, let hue = find(service, "hue"), let saturation = find(service, "saturation"),
           hue.haIsWritable, saturation.haIsWritable {
            take(hue)
            take(saturation)
            config["hs_command_topic"] = .string(service.topic + "/$color/set")
            config["hs_state_topic"] = .string(service.topic + "/$color/state")
        }
        return config
    }

    private mutating func switchComponent(_ service: TopicTree.ServiceNode) -> [String: JSONValue]? {
        guard let power = find(service, "power-state"), power.haIsWritable else { return nil }
        take(power)
        let (on, off) = Self.onOff(power)
        var config: [String: JSONValue] = [
            "platform": "switch",
            "device_class": .string(service.typeName == "outlet" ? "outlet" : "switch"),
            "command_topic": .string(power.haSetTopic),
            "payload_on": .string(on),
            "payload_off": .string(off),
        ]
        if power.haHasState { config["state_topic"] = .string(power.haStateTopic) }
        return config
    }

    static let doorStates: [(String, String)] = [("0", "open"), ("1", "closed"), ("2", "opening"), ("3", "closing"), ("4", "stopped")]

    private mutating func garageDoor(_ service: TopicTree.ServiceNode) -> [String: JSONValue]? {
        let current = find(service, "current-door-state").flatMap { $0.haHasState ? $0 : nil }
        let target = find(service, "target-door-state")
        guard current != nil || target != nil else { return nil }
        take(current)
        take(target)
        var config: [String: JSONValue] = [
            "platform": "cover",
            "device_class": "garage",
            // HomeKit's garage door has no stop command.
            "payload_stop": .null,
        ]
        if let current {
            config["state_topic"] = .string(current.haStateTopic)
            config["value_template"] = .string(HomeAssistantTemplate.lookup(Self.doorStates, fallback: "None"))
        } else if let target, target.haHasState {
            config["state_topic"] = .string(target.haStateTopic)
            config["value_template"] = .string(HomeAssistantTemplate.lookup(Array(Self.doorStates.prefix(2)), fallback: "None"))
        }
        if let target, target.haIsWritable {
            config["command_topic"] = .string(target.haSetTopic)
            config["payload_open"] = "open"
            config["payload_close"] = "closed"
        } else {
            config["payload_open"] = .null
            config["payload_close"] = .null
        }
        return config
    }

    private mutating func lock(_ service: TopicTree.ServiceNode) -> [String: JSONValue]? {
        guard let target = find(service, "target-lock-mechanism-state"), target.haIsWritable else { return nil }
        take(target)
        var config: [String: JSONValue] = [
            "platform": "lock",
            "command_topic": .string(target.haSetTopic),
            "payload_lock": "secured",
            "payload_unlock": "unsecured",
        ]
        if let current = find(service, "current-lock-mechanism-state"), current.haHasState {
            take(current)
            config["state_topic"] = .string(current.haStateTopic)
            // 3 is HomeKit's "unknown".
            config["value_template"] = .string(HomeAssistantTemplate.lookup(
                [("0", "UNLOCKED"), ("1", "LOCKED"), ("2", "JAMMED")], fallback: "None"))
        } else if target.haHasState {
            config["state_topic"] = .string(target.haStateTopic)
            config["value_template"] = .string(HomeAssistantTemplate.lookup([("0", "UNLOCKED"), ("1", "LOCKED")], fallback: "None"))
        }
        return config
    }

    private mutating func positionCover(_ service: TopicTree.ServiceNode) -> [String: JSONValue]? {
        let target = find(service, "target-position")
        let current = find(service, "current-position").flatMap { $0.haHasState ? $0 : nil }
        guard target != nil || current != nil else { return nil }
        take(target)
        take(current)
        let deviceClass = ["door": "door", "window": "window"][service.typeName] ?? "shade"
        var config: [String: JSONValue] = ["platform": "cover", "device_class": .string(deviceClass), "payload_stop": .null]
        let range = target?.haMetadata ?? current?.haMetadata
        let closed = Self.int(range?.minValue, 0)
        let open = Self.int(range?.maxValue, 100)
        if let target, target.haIsWritable {
            config["command_topic"] = .string(target.haSetTopic)
            config["set_position_topic"] = .string(target.haSetTopic)
            config["payload_open"] = .string(open.int64Value.map(String.init) ?? "100")
            config["payload_close"] = .string(closed.int64Value.map(String.init) ?? "0")
        } else {
            config["payload_open"] = .null
            config["payload_close"] = .null
        }
        if let current {
            config["position_topic"] = .string(current.haStateTopic)
            config["position_open"] = open
            config["position_closed"] = closed
            Self.integerish(current, into: &config, key: "position_template")
        }
        if let motion = find(service, "position-state"), motion.haHasState {
            take(motion)
            config["state_topic"] = .string(motion.haStateTopic)
            config["value_template"] = .string(HomeAssistantTemplate.lookup(
                [("0", "closing"), ("1", "opening"), ("2", "stopped")], fallback: "None"))
        }
        let tilts = [("target-horizontal-tilt", "current-horizontal-tilt"), ("target-vertical-tilt", "current-vertical-tilt"), ("target-tilt", "current-tilt")]
        for (targetName, currentName) in tilts {
            guard let tilt = find(service, targetName), tilt.haIsWritable else { continue }
            take(tilt)
            let low = Self.int(tilt.haMetadata.minValue, -90)
            let high = Self.int(tilt.haMetadata.maxValue, 90)
            config["tilt_command_topic"] = .string(tilt.haSetTopic)
            config["tilt_min"] = low
            config["tilt_max"] = high
            config["tilt_closed_value"] = low
            config["tilt_opened_value"] = high
            if let status = find(service, currentName), status.haHasState {
                take(status)
                config["tilt_status_topic"] = .string(status.haStateTopic)
                Self.integerish(status, into: &config, key: "tilt_status_template")
            }
            break
        }
        return config
    }

    /// HomeKit's target heating/cooling state ↔ Home Assistant's HVAC modes. HomeKit's "auto"
    /// keeps the temperature between two thresholds, which is Home Assistant's `heat_cool`.
    static let hvacModes: [Int64: String] = [0: "off", 1: "heat", 2: "cool", 3: "heat_cool"]

    private mutating func climate(_ service: TopicTree.ServiceNode) -> [String: JSONValue]? {
        let mode = find(service, "target-heating-cooling")
        let target = find(service, "target-temperature")
        guard mode != nil || target != nil else { return nil }
        var config: [String: JSONValue] = ["platform": "climate", "temperature_unit": "C", "precision": 0.1]
        if let mode {
            take(mode)
            let valid = mode.haMetadata.validValues.isEmpty ? Self.hvacModes : mode.haMetadata.validValues
            let pairs = valid.keys.sorted().compactMap { key in Self.hvacModes[key].map { (String(key), $0) } }
            config["modes"] = .array(pairs.map { .string($0.1) })
            if mode.haHasState {
                config["mode_state_topic"] = .string(mode.haStateTopic)
                config["mode_state_template"] = .string(HomeAssistantTemplate.lookup(pairs, fallback: "None"))
            }
            if mode.haIsWritable {
                config["mode_command_topic"] = .string(mode.haSetTopic)
                config["mode_command_template"] = .string(HomeAssistantTemplate.lookup(pairs.map { ($0.1, $0.0) }, fallback: ""))
            }
        }
        if let action = find(service, "current-heating-cooling"), action.haHasState {
            take(action)
            config["action_topic"] = .string(action.haStateTopic)
            config["action_template"] = .string(HomeAssistantTemplate.lookup(
                [("0", "idle"), ("1", "heating"), ("2", "cooling")], fallback: "None"))
        }
        if let current = find(service, "current-temperature"), current.haHasState {
            take(current)
            config["current_temperature_topic"] = .string(current.haStateTopic)
        }
        if let target {
            take(target)
            Self.temperature(target, into: &config, state: "temperature_state_topic", command: "temperature_command_topic")
            if let low = target.haMetadata.minValue { config["min_temp"] = .double(low) }
            if let high = target.haMetadata.maxValue { config["max_temp"] = .double(high) }
            if let step = target.haMetadata.minStep, step > 0 { config["temp_step"] = .double(step) }
        }
        if let heating = find(service, "heating-threshold") {
            take(heating)
            Self.temperature(heating, into: &config, state: "temperature_low_state_topic", command: "temperature_low_command_topic")
        }
        if let cooling = find(service, "cooling-threshold") {
            take(cooling)
            Self.temperature(cooling, into: &config, state: "temperature_high_state_topic", command: "temperature_high_command_topic")
        }
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

    private static func temperature(_ c: TopicTree.CharacteristicNode, into config: inout [String: JSONValue], state: String, command: String) {
        if c.haHasState { config[state] = .string(c.haStateTopic) }
        if c.haIsWritable { config[command] = .string(c.haSetTopic) }
    }

    private mutating func fan(_ service: TopicTree.ServiceNode) -> [String: JSONValue]? {
        let order = service.typeName == "fan" ? ["power-state", "active"] : ["active", "power-state"]
        var found: TopicTree.CharacteristicNode?
        for name in order where found == nil { found = find(service, name) }
        guard let power = found, power.haIsWritable else { return nil }
        take(power)
        let (on, off) = Self.onOff(power)
        var config: [String: JSONValue] = [
            "platform": "fan",
            "command_topic": .string(power.haSetTopic),
            "payload_on": .string(on),
            "payload_off": .string(off),
        ]
        if power.haHasState { config["state_topic"] = .string(power.haStateTopic) }
        if let speed = find(service, "rotation-speed"), speed.haIsWritable {
            take(speed)
            config["percentage_command_topic"] = .string(speed.haSetTopic)
            // Home Assistant sends whole numbers in this range; 0 is "off", so the range starts at 1.
            let low = max(1, speed.haMetadata.minValue.flatMap { Int64(exactly: $0.rounded(.up)) } ?? 1)
            config["speed_range_min"] = .int(low)
            config["speed_range_max"] = Self.int(speed.haMetadata.maxValue, 100)
            if speed.haHasState {
                config["percentage_state_topic"] = .string(speed.haStateTopic)
                Self.integerish(speed, into: &config, key: "percentage_value_template")
            }
        }
        if let direction = find(service, "rotation-direction"), direction.haIsWritable {
            take(direction)
            config["direction_command_topic"] = .string(direction.haSetTopic)
            config["direction_command_template"] = .string(HomeAssistantTemplate.lookup(
                [("forward", "0"), ("reverse", "1")], fallback: ""))
            if direction.haHasState {
                config["direction_state_topic"] = .string(direction.haStateTopic)
                config["direction_value_template"] = .string(HomeAssistantTemplate.lookup(
                    [("0", "forward"), ("1", "reverse")], fallback: "None"))
            }
        }
        if let swing = find(service, "swing-mode"), swing.haIsWritable {
            take(swing)
            let (swingOn, swingOff) = Self.onOff(swing)
            config["oscillation_command_topic"] = .string(swing.haSetTopic)
            config["payload_oscillation_on"] = .string(swingOn)
            config["payload_oscillation_off"] = .string(swingOff)
            if swing.haHasState { config["oscillation_state_topic"] = .string(swing.haStateTopic) }
        }
        return config
    }

    // MARK: - Characteristics

    private struct Known {
        var platform: String
        var name: String
        var deviceClass: String?
        var unit: String?
        var measurement = false
        var diagnostic = false
        /// binary_sensor: the payloads, `true`/`false` or `1`/`0` by format, unless a template maps.
        var template: String?
        var options: [String]?
    }

    private static func binary(_ name: String, _ deviceClass: String?, diagnostic: Bool = false) -> Known {
        Known(platform: "binary_sensor", name: name, deviceClass: deviceClass, diagnostic: diagnostic)
    }

    private static func measure(_ name: String, _ deviceClass: String?, _ unit: String?, diagnostic: Bool = false) -> Known {
        Known(platform: "sensor", name: name, deviceClass: deviceClass, unit: unit, measurement: true, diagnostic: diagnostic)
    }

    static let microgramsPerCubicMeter = "µg/m³"

    /// Read-only characteristics with a Home Assistant device class, by catalog name.
    private static let known: [String: Known] = [
        "current-temperature": measure("Temperature", "temperature", "°C"),
        "current-relative-humidity": measure("Humidity", "humidity", "%"),
        "current-light-level": measure("Light level", "illuminance", "lx"),
        "carbon-dioxide-level": measure("Carbon dioxide", "carbon_dioxide", "ppm"),
        "carbon-dioxide-peak-level": measure("Carbon dioxide peak", "carbon_dioxide", "ppm"),
        "carbon-monoxide-level": measure("Carbon monoxide", "carbon_monoxide", "ppm"),
        "carbon-monoxide-peak-level": measure("Carbon monoxide peak", "carbon_monoxide", "ppm"),
        "pm2-5-density": measure("PM2.5", "pm25", microgramsPerCubicMeter),
        "pm10-density": measure("PM10", "pm10", microgramsPerCubicMeter),
        "ozone-density": measure("Ozone", "ozone", microgramsPerCubicMeter),
        "nitrogen-dioxide-density": measure("Nitrogen dioxide", "nitrogen_dioxide", microgramsPerCubicMeter),
        "sulphur-dioxide-density": measure("Sulphur dioxide", "sulphur_dioxide", microgramsPerCubicMeter),
        "volatile-organic-compound-density": measure("VOCs", "volatile_organic_compounds", microgramsPerCubicMeter),
        "battery-level": measure("Battery", "battery", "%", diagnostic: true),
        "filter-life-level": measure("Filter life", nil, "%"),
        "water-level": measure("Water level", nil, "%"),
        "air-quality": Known(
            platform: "sensor", name: "Air quality", deviceClass: "enum",
            template: HomeAssistantTemplate.lookup([("1", "excellent"), ("2", "good"), ("3", "fair"), ("4", "inferior"), ("5", "poor")], fallback: "None"),
            options: ["excellent", "good", "fair", "inferior", "poor"]),
        // HomeKit: 0 contact detected (closed), 1 not detected (open); Home Assistant: on means open.
        "contact-state": binary("Contact", "opening"),
        "motion-detected": binary("Motion", "motion"),
        "occupancy-detected": binary("Occupancy", "occupancy"),
        "leak-detected": binary("Leak", "moisture"),
        "smoke-detected": binary("Smoke", "smoke"),
        "carbon-monoxide-detected": binary("Carbon monoxide", "carbon_monoxide"),
        "carbon-dioxide-detected": binary("Carbon dioxide abnormal", "problem"),
        "obstruction-detected": binary("Obstruction", "problem"),
        "outlet-in-use": binary("In use", "power"),
        "filter-change-indication": binary("Filter change", "problem"),
        "status-low-battery": binary("Battery low", "battery", diagnostic: true),
        "status-fault": binary("Fault", "problem", diagnostic: true),
        "status-tampered": binary("Tampered", "tamper", diagnostic: true),
        "status-jammed": binary("Jammed", "problem", diagnostic: true),
        "status-active": binary("Active", "running", diagnostic: true),
        "charging-state": Known(
            platform: "binary_sensor", name: "Charging", deviceClass: "battery_charging", diagnostic: true,
            template: HomeAssistantTemplate.lookup([("0", "OFF"), ("1", "ON"), ("2", "OFF")], fallback: "None")),
    ]

    /// Units we can pass on, and the device class they imply.
    private static let units: [String: (unit: String, deviceClass: String?)] = [
        "celsius": ("°C", "temperature"),
        "percentage": ("%", nil),
        "arcdegrees": ("°", nil),
        "lux": ("lx", "illuminance"),
        "seconds": ("s", "duration"),
    ]

    private func characteristicComponent(_ c: TopicTree.CharacteristicNode, service: TopicTree.ServiceNode) -> HomeAssistantComponent? {
        let metadata = c.haMetadata
        // The name is the entity's name already; tlv8 and data mean nothing to a person.
        if c.typeName == "name" || metadata.format == .tlv8 || metadata.format == .data { return nil }
        guard c.haHasState || c.haIsWritable else { return nil }
        var config: [String: JSONValue]
        let baseName: String
        if !c.haIsWritable, let known = Self.known[c.typeName] {
            baseName = known.name
            config = ["platform": .string(known.platform), "state_topic": .string(c.haStateTopic)]
            if let deviceClass = known.deviceClass { config["device_class"] = .string(deviceClass) }
            if let unit = known.unit { config["unit_of_measurement"] = .string(unit) }
            if known.measurement { config["state_class"] = "measurement" }
            if known.diagnostic { config["entity_category"] = "diagnostic" }
            if let options = known.options { config["options"] = .array(options.map(JSONValue.string)) }
            if let template = known.template {
                config["value_template"] = .string(template)
            } else if known.platform == "binary_sensor" {
                let (on, off) = Self.onOff(c)
                config["payload_on"] = .string(on)
                config["payload_off"] = .string(off)
            }
        } else {
            baseName = c.characteristic.name.flatMap { $0.isEmpty ? nil : $0 }
                ?? (Catalog.characteristicType(uuid: c.characteristic.type) != nil ? Self.humanize(c.typeName) : Self.humanize(c.slug))
            config = Self.generic(c)
            if service.typeName == "accessory-information" || service.typeName == "protocol-information" {
                config["entity_category"] = "diagnostic"
            }
        }
        if config.isEmpty { return nil }
        let key = "\(service.iid)_\(c.characteristic.iid)"
        config["unique_id"] = .string("\(nodeID)_\(key)")
        config["name"] = .string(entityName(baseName, service: service))
        return HomeAssistantComponent(key: key, config: config)
    }

    /// A number for a config: integral values as integers.
    private static func number(_ d: Double) -> JSONValue {
        if let i = Int64(exactly: d) { return .int(i) }
        return .double(d)
    }

    /// By format and permissions: bool → switch, binary_sensor or (write-only) button; valid
    /// values → select or enum sensor; other numbers → number or sensor; strings → text or sensor.
    private static func generic(_ c: TopicTree.CharacteristicNode) -> [String: JSONValue] {
        let metadata = c.haMetadata
        let writable = c.haIsWritable
        let state = c.haHasState
        var config: [String: JSONValue] = [:]
        if state { config["state_topic"] = .string(c.haStateTopic) }
        if writable { config["command_topic"] = .string(c.haSetTopic) }
        if metadata.format == .bool {
            switch (writable, state) {
            case (true, true):
                config["platform"] = "switch"
                config["payload_on"] = "true"
                config["payload_off"] = "false"
            case (true, false):
                config["platform"] = "button"
                config["payload_press"] = "true"
                if c.typeName == "identify" { config["device_class"] = "identify" }
            default:
                config["platform"] = "binary_sensor"
                config["payload_on"] = "true"
                config["payload_off"] = "false"
            }
            return config
        }
        if metadata.format.isNumeric, !metadata.validValues.isEmpty {
            let pairs = metadata.validValues.sorted { $0.key < $1.key }
            config["options"] = .array(pairs.map { .string($0.value) })
            if state {
                config["value_template"] = .string(HomeAssistantTemplate.lookup(pairs.map { (String($0.key), $0.value) }, fallback: "None"))
            }
            if writable {
                // Home Assistant sends the option's name, which `set` takes as it is.
                config["platform"] = "select"
            } else {
                config["platform"] = "sensor"
                config["device_class"] = "enum"
            }
            return config
        }
        if metadata.format.isNumeric {
            let unit = metadata.unit.flatMap { units[$0] }
            if let unit {
                config["unit_of_measurement"] = .string(unit.unit)
                if let deviceClass = unit.deviceClass { config["device_class"] = .string(deviceClass) }
            }
            if writable {
                config["platform"] = "number"
                let bounds = metadata.format.integerBounds
                let low = metadata.minValue ?? bounds?.lowerBound ?? -1_000_000
                let high = metadata.maxValue ?? bounds.map { min($0.upperBound, 4_294_967_295) } ?? 1_000_000
                let step = metadata.minStep.flatMap { $0 > 0 ? $0 : nil } ?? (metadata.format.isInteger ? 1 : 0.1)
                config["min"] = number(low)
                config["max"] = number(high)
                config["step"] = number(step)
                config["mode"] = (high - low) / step > 1000 ? "box" : "auto"
            } else {
                config["platform"] = "sensor"
                if unit != nil { config["state_class"] = "measurement" }
            }
            return config
        }
        // Strings.
        if writable {
            config["platform"] = "text"
            config["max"] = .int(Int64(min(255, metadata.maxLength ?? ValueCodec.defaultMaxLength)))
        } else {
            config["platform"] = "sensor"
        }
        return config
    }
}
