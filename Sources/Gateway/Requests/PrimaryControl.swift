import HomeModel

/// Which characteristic `$toggle` flips for each service type, as HomeKit's
/// `primaryControlCharacteristicType` does: the one control a person means by "turn it on/off".
enum PrimaryControl {
    /// Service type name → candidate characteristic type names, first present wins.
    static let table: [String: [String]] = [
        "lightbulb": ["power-state"],
        "switch": ["power-state"],
        "outlet": ["power-state"],
        "fan": ["power-state", "active"],
        "ventilation-fan": ["active", "power-state"],
        "air-purifier": ["active"],
        "heater-cooler": ["active"],
        "humidifier-dehumidifier": ["active"],
        "valve": ["active"],
        "faucet": ["active"],
        "irrigation-system": ["active"],
        "television": ["active"],
        "garage-door-opener": ["target-door-state"],
        "lock-mechanism": ["lock-target-state", "target-lock-mechanism-state"],
        "window-covering": ["target-position"],
        "door": ["target-position"],
        "window": ["target-position"],
        "thermostat": ["target-heating-cooling-state"],
        "security-system": ["security-system-target-state", "target-security-system-state"],
        "slat": ["target-tilt-angle"],
    ]

    /// The table by type UUID, resolved once through the catalog (names and their aliases).
    static let byUUID: [String: [String]] = {
        var out: [String: [String]] = [:]
        for (serviceName, names) in table {
            guard let service = Catalog.serviceType(named: serviceName) else { continue }
            out[service.uuid] = names.compactMap { Catalog.characteristicType(named: $0)?.uuid }
        }
        return out
    }()

    static let positionTypes: Set<String> = Set(
        ["target-position", "target-tilt-angle"].compactMap { Catalog.characteristicType(named: $0)?.uuid })
    static let thermostatMode = Catalog.characteristicType(named: "target-heating-cooling-state")?.uuid
    static let securityTarget = Catalog.characteristicType(named: "security-system-target-state")?.uuid

    static func characteristic(in service: TopicTree.ServiceNode) -> TopicTree.CharacteristicNode? {
        guard let candidates = byUUID[service.service.type] else { return nil }
        for uuid in candidates {
            if let node = service.characteristics.first(where: { $0.characteristic.type == uuid }),
                node.characteristic.metadata.permissions.contains(.write)
            {
                return node
            }
        }
        return nil
    }

    /// The value that flips `current`. `reference` is what the accessory reports as its
    /// actual state where that differs from the target (a door that is still opening).
    static func flipped(_ node: TopicTree.CharacteristicNode, current: CharacteristicValue?) -> CharacteristicValue? {
        let metadata = node.characteristic.metadata
        let type = node.characteristic.type
        switch type {
        case _ where positionTypes.contains(type):
            let low = metadata.minValue ?? 0
            let high = metadata.maxValue ?? 100
            let now = current?.doubleValue ?? low
            let next = now > (low + high) / 2 ? low : high
            return metadata.format == .int
                ? .int(Int64(next)) : (metadata.format == .float ? .float(next) : .uint(UInt64(max(0, next))))
        case thermostatMode:
            // Off ↔ auto: the one setting that turns a thermostat on without choosing a side.
            let now = current?.doubleValue ?? 0
            return .uint(now == 0 ? 3 : 0)
        case securityTarget:
            let now = current?.doubleValue ?? 3
            return .uint(now == 3 ? 0 : 3)
        default:
            if metadata.format == .bool { return .bool(!(current?.boolValue ?? false)) }
            let now = current?.doubleValue ?? 0
            return .uint(now == 0 ? 1 : 0)
        }
    }
}
