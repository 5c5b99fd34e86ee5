import HomeModel

/// The JSON documents the gateway publishes. Kept apart from the gateway's state handling so
/// the contract can be read in one place.
enum Payloads {
    static func info(_ node: TopicTree.AccessoryNode) -> JSONValue {
        let accessory = node.accessory
        let inScope = Dictionary(node.services.map { ($0.iid, $0) }, uniquingKeysWith: { a, _ in a })
        let services: [JSONValue] = accessory.services.sorted { $0.iid < $1.iid }.map { service in
            var object: [String: JSONValue] = [
                "iid": .uint(service.iid),
                "type": .string(service.type),
                "type-name": .string(TopicTree.typeName(service: service)),
                "user-interactive": .bool(service.isUserInteractive),
                "primary": .bool(service.isPrimary),
                "hidden": .bool(service.isHidden),
            ]
            if let name = service.name { object["name"] = .string(name) }
            if let scoped = inScope[service.iid] {
                object["topic"] = .string(scoped.topic)
                object["display-name"] = .string(scoped.displayName)
            }
            if !service.linkedServices.isEmpty { object["linked"] = .array(service.linkedServices.map { .uint($0) }) }
            return .object(object)
        }
        var object: [String: JSONValue] = [
            "identifier": .string(accessory.id),
            "name": .string(node.displayName),
            "accessory-name": .string(accessory.name),
            "manufacturer": .string(accessory.manufacturer),
            "model": .string(accessory.model),
            "serial": .string(accessory.serialNumber),
            "firmware": .string(accessory.firmwareRevision),
            "category": .int(Int64(accessory.category)),
            "category-name": .string(Catalog.categories[accessory.category] ?? "other"),
            "bridged": .bool(accessory.isBridged),
            "room": .string(node.room.name),
            "topic": .string(node.topic),
            "services": .array(services),
        ]
        if let bridge = accessory.bridgeID { object["bridge"] = .string(bridge) }
        return .object(object)
    }

    static func meta(_ node: TopicTree.CharacteristicNode) -> JSONValue {
        var meta = ValueCodec.metaJSON(type: node.characteristic.type, typeName: node.typeName, metadata: node.characteristic.metadata)
        if case .object(var object) = meta {
            if let name = node.characteristic.name { object["description"] = .string(name) }
            if node.isReadOnlyScope { object["read-only-scope"] = .bool(true) }
            meta = .object(object)
        }
        return meta
    }

    static func tree(_ tree: TopicTree, home: Home) -> JSONValue {
        let rooms: [JSONValue] = tree.rooms.map { room in
            let accessories: [JSONValue] = room.accessoryIDs.compactMap { tree.accessory(id: $0) }.map { node in
                let services: [JSONValue] = node.services.map { service in
                    let characteristics: [JSONValue] = service.characteristics.map { c in
                        let permissions = c.characteristic.metadata.permissions
                        var object: [String: JSONValue] = [
                            "type": .string(c.characteristic.type),
                            "type-name": .string(c.typeName),
                            "format": .string(c.characteristic.metadata.format.rawValue),
                            "topic": .string(c.topic),
                            "meta": .string(c.topic + "/meta"),
                            "state": .string(c.topic + "/state"),
                            "get": .string(c.topic + "/get"),
                            "result": .string(c.topic + "/result"),
                            "writable": .bool(permissions.contains(.write) && !c.isReadOnlyScope),
                            "notifies": .bool(permissions.contains(.notify)),
                        ]
                        if permissions.contains(.write) && !c.isReadOnlyScope { object["set"] = .string(c.topic + "/set") }
                        return .object(object)
                    }
                    var object: [String: JSONValue] = [
                        "name": .string(service.displayName),
                        "type": .string(service.service.type),
                        "type-name": .string(service.typeName),
                        "topic": .string(service.topic),
                        "characteristics": .array(characteristics),
                    ]
                    if PrimaryControl.characteristic(in: service) != nil {
                        object["toggle"] = .string(service.topic + "/$toggle")
                    }
                    return .object(object)
                }
                return .object([
                    "id": .string(node.id),
                    "name": .string(node.displayName),
                    "manufacturer": .string(node.accessory.manufacturer),
                    "model": .string(node.accessory.model),
                    "category": .string(Catalog.categories[node.accessory.category] ?? "other"),
                    "topic": .string(node.topic),
                    "info": .string(node.topic + "/$info"),
                    "availability": .string(node.topic + "/$availability"),
                    "reachable": .bool(node.accessory.isReachable),
                    "services": .array(services),
                ])
            }
            return .object([
                "id": .string(room.room.id),
                "name": .string(room.room.name),
                "topic": .string(room.topic),
                "default": .bool(room.room.id == home.roomForEntireHome.id),
                "accessories": .array(accessories),
            ])
        }
        return .object([
            "home": .string(home.name),
            "base": .string(tree.base),
            "rooms": .array(rooms),
        ])
    }

    static func result(id: JSONValue, op: String, value: CharacteristicValue?) -> JSONValue {
        var object: [String: JSONValue] = ["id": id, "op": .string(op), "status": .string("ok")]
        if let value { object["value"] = ValueCodec.json(value) }
        return .object(object)
    }

    static func error(id: JSONValue, op: String, _ failure: GatewayFailure) -> JSONValue {
        var object: [String: JSONValue] = [
            "id": id, "op": .string(op), "status": .string("error"),
            "code": .string(failure.code), "message": .string(failure.message),
        ]
        if let hap = failure.hapStatus { object["hap"] = .int(Int64(hap)) }
        return .object(object)
    }
}

/// Why a request failed: our machine code, a message, and HAP's status where one applies.
public struct GatewayFailure: Error, Sendable, Hashable, CustomStringConvertible {
    public var code: String
    public var message: String
    public var hapStatus: Int?

    public init(code: String, message: String, hapStatus: Int? = nil) {
        self.code = code
        self.message = message
        self.hapStatus = hapStatus
    }

    public init(_ error: ModelError) {
        let invalid = AccessoryError.Status.invalidValue.rawValue
        let hap: Int? = switch error.code {
        case "read-only": AccessoryError.Status.readOnly.rawValue
        case "out-of-range", "not-a-valid-value", "invalid-type", "too-long", "not-a-step": invalid
        default: nil
        }
        self.init(code: error.code, message: error.message, hapStatus: hap)
    }

    public init(_ error: AccessoryError) {
        self.init(code: error.code, message: error.message, hapStatus: error.status.rawValue)
    }

    public var description: String { "\(code): \(message)" }
}
