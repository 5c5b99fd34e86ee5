// Finding what a request or a CLI command names in the tree: an accessory by id, topic or name,
// a service by slug, topic, name or instance id. The running gateway and the CLI without it
// resolve names the same way.
public import HomeModel

extension TopicTree {
    /// The in-scope accessory `key` names (its id, its topic with or without the base, or its
    /// name in any case); nil when none does; an error when several share the name.
    public func accessory(named key: String) throws(GatewayFailure) -> AccessoryNode? {
        let lower = key.lowercased()
        let matches = accessories.filter {
            $0.id == key || $0.topic == key || $0.topic == "\(base)/\(key)" || $0.displayName.lowercased() == lower
        }
        guard matches.count <= 1 else {
            let topics = matches.map(\.topic).joined(separator: ", ")
            throw GatewayFailure(
                code: .ambiguous,
                message: "\(matches.count) accessories are named '\(key)'; use its id or topic: \(topics)"
            )
        }
        return matches.first
    }
}

extension TopicTree {
    /// The room `key` names among `rooms`: its id, its name in any case, or its topic slug.
    public func room(named key: String, among rooms: [Room]) throws(GatewayFailure) -> Room {
        let lower = key.lowercased()
        if let room = rooms.first(where: { $0.id == key }) ?? rooms.first(where: { $0.name.lowercased() == lower })
            ?? self.rooms.first(where: { $0.slug == key })?.room
        {
            return room
        }
        let names = rooms.map(\.name).joined(separator: ", ")
        throw GatewayFailure(code: .unknownRoom, message: "no room '\(key)'; rooms: \(names)")
    }
}

extension TopicTree.AccessoryNode {
    /// The service `key` names: its slug, topic, name (any case) or instance id.
    public func service(named key: String) throws(GatewayFailure) -> TopicTree.ServiceNode {
        let lower = key.lowercased()
        if let service = services.first(where: {
            $0.slug == key || $0.topic == key || $0.displayName.lowercased() == lower || String($0.iid) == key
        }) {
            return service
        }
        let slugs = services.map(\.slug).joined(separator: ", ")
        throw GatewayFailure(
            code: .unknownService, message: "\(displayName) has no service '\(key)'; services: \(slugs)")
    }
}

extension GatewayFailure {
    public static func unknownAccessory(_ key: String) -> GatewayFailure {
        GatewayFailure(code: .unknownAccessory, message: "no accessory '\(key)' in scope (by id, name or topic)")
    }
}

// What the gateway asks of its source about the tree's characteristics.
extension TopicTree {
    /// The in-scope characteristics that can notify, straight from the tree (no array of every
    /// address on the way).
    func notifyingAddresses() -> CharacteristicAddressSet {
        var out = CharacteristicAddressSet()
        for accessory in accessories {
            for service in accessory.services {
                for c in service.characteristics where c.characteristic.metadata.permissions.contains(.notify) {
                    out.insert(c.address)
                }
            }
        }
        return out
    }

    /// The readable characteristics of reachable accessories that cannot notify: polled.
    func pollTargets() -> [CharacteristicAddress] {
        accessories.filter(\.accessory.isReachable).flatMap { node in
            node.services.flatMap { service in
                service.characteristics.filter {
                    let permissions = $0.characteristic.metadata.permissions
                    return permissions.contains(.read) && !permissions.contains(.notify)
                }.map(\.address)
            }
        }
    }
}
