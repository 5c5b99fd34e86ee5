import Foundation
import HomeModel
import Yams

// An accessory file's accessories (a bridge and its bridged ones) and their services, with
// instance ids numbered as HAP numbers them and defaults for what the file leaves out.

/// Builds accessories from one YAML file (schema at the top of AccessoryFileLoader.swift).
struct AccessoryBuilder {
    let file: String
    let stem: String
    var behaviours: [ServiceBehaviour] = []

    init(file: String, stem: String) {
        self.file = file
        self.stem = stem
    }

    static let accessoryKeys = [
        "name", "manufacturer", "model", "serial", "firmware", "hardware", "category", "room", "reachable", "services",
    ]
    static let serviceKeys = ["type", "name", "primary", "hidden", "behaviour", "characteristics", "custom"]
    static let overrideKeys = ["value", "min", "max", "step", "unit", "valid-values", "max-length", "permissions"]
    static let customKeys = [
        "uuid", "name", "format", "unit", "min", "max", "step", "valid-values", "max-length", "permissions", "value",
    ]

    mutating func buildFile(_ root: FileReader) throws(SimulatorError) -> AccessoryFileLoader.FileContents {
        try root.allowOnly(Self.accessoryKeys + ["bridged", "homekit"])
        let bridgeID = "sim:\(stem)"
        let bridgedItems = try root.list("bridged") ?? []
        var accessories = [try buildAccessory(root, id: bridgeID, aid: 1, isBridge: !bridgedItems.isEmpty)]
        let serving = try Self.homeKitServing(root, isBridge: !bridgedItems.isEmpty)
        accessories[0].isHomeKitStandalone = serving != .bridged
        accessories[0].isHomeKitThread = serving == .thread
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
        return AccessoryFileLoader.FileContents(
            config: SimulatorConfiguration(accessories: accessories, behaviours: behaviours), authoredNames: names)
    }

    /// How a file's top accessory reaches HomeKit (`homekit:`).
    enum HomeKitServing: String {
        case bridged, standalone, thread
    }

    /// `homekit: bridged` (the default: on the home's bridge), `standalone` (its own HAP
    /// accessory server over IP) or `thread` (its own HAP-over-CoAP accessory over UDP, as a
    /// Thread accessory is reached). A file's top accessory only: a simulated bridge is no
    /// accessory to serve alone, and its bridged accessories reach HomeKit through the home's bridge.
    static func homeKitServing(_ map: FileReader, isBridge: Bool) throws(SimulatorError) -> HomeKitServing {
        guard let text = try map.string("homekit") else { return .bridged }
        guard let serving = HomeKitServing(rawValue: text) else {
            throw map.error("homekit", "must be bridged, standalone or thread, got '\(text)'")
        }
        if serving != .bridged && isBridge {
            throw map.error(
                "homekit", "a file with bridged accessories cannot be \(text); only a single accessory can")
        }
        return serving
    }

    mutating func buildAccessory(_ map: FileReader, id: String, aid: UInt64, isBridge: Bool) throws(SimulatorError)
        -> Accessory
    {
        let name = try map.requiredString("name")
        let serialDefault = aid == 1 ? "SIM-\(stem)" : "SIM-\(stem)-\(aid)"
        var iid: UInt64 = 0
        func nextIID() -> UInt64 { iid += 1; return iid }

        // Accessory information first, as HAP numbers it: service 1, characteristics 2….
        let infoIID = nextIID()
        var info: [Characteristic] = []
        let infoValues: [(String, String?)] =
            [
                ("14", nil),
                ("20", try map.string("manufacturer") ?? "Simulated"),
                ("21", try map.string("model") ?? "Simulated"),
                ("23", name),
                ("30", try map.string("serial") ?? serialDefault),
                ("52", try map.string("firmware") ?? "1.0.0"),
            ] + (try map.string("hardware").map { [("53", $0)] } ?? [])
        let infoKeys = [
            "14": "", "20": "manufacturer", "21": "model", "23": "name", "30": "serial", "52": "firmware",
            "53": "hardware",
        ]
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
            throw map.error(
                "services", .missingKey,
                "an accessory needs at least one service (accessory-information is added automatically)")
        }

        let category: Int
        if let text = try map.string("category") {
            guard let number = Catalog.category(named: text) else {
                throw map.error(
                    "category", .unknownType,
                    "unknown category '\(text)'; use a name such as \(["lightbulb", "garage-door-opener", "sensor", "bridge"].joined(separator: ", ")) or a number 1–33"
                )
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

    mutating func buildService(_ map: FileReader, accessoryName: String, accessoryID: String, nextIID: () -> UInt64)
        throws(SimulatorError) -> AccessoryService
    {
        try map.allowOnly(Self.serviceKeys)
        let typeText = try map.requiredString("type")
        let standard =
            Catalog.serviceType(named: typeText)
            ?? (Self.looksLikeUUID(typeText) ? Catalog.serviceType(uuid: typeText) : nil)
        let serviceUUID: String
        if let standard {
            serviceUUID = standard.uuid
        } else if Self.isFullUUID(typeText) {
            serviceUUID = typeText.uppercased()
        } else {
            throw map.error(
                "type", .unknownType,
                "unknown service type '\(typeText)'; use a catalog name (lightbulb, garage-door-opener, temperature-sensor, …), a HAP name or a UUID"
            )
        }
        if serviceUUID == StandardUUID.accessoryInformation {
            throw map.error(
                "type", .invalidValue,
                "accessory-information is added automatically; set name, manufacturer, model, serial and firmware at the top of the accessory"
            )
        }
        let serviceName = try map.string("name")
        let typeName = standard?.name ?? serviceUUID
        let serviceIID = nextIID()

        // Standard characteristics the file mentions, in file order.
        var given: [(type: CharacteristicType, key: String, node: Node)] = []
        if let chars = try map.reader("characteristics") {
            for (key, node) in chars.entries {
                let type =
                    Catalog.characteristicType(named: key)
                    ?? (Self.looksLikeUUID(key) ? Catalog.characteristicType(uuid: key) : nil)
                guard let type else {
                    throw chars.error(
                        key, .unknownType,
                        "unknown characteristic '\(key)'; use a catalog name (power-state, brightness, target-door-state, …), a HAP name or UUID, or declare it under 'custom'"
                    )
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

        // Order: required (catalog order), the service Name, then the rest in file order. The
        // Name's value is the service's `name` as text, not a Yams node made for it: a scalar
        // made in code takes Yams' default resolver, whose regular expressions (compiled through
        // ICU on first use) the reading of a file never needs otherwise.
        var order: [(type: CharacteristicType, key: String?, node: Node?, text: String?)] = []
        let required = standard?.requiredCharacteristics ?? []
        for uuid in required {
            guard let type = Catalog.characteristicType(uuid: uuid) else { continue }
            let hit = given.first { $0.type.uuid == uuid }
            order.append((type, hit?.key, hit?.node, nil))
        }
        let allowsName =
            standard.map {
                $0.requiredCharacteristics.contains(StandardUUID.name)
                    || $0.optionalCharacteristics.contains(StandardUUID.name)
            } ?? true
        if let serviceName, allowsName, !required.contains(StandardUUID.name),
            let nameType = Catalog.characteristicType(uuid: StandardUUID.name)
        {
            order.append((nameType, nil, nil, serviceName))
        }
        for item in given where !required.contains(item.type.uuid) {
            order.append((item.type, item.key, item.node, nil))
        }

        var characteristics: [Characteristic] = []
        characteristics.reserveCapacity(order.count)
        for entry in order {
            var metadata = entry.type.metadata
            var value: CharacteristicValue?
            if let key = entry.key, let node = entry.node {
                (metadata, value) = try characteristicValue(node, key: key, type: entry.type, metadata: metadata)
            } else if let text = entry.text {
                value = try? ValueCodec.parse(text: text, metadata: metadata, label: entry.type.name)
            }
            if value == nil {
                value = Self.defaultValue(for: metadata, type: entry.type.uuid, name: serviceName ?? accessoryName)
            }
            characteristics.append(
                Characteristic(iid: nextIID(), type: entry.type.uuid, value: value, metadata: metadata))
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
