import Gateway
import HomeModel

// The entities for the characteristics no service component took: by Home Assistant device
// class where one fits (the known table), else by format and permissions.

extension HomeAssistantComponents {
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

    private static func measure(_ name: String, _ deviceClass: String?, _ unit: String?, diagnostic: Bool = false)
        -> Known
    {
        Known(
            platform: "sensor", name: name, deviceClass: deviceClass, unit: unit, measurement: true,
            diagnostic: diagnostic)
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
            template: HomeAssistantTemplate.lookup(
                [("1", "excellent"), ("2", "good"), ("3", "fair"), ("4", "inferior"), ("5", "poor")], fallback: "None"),
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

    func characteristicComponent(_ c: TopicTree.CharacteristicNode, service: TopicTree.ServiceNode)
        -> HomeAssistantComponent?
    {
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
        } else if let vendor = VendorCatalog.characteristicType(uuid: c.characteristic.type) {
            baseName = vendor.label
            config = Self.vendor(c, vendor)
        } else {
            let standard = Catalog.characteristicType(uuid: c.characteristic.type) != nil
            baseName =
                c.characteristic.name.flatMap { $0.isEmpty ? nil : $0 }
                ?? (standard ? Self.humanize(c.typeName) : Self.humanize(c.slug))
            config = Self.generic(c)
            if service.typeName == "accessory-information" || service.typeName == "protocol-information" {
                config["entity_category"] = "diagnostic"
            }
            // A vendor's own characteristic nobody has named, or one HomeKit hides: there for
            // who wants it, off by default so that the device page stays readable.
            if !standard || metadata.permissions.contains(.hidden) {
                config["enabled_by_default"] = false
                config["entity_category"] = c.haIsWritable ? "config" : "diagnostic"
            }
        }
        if config.isEmpty { return nil }
        if Self.isSetting(c) {
            config["entity_category"] = c.haIsWritable ? "config" : "diagnostic"
        }
        if config["platform"] == "sensor", config["device_class"] != "enum", metadata.format.isNumeric,
            metadata.validValues.isEmpty
        {
            config["suggested_display_precision"] = .int(Int64(Self.displayPrecision(metadata)))
        }
        let key = "\(service.iid)_\(c.characteristic.iid)"
        config["unique_id"] = .string("\(nodeID)_\(key)")
        config["name"] = .string(entityName(baseName, service: service))
        return HomeAssistantComponent(key: key, config: config)
    }

    /// Characteristics that set the device up or describe it rather than being what it does
    /// (its display's unit, a child lock, its key sounds, a button's label, the mode an ecobee
    /// schedule is in): Home Assistant shows them apart from the controls and sensors, under
    /// configuration when settable and diagnostics when read-only, by catalog name.
    static let settings: Set<String> = [
        "temperature-units", "lock-physical-controls", "audio-feedback", "label-index", "label-namespace",
        "ecobee-current-mode",
    ]

    static func isSetting(_ c: TopicTree.CharacteristicNode) -> Bool {
        let name =
            Catalog.characteristicType(uuid: c.characteristic.type)?.name
            ?? VendorCatalog.characteristicType(uuid: c.characteristic.type)?.name
        return settings.contains(name ?? c.typeName)
    }

    /// Value names as a person reads them: the words all of them begin with left out, the
    /// first letter capitalised (`control-lock-disabled`, `control-lock-enabled` are
    /// `Disabled`, `Enabled`; `celsius` is `Celsius`). Names that would then be empty or
    /// alike stay whole.
    static func readable(_ names: [String]) -> [String] {
        let words = names.map { $0.split(separator: "-").map(String.init) }
        var shared = 0
        if names.count > 1, let first = words.first {
            while shared < first.count - 1, words.allSatisfy({ $0.count > shared + 1 && $0[shared] == first[shared] }) {
                shared += 1
            }
        }
        let labels = words.map { humanize($0.dropFirst(shared).joined(separator: "-")) }
        return Set(labels).count == labels.count ? labels : names.map(humanize)
    }

    /// The decimals a reading is shown with: its step's (0.1 → 1), none for an integer, and one
    /// for a float that gives no step (the state itself carries a float32's 7 digits).
    static func displayPrecision(_ metadata: CharacteristicMetadata) -> Int {
        if metadata.format.isInteger { return 0 }
        guard let step = metadata.minStep, step > 0 else { return 1 }
        return ValueCodec.decimals(step)
    }

    /// Home Assistant's device class for a vendor unit, where it has one.
    private static let vendorDeviceClasses: [String: String] = [
        "V": "voltage", "A": "current", "W": "power", "kWh": "energy", "hPa": "atmospheric_pressure",
        "dB": "sound_pressure", "°C": "temperature", "m": "distance", "s": "duration",
    ]

    /// A known vendor characteristic: a reading gets its device class, unit and state class
    /// (energy counters are totals, for the energy dashboard); a setting is a configuration
    /// control with its unit.
    private static func vendor(_ c: TopicTree.CharacteristicNode, _ vendor: VendorCharacteristicType)
        -> [String: JSONValue]
    {
        var config = generic(c)
        guard !config.isEmpty else { return config }
        if let unit = vendor.unit, c.haMetadata.format.isNumeric, c.haMetadata.validValues.isEmpty {
            config["unit_of_measurement"] = .string(unit)
            config["device_class"] = vendorDeviceClasses[unit].map { .string($0) }
        }
        if vendor.reading == .setting {
            // Home Assistant takes `config` for controls only; a setting shown read-only is diagnostic.
            config["entity_category"] = c.haIsWritable ? "config" : "diagnostic"
            config["state_class"] = nil
        } else if config["platform"] == "sensor", vendor.unit != nil {
            config["state_class"] = vendor.reading == .total ? "total_increasing" : "measurement"
        }
        return config
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
        let allowed = metadata.format.isNumeric ? c.haAllowedValues : []
        if !allowed.isEmpty {
            // The values the accessory takes (its valid values, or the standard type's where its
            // `/accessories` lists none), by their names; written and read as numbers, which
            // every accessory takes (a dump's valid values have no names).
            // A setting's values by readable names: its options are what the select shows.
            let names = allowed.map(\.name)
            let pairs = zip(allowed, isSetting(c) ? readable(names) : names).map { (String($0.0.value), $0.1) }
            config["options"] = .array(pairs.map { .string($0.1) })
            if state {
                config["value_template"] = .string(HomeAssistantTemplate.lookup(pairs, fallback: "None"))
            }
            if writable {
                config["platform"] = "select"
                config["command_template"] = .string(
                    HomeAssistantTemplate.lookup(pairs.map { ($0.1, $0.0) }, fallback: ""))
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
                // With a step of its own, the grid's top is the highest value offered (4.5…32 in
                // steps of 1 offers 4.5…31.5), and what Home Assistant sends (any float within
                // min…max from a service call) goes to the nearest grid point. Without a step,
                // whole numbers, or a float at 0.1's decimals. An integer in steps of 1 from a
                // whole minimum needs no template: every whole number Home Assistant sends is on it.
                let grid = HomeAssistantTemplate.Grid(metadata).flatMap { grid in
                    metadata.format.isInteger && grid.step == 1 && grid.low == grid.low.rounded() ? nil : grid
                }
                config["min"] = number(low)
                config["max"] = number(grid?.top ?? high)
                config["step"] = number(step)
                config["mode"] = (high - low) / step > 1000 ? "box" : "auto"
                if let grid {
                    config["command_template"] = .string("{{ \(grid.snapped("value | float")) }}")
                }
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
