import HomeModel
import Yams

// A service's `behaviour` key: the device behaviour's settings for its type, or a drift or
// script of the characteristic it drives.

extension AccessoryBuilder {
    // MARK: Behaviours

    func behaviourKinds(_ map: FileReader, service: AccessoryService, typeName: String) throws(SimulatorError)
        -> [BehaviourKind]
    {
        guard let node = map.node("behaviour") else { return [] }
        if let word = node.scalar?.string {
            guard word == "none" else {
                throw map.error("behaviour", .invalidValue, "expected 'none' or a mapping such as { travel-time: 12 }")
            }
            return [.none]
        }
        let b = try map.reader(for: node, path: map.keyPath("behaviour"))
        var allowed = ["drift", "script", "repeat", "characteristic", "none"]
        var kinds: [BehaviourKind] = []
        switch service.type {
        case HAPType.garageDoorOpener:
            allowed.append("travel-time")
            try b.allowOnly(allowed)
            if let travel = try b.nonNegative("travel-time") { kinds.append(.garageDoor(travelTime: travel)) }
        case HAPType.lockMechanism:
            allowed.append("delay")
            try b.allowOnly(allowed)
            if let delay = try b.nonNegative("delay") { kinds.append(.lock(delay: delay)) }
        case HAPType.windowCovering, HAPType.door, HAPType.window:
            allowed.append("travel-time")
            try b.allowOnly(allowed)
            if let travel = try b.nonNegative("travel-time") { kinds.append(.position(travelTime: travel)) }
        case let type where ServiceBehaviour.settleRule(forServiceType: type) != nil:
            allowed.append("delay")
            try b.allowOnly(allowed)
            if let delay = try b.nonNegative("delay"), let rule = ServiceBehaviour.settleRule(forServiceType: type) {
                kinds.append(.settle(rule, delay: delay))
            }
        case HAPType.thermostat:
            allowed += ["step", "every"]
            try b.allowOnly(allowed)
            if b.has("step") || b.has("every") {
                kinds.append(
                    .thermostat(
                        step: try b.positive("step") ?? ServiceBehaviour.defaultThermostatStep,
                        every: try b.positive("every") ?? ServiceBehaviour.defaultThermostatInterval))
            }
        default:
            do throws(SimulatorError) {
                try b.allowOnly(allowed)
            } catch {
                throw SimulatorError(
                    file: error.file, key: error.key, code: error.code,
                    message: error.message
                        + " (travel-time, delay, step and every belong to garage-door-opener, lock-mechanism, thermostat, window-covering, door, window, security-system, valve and the like; this is \(typeName))"
                )
            }
        }
        if try b.bool("none") == true {
            if !kinds.isEmpty {
                throw b.error("none", .invalidValue, "'none' cannot be combined with other behaviour settings")
            }
            kinds.append(.none)
        }
        guard b.has("drift") || b.has("script") else {
            if b.has("repeat") || b.has("characteristic") {
                throw b.error(
                    b.has("repeat") ? "repeat" : "characteristic", .invalidValue, "only used with drift or script")
            }
            return kinds
        }
        if b.has("drift") && b.has("script") {
            throw b.error("script", .invalidValue, "a service drifts or follows a script, not both")
        }
        let target = try drivenCharacteristic(b, service: service)
        if let drift = try b.reader("drift") {
            try drift.allowOnly(["step", "every", "min", "max"])
            guard target.metadata.format.isNumeric || target.metadata.format == .bool else {
                throw drift.error(
                    nil, .invalidValue,
                    "drift needs a number or bool characteristic; \(Catalog.characteristicName(uuid: target.type) ?? target.type) is \(target.metadata.format.rawValue)"
                )
            }
            let lo = try drift.double("min"), hi = try drift.double("max")
            if let lo, let hi, lo > hi { throw drift.error("min", .outOfRange, "min \(lo) is above max \(hi)") }
            kinds.append(
                .drift(
                    characteristic: target.type, step: try drift.positive("step") ?? 0.1,
                    every: try drift.positive("every") ?? 30, min: lo, max: hi))
        } else if let items = try b.list("script") {
            var steps: [ScriptStep] = []
            for (path, node) in items {
                let step = try FileReader(node, path: path, failure: SimulatorError.reading(file))
                try step.allowOnly(["after", "value"])
                guard let after = try step.nonNegative("after") else {
                    throw step.error("after", .missingKey, "'after' (seconds) is required")
                }
                guard let valueNode = step.node("value") else {
                    throw step.error("value", .missingKey, "'value' is required")
                }
                let label = Catalog.characteristicName(uuid: target.type) ?? target.name ?? target.type
                steps.append(
                    ScriptStep(
                        after: after,
                        value: try parseValue(
                            valueNode, key: step.keyPath("value"), label: label, metadata: target.metadata)))
            }
            guard !steps.isEmpty else { throw b.error("script", .missingKey, "a script needs at least one step") }
            let repeats = try b.bool("repeat") ?? false
            if repeats, steps.reduce(0, { $0 + $1.after }) <= 0 {
                throw b.error("repeat", .outOfRange, "a repeating script needs some time between its steps")
            }
            kinds.append(.script(characteristic: target.type, steps: steps, repeats: repeats))
        } else {
            throw b.error("script", .invalidValue, "expected a list of { after, value } steps")
        }
        return kinds
    }

    /// The characteristic a drift or script drives: named, or the service's first required
    /// characteristic a controller cannot write (the sensor reading).
    func drivenCharacteristic(_ b: FileReader, service: AccessoryService) throws(SimulatorError) -> Characteristic {
        if let key = try b.string("characteristic") {
            let uuid =
                Catalog.characteristicType(named: key)?.uuid
                ?? (Self.looksLikeUUID(key) ? StandardUUID.longForm(key) : nil)
            guard let uuid, let c = service.characteristic(type: uuid) else {
                throw b.error("characteristic", .unknownType, "the service has no characteristic '\(key)'")
            }
            return c
        }
        let required = Catalog.serviceType(uuid: service.type)?.requiredCharacteristics ?? []
        let readings = service.characteristics.filter {
            !$0.metadata.permissions.contains(.write) && $0.metadata.permissions.contains(.read)
                && $0.type != StandardUUID.name
        }
        if let c = readings.first(where: { required.contains($0.type) }) ?? readings.first { return c }
        throw b.error(nil, .missingKey, "say which characteristic to drive with 'characteristic:'")
    }
}
