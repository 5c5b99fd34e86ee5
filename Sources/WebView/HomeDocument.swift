import Gateway
import HomeModel

/// The home as the page draws it: rooms, accessories with their tile (which characteristic it
/// shows, which service it toggles), services and characteristics with values, as one JSON
/// document sent first to every page and again after every structural change.
///
/// Metadata is written once per distinct kind (`metas`) and referenced by index: a home of a
/// thousand lamps of one model has one brightness description, not a thousand, and the
/// document a page parses at opening stays small.
enum HomeDocument {
    struct Inputs {
        var tree: TopicTree
        var values: [CharacteristicAddress: CharacteristicValue]
        /// When the gateway last heard from each accessory (none when `last-seen-interval` is 0).
        var seen: [String: AccessorySeen] = [:]
        var connected: Bool
    }

    static func make(_ inputs: Inputs) -> JSONValue {
        var metas: [JSONValue] = []
        var metaIndex: [MetaKey: Int] = [:]
        let tree = inputs.tree
        var accessories: [JSONValue] = []
        accessories.reserveCapacity(tree.accessories.count)
        for node in tree.accessories {
            var services: [JSONValue] = []
            for service in node.services {
                var characteristics: [JSONValue] = []
                for c in service.characteristics {
                    let key = MetaKey(
                        type: c.characteristic.type, typeName: c.typeName, metadata: c.characteristic.metadata)
                    let index: Int
                    if let found = metaIndex[key] {
                        index = found
                    } else {
                        index = metas.count
                        metaIndex[key] = index
                        metas.append(meta(c))
                    }
                    var object: [String: JSONValue] = [
                        "iid": .uint(c.address.iid), "slug": .string(c.slug), "m": .int(Int64(index)),
                    ]
                    if let value = value(c, of: service, inputs.values) { object["v"] = ValueCodec.json(value) }
                    if c.isReadOnlyScope { object["ro"] = .bool(true) }
                    if let name = c.characteristic.name { object["desc"] = .string(name) }
                    characteristics.append(.object(object))
                }
                var object: [String: JSONValue] = [
                    "iid": .uint(service.iid), "name": .string(service.displayName), "type": .string(service.typeName),
                    "slug": .string(service.slug), "topic": .string(service.topic), "chars": .array(characteristics),
                ]
                if service.service.isPrimary { object["primary"] = .bool(true) }
                if let control = service.primaryControl { object["toggle"] = .string(control.slug) }
                services.append(.object(object))
            }
            var object = accessory(node, services: services)
            if let record = inputs.seen[node.id] { object["seen"] = LiveHub.json(record) }
            accessories.append(.object(object))
        }
        let rooms: [JSONValue] = tree.rooms.map { room in
            .object(["id": .string(room.room.id), "name": .string(room.room.name), "topic": .string(room.topic)])
        }
        return .object([
            "type": "home", "base": .string(tree.base), "connected": .bool(inputs.connected),
            "rooms": .array(rooms), "accessories": .array(accessories), "metas": .array(metas),
        ])
    }

    /// A characteristic's value: the last one reported, else the one it was described with.
    static func value(
        _ node: TopicTree.CharacteristicNode, of service: TopicTree.ServiceNode,
        _ values: [CharacteristicAddress: CharacteristicValue]
    ) -> CharacteristicValue? {
        values[node.address] ?? service.describedValue(of: node)
    }

    private static func accessory(_ node: TopicTree.AccessoryNode, services: [JSONValue]) -> [String: JSONValue] {
        let accessory = node.accessory
        var object: [String: JSONValue] = [
            "id": .string(node.id), "name": .string(node.displayName), "topic": .string(node.topic),
            "room": .string(node.room.id), "manufacturer": .string(accessory.manufacturer),
            "model": .string(accessory.model), "reachable": .bool(accessory.isReachable),
            "category": .string(Catalog.categories[accessory.category] ?? "other"), "services": .array(services),
        ]
        if let (service, characteristic) = tile(node) {
            object["tile"] = .array([.int(Int64(service)), .int(Int64(characteristic))])
        }
        if let (service, _) = toggle(node) { object["toggle"] = .int(Int64(service)) }
        return object
    }

    /// The service a tile toggles: the primary service's primary control, else the first
    /// service that has one (not one the scope makes read-only: its switch could only be
    /// refused). Index into the accessory's in-scope services.
    static func toggle(_ node: TopicTree.AccessoryNode) -> (Int, TopicTree.CharacteristicNode)? {
        let order = serviceOrder(node)
        for index in order {
            if let control = node.services[index].primaryControl, !control.isReadOnlyScope { return (index, control) }
        }
        return nil
    }

    /// What a tile shows: the characteristic its toggle flips, else the primary service's first
    /// readable characteristic that is not its name (a sensor's reading).
    static func tile(_ node: TopicTree.AccessoryNode) -> (Int, Int)? {
        if let (service, control) = toggle(node),
            let index = node.services[service].characteristics.firstIndex(where: { $0.address == control.address })
        {
            return (service, index)
        }
        for service in serviceOrder(node) {
            let characteristics = node.services[service].characteristics
            if let index = characteristics.firstIndex(where: {
                $0.characteristic.metadata.permissions.contains(.read) && $0.typeName != "name"
            }) {
                return (service, index)
            }
        }
        return nil
    }

    /// The accessory's services, primary first, then in instance-id order.
    private static func serviceOrder(_ node: TopicTree.AccessoryNode) -> [Int] {
        let indices = Array(node.services.indices)
        return indices.filter { node.services[$0].service.isPrimary }
            + indices.filter {
                !node.services[$0].service.isPrimary
            }
    }

    private static func meta(_ node: TopicTree.CharacteristicNode) -> JSONValue {
        let metadata = node.characteristic.metadata
        var object: [String: JSONValue] = [
            "type": .string(node.typeName), "format": .string(metadata.format.rawValue),
            "perms": .array(metadata.permissions.nameList.map(JSONValue.string)),
        ]
        if let unit = metadata.unit { object["unit"] = .string(unit) }
        if let v = metadata.minValue { object["min"] = .double(v) }
        if let v = metadata.maxValue { object["max"] = .double(v) }
        if let v = metadata.minStep { object["step"] = .double(v) }
        if !metadata.validValues.isEmpty {
            object["valid"] = .array(
                metadata.validValues.sorted { $0.key < $1.key }.map { .array([.int($0.key), .string($0.value)]) })
        }
        if let v = metadata.maxLength { object["maxLength"] = .int(Int64(v)) }
        if node.isEvent { object["event"] = .bool(true) }
        return .object(object)
    }

    /// What makes two characteristics' descriptions the same.
    struct MetaKey: Hashable {
        var type: String
        var typeName: String
        var metadata: CharacteristicMetadata
    }
}
