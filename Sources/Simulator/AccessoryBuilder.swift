import Foundation
import HomeModel
import Yams

/// Builds accessories from one YAML file (schema at the top of AccessoryFileLoader.swift).
struct AccessoryBuilder {
    let file: String
    let stem: String
    var behaviours: [ServiceBehaviour] = []

    init(file: String, stem: String) {
        self.file = file
        self.stem = stem
    }

    static let accessoryKeys = ["name", "manufacturer", "model", "serial", "firmware", "hardware", "category", "room", "reachable", "services"]
    static let serviceKeys = ["type", "name", "primary", "hidden", "behaviour", "characteristics", "custom"]
    static let overrideKeys = ["value", "min", "max", "step", "unit", "valid-values", "max-length", "permissions"]
    static let customKeys = ["uuid", "name", "format", "unit", "min", "max", "step", "valid-values", "max-length", "permissions", "value"]

    mutating func buildFile(_ root: FileReader) throws(SimulatorError) -> AccessoryFileLoader.FileContents {
        try root.allowOnly(Self.accessoryKeys + ["bridged"])
        let bridgeID = "sim:\(stem)"
        let bridgedItems = try root.list("bridged") ?? []
        var accessories = [try buildAccessory(root, id: bridgeID, aid: 1, isBridge: !bridgedItems.isEmpty)]
        var names = [(accessories[0].name, root.keyPath("name"))]
        for (index, item) in bridgedItems.enumerated() {
            let map = try FileReader(item.node, path: item.path, failure: SimulatorError.reading(file))
            try map.allowOnly(Self.accessoryKeys)
            let aid = UInt64(index + 2)
            var accessory = try buildAccessory(map, id: "\(bridgeID):\(aid)", aid: aid, isBridge: false)
            accessory.bridgeID = bridgeID
            names.append((accessory.name, map.keyPath("name")))
            accessories.append(accessory)
        }
        return AccessoryFileLoader.FileContents(config: SimulatorConfiguration(accessories: accessories, behaviours: behaviours), authoredNames: names)
    }

    mutating func buildAccessory(_ map: FileReader, id: String, aid: UInt64, isBridge: Bool) throws(SimulatorError) -> Accessory {
        let name = try map.requiredString("name")
        let serialDefault = aid == 1 ? "SIM-\(stem)" : "SIM-\(stem)-\(aid)"
        var iid: UInt64 = 0
        func nextIID() -> UInt64 { iid += 1; return iid }

        // Accessory information first, as HAP numbers it: service 1, characteristics 2….
        let infoIID = nextIID()
        var info: [Characteristic] = []
        let infoValues: [(String, String?)] = [
            ("14", nil),
            ("20", try map.string("manufacturer") ?? "Simulated"),
            ("21", try map.string("model") ?? "Simulated"),
            ("23", name),
            ("30", try map.string("serial") ?? serialDefault),
            ("52", try map.string("firmware") ?? "1.0.0"),
        ] + (try map.string("hardware").map { [("53", $0)] } ?? [])
        let infoKeys = ["14": "", "20": "manufacturer", "21": "model", "23": "name", "30": "serial", "52": "firmware", "53": "hardware"]
        for (short, text) in infoValues {
            guard let type = Catalog.characteristicType(uuid: short) else { continue }
            var value: CharacteristicValue?
            if let text {
                do {
                    value = try ValueCodec.validate(.string(text), metadata: type.metadata, label: type.name)
                } catch {
                    throw map.error(infoKeys[short], error.code, error.message)
                }
            }
            info.append(Characteristic(iid: nextIID(), type: type.uuid, value: value, metadata: type.metadata))
        }
        var services = [AccessoryService(iid: infoIID, type: StandardUUID.accessoryInformation, characteristics: info)]

        var serviceNames: [String: String] = [:]
        for item in try map.list("services") ?? [] {
            let serviceMap = try FileReader(item.node, path: item.path, failure: SimulatorError.reading(file))
            let service = try buildService(serviceMap, accessoryName: name, accessoryID: id, nextIID: nextIID)
            if let serviceName = service.name {
                if let other = serviceNames[serviceName.lowercased()] {
                    throw serviceMap.error("name", .duplicateName, "'\(serviceName)' is already the name of \(other)")
                }
                serviceNames[serviceName.lowercased()] = item.path
            }
            services.append(service)
        }
        if services.count == 1 && !isBridge {
            throw map.error("services", .missingKey, "an accessory needs at least one service (accessory-information is added automatically)")
        }

        let category: Int
        if let text = try map.string("category") {
            guard let number = Catalog.category(named: text) else {
                throw map.error("category", .unknownType, "unknown category '\(text)'; use a name such as \(["lightbulb", "garage-door-opener", "sensor", "bridge"].joined(separator: ", ")) or a number 1–33")
            }
            category = number
        } else {
            category = isBridge ? (Catalog.category(named: "bridge") ?? 2) : inferredCategory(services)
        }
        return Accessory(
            id: id, aid: aid, name: name,
            manufacturer: try map.string("manufacturer") ?? "Simulated",
            model: try map.string("model") ?? "Simulated",
            serialNumber: try map.string("serial") ?? serialDefault,
            firmwareRevision: try map.string("firmware") ?? "1.0.0",
            category: category,
            isReachable: try map.bool("reachable") ?? true,
            services: services,
            suggestedRoom: try map.string("room")
        )
    }

    mutating func buildService(_ map: FileReader, accessoryName: String, accessoryID: String, nextIID: () -> UInt64) throws(SimulatorError) -> AccessoryService {
        try map.allowOnly(Self.serviceKeys)
        let typeText = try map.requiredString("type")
        let standard = Catalog.serviceType(named: typeText) ?? (Self.looksLikeUUID(typeText) ? Catalog.serviceType(uuid: typeText) : nil)
        let serviceUUID: String
        if let standard {
            serviceUUID = standard.uuid
        } else if Self.isFullUUID(typeText) {
            serviceUUID = typeText.uppercased()
        } else {
            throw map.error("type", .unknownType, "unknown service type '\(typeText)'; use a catalog name (lightbulb, garage-door-opener, temperature-sensor, …), a HAP name or a UUID")
        }
        if serviceUUID == StandardUUID.accessoryInformation {
            throw map.error("type", .invalidValue, "accessory-information is added automatically; set name, manufacturer, model, serial and firmware at the top of the accessory")
        }
        let serviceName = try map.string("name")
        let typeName = standard?.name ?? serviceUUID
        let serviceIID = nextIID()

        // Standard characteristics the file mentions, in file order.
        var given: [(type: CharacteristicType, key: String, node: Node)] = []
        if let chars = try map.reader("characteristics") {
            for (key, node) in chars.entries {
                let type = Catalog.characteristicType(named: key) ?? (Self.looksLikeUUID(key) ? Catalog.characteristicType(uuid: key) : nil)
                guard let type else {
                    throw chars.error(key, .unknownType, "unknown characteristic '\(key)'; use a catalog name (power-state, brightness, target-door-state, …), a HAP name or UUID, or declare it under 'custom'")
                }
                if type.uuid == StandardUUID.name, serviceName != nil {
                    throw chars.error(key, .duplicateUUID, "the service's Name comes from its 'name' key")
                }
                if let earlier = given.first(where: { $0.type.uuid == type.uuid }) {
                    throw chars.error(key, .duplicateUUID, "\(type.name) is already given as '\(earlier.key)'")
                }
                given.append((type, chars.keyPath(key), node))
            }
        }

        // Order: required (catalog order), the service Name, then the rest in file order.
        var order: [(type: CharacteristicType, key: String?, node: Node?)] = []
        let required = standard?.requiredCharacteristics ?? []
        for uuid in required {
            guard let type = Catalog.characteristicType(uuid: uuid) else { continue }
            let hit = given.first { $0.type.uuid == uuid }
            order.append((type, hit?.key, hit?.node))
        }
        let allowsName = standard.map { $0.requiredCharacteristics.contains(StandardUUID.name) || $0.optionalCharacteristics.contains(StandardUUID.name) } ?? true
        if let serviceName, allowsName, !required.contains(StandardUUID.name), let nameType = Catalog.characteristicType(uuid: StandardUUID.name) {
            order.append((nameType, nil, .scalar(.init(serviceName))))
        }
        for item in given where !required.contains(item.type.uuid) {
            order.append((item.type, item.key, item.node))
        }

        var characteristics: [Characteristic] = []
        characteristics.reserveCapacity(order.count)
        for entry in order {
            var metadata = entry.type.metadata
            var value: CharacteristicValue?
            if let key = entry.key, let node = entry.node {
                (metadata, value) = try characteristicValue(node, key: key, type: entry.type, metadata: metadata)
            } else if let node = entry.node, let text = node.scalar?.string {
                value = try? ValueCodec.parse(text: text, metadata: metadata, label: entry.type.name)
            }
            if value == nil {
                value = Self.defaultValue(for: metadata, type: entry.type.uuid, name: serviceName ?? accessoryName)
            }
            characteristics.append(Characteristic(iid: nextIID(), type: entry.type.uuid, value: value, metadata: metadata))
        }

        for item in try map.list("custom") ?? [] {
            let custom = try FileReader(item.node, path: item.path, failure: SimulatorError.reading(file))
            let c = try customCharacteristic(custom, iid: nextIID())
            if characteristics.contains(where: { $0.type == c.type }) {
                throw custom.error("uuid", .duplicateUUID, "\(c.type) appears twice in this service")
            }
            characteristics.append(c)
        }

        let service = AccessoryService(
            iid: serviceIID, type: serviceUUID, name: serviceName,
            isPrimary: try map.bool("primary") ?? false,
            isHidden: try map.bool("hidden") ?? false,
            characteristics: characteristics
        )
        for kind in try behaviourKinds(map, service: service, typeName: typeName) {
            behaviours.append(ServiceBehaviour(accessoryID: accessoryID, serviceIID: serviceIID, kind: kind))
        }
        return service
    }

    /// A value (`brightness: 80`) or the override form (`brightness: { value: 80, min: 10 }`).
    func characteristicValue(_ node: Node, key: String, type: CharacteristicType, metadata base: CharacteristicMetadata) throws(SimulatorError) -> (CharacteristicMetadata, CharacteristicValue?) {
        var metadata = base
        var valueNode: Node? = node
        if node.mapping != nil {
            let map = try FileReader(node, path: key, failure: SimulatorError.reading(file))
            try map.allowOnly(Self.overrideKeys)
            metadata = try applyOverrides(map, to: metadata, custom: false)
            valueNode = map.node("value")
        } else if node.sequence != nil {
            throw SimulatorError(file: file, key: key, code: .invalidValue, message: "expected a value or { value: …, min: …, … }, got a list")
        } else if node.null != nil, node.scalar?.style == .plain || node.scalar?.style == .any {
            valueNode = nil
        }
        guard let valueNode else { return (metadata, nil) }
        let valueKey = node.mapping != nil ? "\(key).value" : key
        return (metadata, try parseValue(valueNode, key: valueKey, label: type.name, metadata: metadata))
    }

    func parseValue(_ node: Node, key: String, label: String, metadata: CharacteristicMetadata) throws(SimulatorError) -> CharacteristicValue {
        guard let text = node.scalar?.string else {
            throw SimulatorError(file: file, key: key, code: .invalidValue, message: "expected a single value, got \(node.strictKindName)")
        }
        do {
            return try ValueCodec.parse(text: text, metadata: metadata, label: label)
        } catch {
            throw SimulatorError(file: file, key: key, code: error.code, message: error.message)
        }
    }

    func applyOverrides(_ map: FileReader, to base: CharacteristicMetadata, custom: Bool) throws(SimulatorError) -> CharacteristicMetadata {
        var metadata = base
        if let unit = try map.string("unit") { metadata.unit = unit }
        if let min = try map.double("min") { metadata.minValue = min }
        if let max = try map.double("max") { metadata.maxValue = max }
        if let step = try map.positive("step") { metadata.minStep = step }
        if let length = try map.int("max-length") {
            guard length > 0 else { throw map.error("max-length", .outOfRange, "must be greater than 0") }
            metadata.maxLength = length
        }
        if let names = try map.strings("permissions") {
            do {
                metadata.permissions = try CharacteristicPermissions(parsing: names)
            } catch {
                throw map.error("permissions", error.code, error.message)
            }
        }
        if let lo = metadata.minValue, let hi = metadata.maxValue, lo > hi {
            throw map.error(map.has("min") ? "min" : "max", .outOfRange, "min \(lo) is above max \(hi)")
        }
        if metadata.format.isNumeric, let bounds = metadata.format.integerBounds ?? (metadata.format == .float ? -Double.greatestFiniteMagnitude...Double.greatestFiniteMagnitude : nil) {
            for (key, limit) in [("min", metadata.minValue), ("max", metadata.maxValue)] {
                if let limit, !bounds.contains(limit) {
                    throw map.error(key, .outOfRange, "\(limit) does not fit the format \(metadata.format.rawValue)")
                }
            }
        } else if map.has("min") || map.has("max") || map.has("step") {
            throw map.error(map.has("min") ? "min" : map.has("max") ? "max" : "step", .invalidValue, "min, max and step apply to numbers only, this is \(metadata.format.rawValue)")
        }
        if map.has("valid-values") {
            guard metadata.format.isInteger else {
                throw map.error("valid-values", .invalidValue, "valid values apply to integer formats only, this is \(metadata.format.rawValue)")
            }
            metadata.validValues = try validValues(map, base: base.validValues, custom: custom)
        }
        return metadata
    }

    /// Standard characteristics: a list narrowing the catalog's values (names or numbers).
    /// Custom ones: a mapping `{ 0: slow, 1: fast }` or a list of numbers.
    func validValues(_ map: FileReader, base: [Int64: String], custom: Bool) throws(SimulatorError) -> [Int64: String] {
        guard let node = map.node("valid-values") else { return base }
        var result: [Int64: String] = [:]
        if node.mapping != nil {
            guard custom else {
                throw map.error("valid-values", .invalidValue, "a standard characteristic's valid values are narrowed with a list, e.g. [open, closed]")
            }
            let values = try map.reader(for: node, path: map.keyPath("valid-values"))
            for (key, nameNode) in values.entries {
                guard let number = Int64(key) else { throw values.error(key, .invalidValue, "expected an integer, got '\(key)'") }
                guard let name = nameNode.scalar?.string, !name.isEmpty else { throw values.error(key, .invalidValue, "expected a name") }
                result[number] = name
            }
            return result
        }
        for (path, item) in try map.list("valid-values") ?? [] {
            guard let text = item.scalar?.string else {
                throw SimulatorError(file: file, key: path, code: .invalidValue, message: "expected a value")
            }
            if let number = Int64(text) {
                if !base.isEmpty && base[number] == nil {
                    throw SimulatorError(file: file, key: path, code: .notAValidValue, message: "\(number) is not one of the type's values (\(base.keys.sorted().map(String.init).joined(separator: ", ")))")
                }
                result[number] = base[number] ?? String(number)
            } else if let hit = base.first(where: { $0.value == text.lowercased() }) {
                result[hit.key] = hit.value
            } else {
                throw SimulatorError(file: file, key: path, code: .notAValidValue, message: "'\(text)' is not one of \(base.sorted { $0.key < $1.key }.map(\.value).joined(separator: ", "))")
            }
        }
        return result
    }

    func customCharacteristic(_ map: FileReader, iid: UInt64) throws(SimulatorError) -> Characteristic {
        try map.allowOnly(Self.customKeys)
        let uuid = try map.requiredString("uuid")
        guard Self.isFullUUID(uuid) else {
            throw map.error("uuid", .invalidValue, "a custom characteristic needs a full UUID like 7E536242-341C-4862-BE90-272CE15BD633, got '\(uuid)'")
        }
        if let standard = Catalog.characteristicType(uuid: uuid) {
            throw map.error("uuid", .duplicateUUID, "\(uuid) is the standard \(standard.name); list it under 'characteristics'")
        }
        let name = try map.requiredString("name")
        let formatText = try map.requiredString("format")
        guard let format = CharacteristicFormat(rawValue: formatText.lowercased()) else {
            throw map.error("format", .unknownType, "unknown format '\(formatText)'; one of \(CharacteristicFormat.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        var metadata = CharacteristicMetadata(format: format, permissions: [.read, .notify])
        metadata = try applyOverrides(map, to: metadata, custom: true)
        var value: CharacteristicValue?
        if let node = map.node("value") {
            value = try parseValue(node, key: map.keyPath("value"), label: name, metadata: metadata)
        }
        if value == nil, metadata.permissions.contains(.read) {
            value = Self.defaultValue(for: metadata, type: uuid, name: name)
        }
        return Characteristic(iid: iid, type: uuid.uppercased(), value: value, metadata: metadata, name: name)
    }

    // MARK: Behaviours

    func behaviourKinds(_ map: FileReader, service: AccessoryService, typeName: String) throws(SimulatorError) -> [BehaviourKind] {
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
        case HAPType.thermostat:
            allowed += ["step", "every"]
            try b.allowOnly(allowed)
            if b.has("step") || b.has("every") {
                kinds.append(.thermostat(step: try b.positive("step") ?? ServiceBehaviour.defaultThermostatStep,
                                         every: try b.positive("every") ?? ServiceBehaviour.defaultThermostatInterval))
            }
        default:
            do throws(SimulatorError) {
                try b.allowOnly(allowed)
            } catch {
                throw SimulatorError(file: error.file, key: error.key, code: error.code, message: error.message + " (travel-time, delay, step and every belong to garage-door-opener, lock-mechanism and thermostat; this is \(typeName))")
            }
        }
        if try b.bool("none") == true {
            if !kinds.isEmpty { throw b.error("none", .invalidValue, "'none' cannot be combined with other behaviour settings") }
            kinds.append(.none)
        }
        guard b.has("drift") || b.has("script") else {
            if b.has("repeat") || b.has("characteristic") {
                throw b.error(b.has("repeat") ? "repeat" : "characteristic", .invalidValue, "only used with drift or script")
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
                throw drift.error(nil, .invalidValue, "drift needs a number or bool characteristic; \(Catalog.characteristicName(uuid: target.type) ?? target.type) is \(target.metadata.format.rawValue)")
            }
            let lo = try drift.double("min"), hi = try drift.double("max")
            if let lo, let hi, lo > hi { throw drift.error("min", .outOfRange, "min \(lo) is above max \(hi)") }
            kinds.append(.drift(characteristic: target.type, step: try drift.positive("step") ?? 0.1,
                                every: try drift.positive("every") ?? 30, min: lo, max: hi))
        } else if let items = try b.list("script") {
            var steps: [ScriptStep] = []
            for (path, node) in items {
                let step = try FileReader(node, path: path, failure: SimulatorError.reading(file))
                try step.allowOnly(["after", "value"])
                guard let after = try step.nonNegative("after") else { throw step.error("after", .missingKey, "'after' (seconds) is required") }
                guard let valueNode = step.node("value") else { throw step.error("value", .missingKey, "'value' is required") }
                let label = Catalog.characteristicName(uuid: target.type) ?? target.name ?? target.type
                steps.append(ScriptStep(after: after, value: try parseValue(valueNode, key: step.keyPath("value"), label: label, metadata: target.metadata)))
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
            let uuid = Catalog.characteristicType(named: key)?.uuid ?? (Self.looksLikeUUID(key) ? StandardUUID.longForm(key) : nil)
            guard let uuid, let c = service.characteristic(type: uuid) else {
                throw b.error("characteristic", .unknownType, "the service has no characteristic '\(key)'")
            }
            return c
        }
        let required = Catalog.serviceType(uuid: service.type)?.requiredCharacteristics ?? []
        let readings = service.characteristics.filter { !$0.metadata.permissions.contains(.write) && $0.metadata.permissions.contains(.read) && $0.type != StandardUUID.name }
        if let c = readings.first(where: { required.contains($0.type) }) ?? readings.first { return c }
        throw b.error(nil, .missingKey, "say which characteristic to drive with 'characteristic:'")
    }

    // MARK: Helpers

    static func isFullUUID(_ text: String) -> Bool { text.count == 36 && UUID(uuidString: text) != nil }

    static func looksLikeUUID(_ text: String) -> Bool {
        isFullUUID(text) || (text.count <= 8 && !text.isEmpty && text.allSatisfy(\.isHexDigit))
    }

    /// A value that satisfies the metadata, for characteristics a file leaves out.
    static func defaultValue(for metadata: CharacteristicMetadata, type: String, name: String) -> CharacteristicValue? {
        if !metadata.permissions.contains(.read) { return nil }
        switch metadata.format {
        case .bool: return .bool(false)
        case .string: return .string(type == StandardUUID.name ? name : "")
        case .tlv8, .data: return .data([])
        case .uint8, .uint16, .uint32, .uint64, .int, .float:
            if let lowest = metadata.validValues.keys.min() {
                return metadata.format == .int ? .int(lowest) : .uint(UInt64(max(0, lowest)))
            }
            var x = metadata.unit == "celsius" ? 20.0 : 0.0
            if let lo = metadata.minValue { x = max(x, lo) }
            if let hi = metadata.maxValue { x = min(x, hi) }
            return BehaviourContext.value(x, for: metadata)
        }
    }
}
