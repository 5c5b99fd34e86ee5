public import HomeModel

/// The scoped home as topics: which accessory, service and characteristic each topic names,
/// and the other way round. Rebuilt whole on every structural change; building is cheap
/// next to publishing, and a whole rebuild cannot drift from the home.
public struct TopicTree: Sendable {
    public struct CharacteristicNode: Sendable {
        public var address: CharacteristicAddress
        /// The service's topic, shared with it: a characteristic stores no topic string of its
        /// own; `topic` is made from this when asked.
        public var serviceTopic: String
        /// What the characteristic is (without its value), its slug and its scope: the same for
        /// the characteristic of every accessory of one model, so the tree keeps one for them
        /// all (`Kinds`). A node is 48 bytes; with these and the described value of its own it
        /// was 88 (10 MB more at 10,000 accessories). The described value is the service's
        /// (`ServiceNode.describedValue`).
        private var kind: Kind

        public init(
            address: CharacteristicAddress, serviceTopic: String, slug: String, typeName: String,
            characteristic: Characteristic, isReadOnlyScope: Bool
        ) {
            var kinds = Kinds()
            self.init(
                address: address, serviceTopic: serviceTopic, slug: slug, characteristic: characteristic,
                isReadOnlyScope: isReadOnlyScope, kinds: &kinds, typeName: { _ in typeName })
        }

        init(
            address: CharacteristicAddress, serviceTopic: String, slug: String, characteristic: Characteristic,
            isReadOnlyScope: Bool, kinds: inout Kinds, typeName: (Characteristic) -> String
        ) {
            self.address = address
            self.serviceTopic = serviceTopic
            kind = kinds.kind(of: characteristic, slug: slug, isReadOnlyScope: isReadOnlyScope, typeName: typeName)
        }

        public var slug: String { kind.key.slug }
        /// Writable by the characteristic's permissions, read-only by the scope's.
        public var isReadOnlyScope: Bool { kind.key.isReadOnlyScope }
        /// `home/<room>/<accessory>/<service>/<characteristic>`
        public var topic: String { topic("") }
        /// `topic` + `suffix` (`/state`), its bytes copied once into one allocation: `+` after
        /// `+` grew the string twice, and `String.append` costs ~300 instructions even into
        /// reserved room, ~1.7 k of each notification's ~36 k (callgrind).
        public func topic(_ suffix: StaticString) -> String {
            var service = serviceTopic
            var slug = slug
            let count = service.utf8.count + 1 + slug.utf8.count + suffix.utf8CodeUnitCount
            return String(unsafeUninitializedCapacity: count) { buffer in
                guard var next = buffer.baseAddress else { return 0 }
                // Each part by `memcpy` (`update(from:count:)`); a sequence's `initialize(from:)`
                // went byte by byte.
                service.withUTF8 { bytes in
                    if let from = bytes.baseAddress { next.update(from: from, count: bytes.count) }
                    next += bytes.count
                }
                next.pointee = UInt8(ascii: "/")
                next += 1
                slug.withUTF8 { bytes in
                    if let from = bytes.baseAddress { next.update(from: from, count: bytes.count) }
                    next += bytes.count
                }
                suffix.withUTF8Buffer { bytes in
                    if let from = bytes.baseAddress { next.update(from: from, count: bytes.count) }
                    next += bytes.count
                }
                return count
            }
        }
        public var typeName: String { kind.typeName }
        /// What the characteristic is, without a value: the current one is the gateway's
        /// (`Gateway.currentValue`), the described one the service's (`ServiceNode.describedValue`).
        public var characteristic: Characteristic { kind.key.characteristic }

        /// A button's press: published on `state` once per press, never retained.
        public var isEvent: Bool { kind.isEvent }
    }

    /// A characteristic without its value, its catalog name, its slug and scope.
    final class Kind: Sendable {
        let key: Kinds.Key
        let typeName: String
        /// Asked of each value (`Gateway.update`): decided once per kind, not by comparing the
        /// type's UUID each time (~150 instructions).
        let isEvent: Bool

        init(_ key: Kinds.Key, typeName: String) {
            self.key = key
            self.typeName = typeName
            isEvent = key.characteristic.isEvent
        }
    }

    /// The kinds of characteristic a tree's builder has met. A node holds its kind by reference,
    /// so that a home of 10,000 lamps of one model holds 25 kinds, not 250,000 copies.
    struct Kinds {
        struct Key: Hashable, Sendable {
            var characteristic: Characteristic
            var slug: String
            var isReadOnlyScope: Bool
        }

        private var known: [Key: Kind] = [:]

        mutating func kind(
            of characteristic: Characteristic, slug: String, isReadOnlyScope: Bool,
            typeName: (Characteristic) -> String
        ) -> Kind {
            var key = Key(characteristic: characteristic, slug: slug, isReadOnlyScope: isReadOnlyScope)
            key.characteristic.value = nil
            if let kind = known[key] { return kind }
            let kind = Kind(key, typeName: typeName(key.characteristic))
            known[key] = kind
            return kind
        }
    }

    public struct ServiceNode: Sendable {
        public var iid: UInt64
        public var topic: String
        public var slug: String
        public var typeName: String
        public var displayName: String
        public var service: AccessoryService
        public var characteristics: [CharacteristicNode]

        /// The value `node` (one of this service's) was described with: the accessory's
        /// description (`service`), before any value reported since.
        public func describedValue(of node: CharacteristicNode) -> CharacteristicValue? {
            service.characteristics.first { $0.iid == node.address.iid }?.value
        }
    }

    public struct AccessoryNode: Sendable {
        public var id: String
        public var topic: String
        public var slug: String
        public var displayName: String
        public var room: Room
        public var roomSlug: String
        public var accessory: Accessory
        public var services: [ServiceNode]
    }

    public struct RoomNode: Sendable {
        public var room: Room
        public var slug: String
        public var topic: String
        public var accessoryIDs: [String]
    }

    public let base: String
    public private(set) var rooms: [RoomNode] = []
    public private(set) var accessories: [AccessoryNode] = []
    // Characteristics are found through their accessory or service, not by tables of their
    // own: such tables would be the largest part of the tree, and an accessory or a service
    // has a few dozen characteristics to look through at most.
    private var accessoryIndex: [String: Int] = [:]
    private var serviceByTopic: [String: (Int, Int)] = [:]
    public private(set) var characteristicCount = 0

    public init(base: String) { self.base = base }

    public init(base: String, accessories all: [Accessory], home: Home, scope: ScopeFilter) {
        self.base = base
        let allRooms = [home.roomForEntireHome] + home.rooms
        let roomSlugs = Slug.unique(allRooms.map(\.name), fallback: "room")
        var byRoom: [String: [(Accessory, String)]] = [:]
        // Exact capacities: grown by doubling, these arrays and tables could hold up to twice
        // what the home needs.
        accessories.reserveCapacity(all.count)
        accessoryIndex.reserveCapacity(all.count)
        serviceByTopic.reserveCapacity(all.reduce(0) { $0 + $1.services.count })
        var kinds = Kinds()
        for accessory in all {
            let room = home.room(forAccessory: accessory.id)
            let name = home.displayName(accessory: accessory)
            guard scope.admits(accessory: accessory, displayName: name, room: room) else { continue }
            byRoom[room.id, default: []].append((accessory, name))
        }
        for (roomIndex, room) in allRooms.enumerated() {
            let roomTopic = "\(base)/\(roomSlugs[roomIndex])"
            var roomNode = RoomNode(room: room, slug: roomSlugs[roomIndex], topic: roomTopic, accessoryIDs: [])
            // Stable order: by the accessory's id, so the same home gives the same suffixes.
            let members = (byRoom[room.id] ?? []).sorted { $0.0.id < $1.0.id }
            let slugs = Slug.unique(members.map(\.1), fallback: "accessory")
            for (memberIndex, (accessory, name)) in members.enumerated() {
                let accessoryTopic = "\(roomTopic)/\(slugs[memberIndex])"
                let node = Self.accessoryNode(
                    accessory, name: name, room: room, roomSlug: roomSlugs[roomIndex],
                    slug: slugs[memberIndex], topic: accessoryTopic, home: home, scope: scope, kinds: &kinds)
                roomNode.accessoryIDs.append(accessory.id)
                insert(node)
            }
            if scope.admits(roomOnly: room) { rooms.append(roomNode) }
        }
    }

    private static func accessoryNode(
        _ accessory: Accessory, name: String, room: Room, roomSlug: String, slug: String, topic: String,
        home: Home, scope: ScopeFilter, kinds: inout Kinds
    ) -> AccessoryNode {
        let services = Self.admittedInOrder(accessory.services, admits: scope.admits(service:), iid: \.iid)
        let serviceNames = services.map { service in
            home.displayName(service: service, accessoryID: accessory.id) ?? service.name ?? typeName(service: service)
        }
        let serviceSlugs = Slug.unique(serviceNames, fallback: "service")
        var node = AccessoryNode(
            id: accessory.id, topic: topic, slug: slug, displayName: name, room: room,
            roomSlug: roomSlug, accessory: accessory, services: [])
        node.services.reserveCapacity(services.count)
        for (index, service) in services.enumerated() {
            let serviceTopic = "\(topic)/\(serviceSlugs[index])"
            let characteristics = Self.admittedInOrder(
                service.characteristics, admits: scope.admits(characteristic:), iid: \.iid)
            let names = characteristics.map(characteristicName)
            let slugs = Slug.unique(names, fallback: "characteristic")
            var serviceNode = ServiceNode(
                iid: service.iid, topic: serviceTopic, slug: serviceSlugs[index],
                typeName: typeName(service: service), displayName: serviceNames[index],
                service: service, characteristics: [])
            serviceNode.characteristics.reserveCapacity(characteristics.count)
            for (cIndex, characteristic) in characteristics.enumerated() {
                serviceNode.characteristics.append(
                    CharacteristicNode(
                        address: CharacteristicAddress(accessoryID: accessory.id, iid: characteristic.iid),
                        serviceTopic: serviceTopic, slug: slugs[cIndex], characteristic: characteristic,
                        isReadOnlyScope: scope.isReadOnly(
                            accessory: accessory, displayName: name, topic: "\(serviceTopic)/\(slugs[cIndex])"),
                        kinds: &kinds, typeName: typeName(characteristic:)))
            }
            node.services.append(serviceNode)
        }
        return node
    }

    /// The elements `admits` keeps, by `iid`. Mostly all are kept and already in order: then the
    /// array is returned as it is, since `filter` and `sorted` copy every element (a retain of
    /// each of its references), which was most of the cost of building a large home's tree.
    private static func admittedInOrder<Element>(
        _ elements: [Element], admits: (Element) -> Bool, iid: (Element) -> UInt64
    ) -> [Element] {
        var kept = elements.allSatisfy(admits) ? elements : elements.filter(admits)
        let inOrder = kept.indices.dropFirst().allSatisfy { iid(kept[$0 - 1]) < iid(kept[$0]) }
        if !inOrder { kept.sort { iid($0) < iid($1) } }
        return kept
    }

    /// Catalog name of a standard type, the vendor catalog's for a known vendor type; for
    /// another custom one its UUID.
    static func typeName(characteristic: Characteristic) -> String {
        Catalog.characteristicType(uuid: characteristic.type)?.name
            ?? VendorCatalog.characteristicType(uuid: characteristic.type)?.name ?? characteristic.type.lowercased()
    }

    static func typeName(service: AccessoryService) -> String {
        if let name = Catalog.serviceType(uuid: service.type)?.name { return name }
        if let short = StandardUUID.bluetoothShortForm(service.type) { return "bluetooth-" + short }
        return service.type.lowercased()
    }

    static func characteristicName(_ characteristic: Characteristic) -> String {
        if let type = Catalog.characteristicType(uuid: characteristic.type) { return type.name }
        if let vendor = VendorCatalog.characteristicType(uuid: characteristic.type) { return vendor.name }
        if let name = characteristic.name, !name.isEmpty { return name }
        return "custom-" + characteristic.type.prefix(8).lowercased()
    }

    private mutating func insert(_ node: AccessoryNode) {
        let index = accessories.count
        accessories.append(node)
        accessoryIndex[node.id] = index
        for (s, service) in node.services.enumerated() {
            serviceByTopic[service.topic] = (index, s)
            characteristicCount += service.characteristics.count
        }
    }

    public func accessory(id: String) -> AccessoryNode? {
        accessoryIndex[id].map { accessories[$0] }
    }

    public func characteristic(_ address: CharacteristicAddress) -> CharacteristicNode? {
        guard let a = accessoryIndex[address.accessoryID] else { return nil }
        return characteristic(address.iid, ofAccessoryAt: a)
    }

    /// Where the accessory `id` is in `accessories`; nil when it is not in the tree.
    func position(ofAccessory id: String) -> Int? { accessoryIndex[id] }

    /// The characteristic `iid` of `accessories[a]` (`position(ofAccessory:)`).
    func characteristic(_ iid: UInt64, ofAccessoryAt a: Int) -> CharacteristicNode? {
        // Every value change and answer looks here. By index: `first(where:)` copied each node
        // it passed (a retain and release of each of its references), ~1 k instructions a `set`.
        let services = accessories[a].services
        for s in services.indices {
            for c in services[s].characteristics.indices where services[s].characteristics[c].address.iid == iid {
                return services[s].characteristics[c]
            }
        }
        return nil
    }

    public func characteristic(topic: String) -> CharacteristicNode? {
        guard let slash = topic.lastIndex(of: "/"), let (a, s) = serviceByTopic[String(topic[..<slash])] else {
            return nil
        }
        let slug = topic[topic.index(after: slash)...]
        // By index, as `characteristic(_:)`: no copy of the nodes passed over.
        let characteristics = accessories[a].services[s].characteristics
        for c in characteristics.indices where characteristics[c].slug == slug { return characteristics[c] }
        return nil
    }

    public func service(topic: String) -> (AccessoryNode, ServiceNode)? {
        guard let (a, s) = serviceByTopic[topic] else { return nil }
        return (accessories[a], accessories[a].services[s])
    }

    public var addresses: [CharacteristicAddress] {
        var out: [CharacteristicAddress] = []
        out.reserveCapacity(characteristicCount)
        for accessory in accessories {
            for service in accessory.services {
                for c in service.characteristics { out.append(c.address) }
            }
        }
        return out
    }
}

extension ScopeFilter {
    /// A room is listed in the tree unless the room lists exclude it.
    func admits(roomOnly room: Room) -> Bool {
        let allow = config.rooms.allow.map { Set($0.map(Self.fold)) }
        let deny = Set(config.rooms.deny.map(Self.fold))
        let keys = [Self.fold(room.name), Self.fold(room.id), Slug.make(room.name)]
        if keys.contains(where: deny.contains) { return false }
        guard let allow else { return true }
        return keys.contains(where: allow.contains)
    }
}
