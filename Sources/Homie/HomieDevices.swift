import Gateway
import HomeModel

/// The published home as Homie v5 devices: the gateway is the root device and each accessory a
/// child device (`root` names the gateway), each service a node, each characteristic a
/// property. Everything here is a pure function of the tree; `HomieOutput` publishes it.
struct HomieDevices: Sendable {
    /// One property: where its value goes, and how its values are written.
    struct Property: Sendable {
        var node: TopicTree.CharacteristicNode
        var topic: String
        var isRetained: Bool
        var isEnum: Bool
    }

    struct Device: Sendable, Equatable {
        var id: String
        /// `$description` without its `version`: two descriptions are the same device when
        /// these are equal.
        var description: [String: JSONValue]
        var isReachable: Bool
        /// Its properties' value topics.
        var propertyTopics: [String] = []
    }

    let domain: String
    let rootID: String
    var root: Device
    /// The accessories' devices, in the tree's order.
    var children: [Device] = []
    /// Every property by its value topic, and the topic of each characteristic.
    var properties: [String: Property] = [:]
    var topics: [CharacteristicAddress: String] = [:]

    init(snapshot tree: TopicTree, domain: String, rootID: String, name: String) {
        self.domain = domain
        self.rootID = rootID
        root = Device(id: rootID, description: [:], isReachable: true)
        let ids = Slug.unique(tree.accessories.map { "\(rootID)-\($0.id)" })
        for (node, id) in zip(tree.accessories, ids) {
            children.append(makeChild(node, id: id))
        }
        root.description = [
            "homie": "5.0", "name": .string(name), "type": "org.homemqtt.gateway",
            "children": .array(children.map { .string($0.id) }),
        ]
    }

    func deviceTopic(_ id: String) -> String { "\(domain)/5/\(id)" }

    /// The value topics of the properties a `$description` document names, for clearing a
    /// device that is no longer in the home.
    static func propertyTopics(in description: JSONValue, deviceTopic: String) -> [String] {
        guard case .object(let nodes)? = description.objectValue?["nodes"] else { return [] }
        var out: [String] = []
        for (nodeID, node) in nodes {
            guard case .object(let properties)? = node.objectValue?["properties"] else { continue }
            out += properties.keys.map { "\(deviceTopic)/\(nodeID)/\($0)" }
        }
        return out
    }

    private mutating func makeChild(_ accessory: TopicTree.AccessoryNode, id: String) -> Device {
        var nodes: [String: JSONValue] = [:]
        var propertyTopics: [String] = []
        for service in accessory.services {
            var properties: [String: JSONValue] = [:]
            for c in service.characteristics {
                let (description, isEnum) = Self.property(c)
                properties[c.slug] = .object(description)
                let topic = "\(domain)/5/\(id)/\(service.slug)/\(c.slug)"
                self.properties[topic] = Property(node: c, topic: topic, isRetained: !c.isEvent, isEnum: isEnum)
                topics[c.address] = topic
                propertyTopics.append(topic)
            }
            nodes[service.slug] = .object([
                "name": .string(service.displayName), "type": .string("org.homemqtt.service.\(service.typeName)"),
                "properties": .object(properties),
            ])
        }
        let description: [String: JSONValue] = [
            "homie": "5.0", "name": .string(accessory.displayName), "root": .string(rootID),
            "type": .string("org.homemqtt.accessory"), "nodes": .object(nodes),
        ]
        return Device(
            id: id, description: description, isReachable: accessory.accessory.isReachable,
            propertyTopics: propertyTopics)
    }

    /// A characteristic's property object, and whether its values are enum names.
    static func property(_ c: TopicTree.CharacteristicNode) -> ([String: JSONValue], Bool) {
        let metadata = c.characteristic.metadata
        let permissions = metadata.permissions
        var out: [String: JSONValue] = [
            "name": .string(c.characteristic.name ?? c.typeName),
            "settable": .bool(permissions.contains(.write) && !c.isReadOnlyScope),
        ]
        // A press, and a value that cannot be read (a control point, identify), is a
        // momentary event: not retained.
        if c.isEvent || !permissions.contains(.read) { out["retained"] = false }
        var isEnum = false
        switch metadata.format {
        case .bool:
            out["datatype"] = "boolean"
        case .uint8, .uint16, .uint32, .uint64, .int:
            if !metadata.validValues.isEmpty {
                out["datatype"] = "enum"
                out["format"] = .string(
                    metadata.validValues.sorted { $0.key < $1.key }.map(\.value).joined(separator: ","))
                isEnum = true
            } else {
                out["datatype"] = "integer"
                if let range = range(metadata, integer: true) { out["format"] = .string(range) }
            }
        case .float:
            out["datatype"] = "float"
            if let range = range(metadata, integer: false) { out["format"] = .string(range) }
        case .string, .tlv8, .data:
            out["datatype"] = "string"
        }
        if let unit = unit(c) { out["unit"] = .string(unit) }
        return (out, isEnum)
    }

    /// `[min]:[max][:step]`, nil when nothing bounds the value.
    static func range(_ metadata: CharacteristicMetadata, integer: Bool) -> String? {
        func text(_ d: Double?) -> String {
            guard let d else { return "" }
            if integer || d == d.rounded(), let i = Int64(exactly: d.rounded()) { return String(i) }
            return "\(d)"
        }
        guard metadata.minValue != nil || metadata.maxValue != nil || metadata.minStep != nil else { return nil }
        var out = text(metadata.minValue) + ":" + text(metadata.maxValue)
        if let step = metadata.minStep, step > 0, !(integer && step == 1) { out += ":" + text(step) }
        return out
    }

    /// The Homie spelling of the unit (its recommended symbols), the vendor catalog's for
    /// vendor characteristics.
    static func unit(_ c: TopicTree.CharacteristicNode) -> String? {
        switch c.characteristic.metadata.unit {
        case "celsius": return "°C"
        case "fahrenheit": return "°F"
        case "percentage": return "%"
        case "arcdegrees": return "°"
        case "lux": return "lx"
        case "seconds": return "s"
        case let other?: return other
        case nil: return VendorCatalog.characteristicType(uuid: c.characteristic.type)?.unit
        }
    }

    /// A value as its Homie payload: `true`/`false`, numbers, an enum's name; an empty string
    /// is the single byte 0, since an empty payload would delete the topic.
    static func payload(_ value: CharacteristicValue, _ property: Property) -> [UInt8] {
        let metadata = property.node.characteristic.metadata
        if property.isEnum, let name = ValueCodec.valueName(value, metadata: metadata) { return Array(name.utf8) }
        let text = ValueCodec.text(value, metadata: metadata)
        if metadata.format == .float, let d = value.doubleValue, !d.isFinite { return Array("0".utf8) }
        return text.isEmpty ? [0] : Array(text.utf8)
    }

    /// A Homie `set` payload as the gateway's `set` payload: the single byte 0 is the empty
    /// string; everything else is the same text (booleans, numbers and enum names read alike).
    static func setPayload(_ payload: [UInt8]) -> [UInt8] {
        payload == [0] ? [] : payload
    }
}
