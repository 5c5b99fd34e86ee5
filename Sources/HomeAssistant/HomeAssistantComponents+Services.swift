import Gateway
import HomeModel

// The services' own Home Assistant components: which component each service becomes, and the
// light, switch, garage door and position covers, lock and fan, each taking the characteristics
// it covers.

extension HomeAssistantComponents {
    // MARK: - Services

    mutating func mainComponents(_ service: TopicTree.ServiceNode) -> [(key: String, config: [String: JSONValue])] {
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
        case "heater-cooler":
            if let c = heaterCooler(service) { out.append(("climate", c)) }
        case "humidifier-dehumidifier":
            if let c = humidifier(service) { out.append(("humidifier", c)) }
        case "fan", "ventilation-fan", "air-purifier":
            if let c = fan(service) { out.append(("fan", c)) }
        case "security-system":
            if let c = alarmPanel(service) { out.append(("alarm_control_panel", c)) }
        case "stateless-programmable-switch", "doorbell":
            if let c = event(service) { out.append(("event", c)) }
        case "valve", "faucet", "irrigation-system":
            if let c = valve(service) { out.append(("valve", c)) }
        default:
            break
        }
        return out
    }

    static func integerish(
        _ c: TopicTree.CharacteristicNode, into config: inout [String: JSONValue], key: String
    ) {
        if c.haMetadata.format == .float { config[key] = .string(HomeAssistantTemplate.roundedInteger) }
    }

    static func int(_ value: Double?, _ fallback: Int64) -> JSONValue {
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
            if let template = Self.brightnessTemplate(brightness.haMetadata) {
                config["brightness_command_template"] = .string(template)
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
        // Home Assistant sends a colour as hue and saturation together: through the accessory's
        // `$set`, each rounded to its characteristic's step and kept within its maximum.
        if options.accessoryTopics, let hue = find(service, "hue"), let saturation = find(service, "saturation"),
            hue.haIsWritable, saturation.haIsWritable, hue.haHasState, saturation.haHasState
        {
            take(hue)
            take(saturation)
            let fields = HomeAssistantTemplate.section(service.slug)
            config["hs_command_topic"] = .string(node.topic + "/$set")
            config["hs_command_template"] = .string(
                HomeAssistantComponents.setDocument(
                    service.slug,
                    [
                        (hue.slug, HomeAssistantTemplate.roundedWithin("hue", hue.haMetadata, top: 360)),
                        (saturation.slug, HomeAssistantTemplate.roundedWithin("sat", saturation.haMetadata, top: 100)),
                    ]))
            config["hs_state_topic"] = .string(node.topic + "/$state")
            // `hue,saturation`; empty (a message Home Assistant ignores) until the document has both.
            let (h, s) = (HomeAssistantTemplate.literal(hue.slug), HomeAssistantTemplate.literal(saturation.slug))
            config["hs_value_template"] = .string(
                "{{ ((\(fields)[\(h)] ~ ',' ~ \(fields)[\(s)]) if \(HomeAssistantTemplate.has(service.slug, saturation.slug))"
                    + " else '') if \(HomeAssistantTemplate.has(service.slug, hue.slug)) else '' }}")
            // Both read and both change with `$state`, so neither tells the mode (Home Assistant
            // would show the one whose message came last): the gateway's `$color-mode` does.
            if config["color_temp_state_topic"] != nil {
                config["color_mode_state_topic"] = .string(node.topic + "/$state")
                config["color_mode_value_template"] = .string(
                    HomeAssistantTemplate.colorMode(service: service.slug, field: "$color-mode"))
            }
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

    static let doorStates: [(String, String)] = [
        ("0", "open"), ("1", "closed"), ("2", "opening"), ("3", "closing"), ("4", "stopped"),
    ]

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
            config["value_template"] = .string(
                HomeAssistantTemplate.lookup(Array(Self.doorStates.prefix(2)), fallback: "None"))
        }
        if let target, target.haIsWritable {
            config["command_topic"] = .string(target.haSetTopic)
            // By number (0 open, 1 closed), which every accessory takes; a dump's valid values
            // have no names.
            config["payload_open"] = "0"
            config["payload_close"] = "1"
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
            // By number (1 secured, 0 unsecured), which every accessory takes.
            "payload_lock": "1",
            "payload_unlock": "0",
        ]
        if let current = find(service, "current-lock-mechanism-state"), current.haHasState {
            take(current)
            config["state_topic"] = .string(current.haStateTopic)
            // 3 is HomeKit's "unknown".
            config["value_template"] = .string(
                HomeAssistantTemplate.lookup(
                    [("0", "UNLOCKED"), ("1", "LOCKED"), ("2", "JAMMED")], fallback: "None"))
        } else if target.haHasState {
            config["state_topic"] = .string(target.haStateTopic)
            config["value_template"] = .string(
                HomeAssistantTemplate.lookup([("0", "UNLOCKED"), ("1", "LOCKED")], fallback: "None"))
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
        var config: [String: JSONValue] = [
            "platform": "cover", "device_class": .string(deviceClass), "payload_stop": .null,
        ]
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
            config["value_template"] = .string(
                HomeAssistantTemplate.lookup(
                    [("0", "closing"), ("1", "opening"), ("2", "stopped")], fallback: "None"))
        }
        let tilts = [
            ("target-horizontal-tilt", "current-horizontal-tilt"), ("target-vertical-tilt", "current-vertical-tilt"),
            ("target-tilt", "current-tilt"),
        ]
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
            let scale = Self.speed(speed, into: &config)
            // Home Assistant sets a speed without switching the fan on, and expects a speed
            // above 0 to mean on: where the accessory's `$set` is served, the power goes with
            // the speed (on above 0). Its 0 (`set_percentage 0`) is off alone: the speed is
            // kept, so that `turn_on` (the power only) brings the fan back at the speed it had.
            if options.accessoryTopics {
                let speedExpression = HomeAssistantTemplate.scaledExpression(
                    step: scale.step, offset: scale.offset, floor: scale.floor)
                // `{"fan":{"active":1,"rotation-speed":50}}`, or `{"fan":{"active":0}}` for 0.
                let above = "value | int > 0"
                let powerField = "\"\(power.slug)\":{{ '\(on)' if \(above) else '\(off)' }}"
                let speedField =
                    "{{ ',\"\(speed.slug)\":' if \(above) else '' }}{{ \(speedExpression) if \(above) else '' }}"
                config["percentage_command_topic"] = .string(node.topic + "/$set")
                config["percentage_command_template"] = .string(
                    "{\"\(service.slug)\":{\(powerField)\(speedField)}}")
            }
        }
        if let direction = find(service, "rotation-direction"), direction.haIsWritable {
            take(direction)
            config["direction_command_topic"] = .string(direction.haSetTopic)
            config["direction_command_template"] = .string(
                HomeAssistantTemplate.lookup(
                    [("forward", "0"), ("reverse", "1")], fallback: ""))
            if direction.haHasState {
                config["direction_state_topic"] = .string(direction.haStateTopic)
                config["direction_value_template"] = .string(
                    HomeAssistantTemplate.lookup(
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

    /// What Home Assistant's brightness (1…scale; off goes to `command_topic`) becomes: the
    /// nearest value of a grid in steps above 1 (a Hunter fan light in steps of 10 takes 10, 20 …
    /// 100, where Home Assistant sends 1, 33, 75), never less than the lowest value above 0 the
    /// light takes, since a brightness is sent to light it; else no less than the minimum.
    static func brightnessTemplate(_ metadata: CharacteristicMetadata) -> String? {
        if let grid = HomeAssistantTemplate.Grid(metadata), grid.step != 1 || grid.low != grid.low.rounded() {
            guard let lowest = (0...grid.count).lazy.map(grid.point).first(where: { $0 > 0 }) else { return nil }
            return "{{ [\(grid.snapped("value | int")), \(HomeAssistantTemplate.number(lowest))] | max }}"
        }
        guard let low = metadata.minValue.flatMap({ Int64(exactly: $0.rounded(.up)) }), low > 0 else { return nil }
        return HomeAssistantTemplate.atLeast(low)
    }

    /// The fan's speed as Home Assistant's `speed_range`, whose steps are exactly the speeds the
    /// fan takes: Home Assistant sends a whole number of the range (0 is off, so it starts at 1)
    /// and offers percentages in steps of 100 / (its size). A speed step of 1 is the range
    /// itself (1…100); a larger one (25) is counted in steps (1…4, sent as 25, 50, 75, 100).
    @discardableResult
    static func speed(_ speed: TopicTree.CharacteristicNode, into config: inout [String: JSONValue]) -> (
        step: Double, offset: Double, floor: Double
    ) {
        let metadata = speed.haMetadata
        let low = metadata.minValue ?? 0, high = metadata.maxValue ?? 100
        config["percentage_command_topic"] = .string(speed.haSetTopic)
        let step = metadata.minStep.flatMap { $0 > 0 ? $0 : nil } ?? 1
        let floor = max(0, low)
        if step <= 1, low.rounded() == low {
            config["speed_range_min"] = Self.int(max(1, low), 1)
            config["speed_range_max"] = Self.int(high, 100)
            if low > 0, let bound = Int64(exactly: low) {
                config["percentage_command_template"] = .string(HomeAssistantTemplate.atLeast(bound))
            }
            if speed.haHasState {
                config["percentage_state_topic"] = .string(speed.haStateTopic)
                Self.integerish(speed, into: &config, key: "percentage_value_template")
            }
            return (1, 0, floor)
        }
        // Step k of the range is the speed `offset + k × step`, the first above 0 being step 1.
        let first = low > 0 ? low : step
        let offset = first - step
        let count = Int64(exactly: ((high - first) / step + 1e-9).rounded(.down)).map { max(1, $0 + 1) } ?? 1
        config["speed_range_min"] = 1
        config["speed_range_max"] = .int(count)
        config["percentage_command_template"] = .string(
            HomeAssistantTemplate.scaled(step: step, offset: offset, floor: floor))
        if speed.haHasState {
            config["percentage_state_topic"] = .string(speed.haStateTopic)
            config["percentage_value_template"] = .string(HomeAssistantTemplate.steps(step: step, offset: offset))
        }
        return (step, offset, floor)
    }
}
