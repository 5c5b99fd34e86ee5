import HomeModel

/// The home as the gateway serves it: the accessories as their source described them, the
/// values reported since, the home database's view (rooms, names, removed accessories), the
/// scope, and the topic tree made of all of these. Pure: no broker, no tasks; the gateway's
/// actor mutates it through these methods, and its tests need nothing else.
struct ServedHome {
    private(set) var scope: ScopeFilter
    private(set) var accessories: [String: Accessory] = [:]
    /// The order accessories arrived in: topics and collisions are decided in it.
    private(set) var order: [String] = []
    /// Values reported since each accessory was described (the values it came with are in
    /// `accessories`), rather than a table of every value repeating what they hold.
    private(set) var values: [CharacteristicAddress: CharacteristicValue] = [:]
    /// Accessories removed from the home while their source still reports them; the home
    /// database keeps the list, this is its copy plus those on their way out.
    private(set) var removed: Set<String> = []
    /// The home as the database last said; nil only before the first read.
    private(set) var home: Home?
    /// The home the tree was last built from.
    private(set) var treeHome: Home?
    private(set) var tree: TopicTree

    init(scope: ScopeFilter, base: String) {
        self.scope = scope
        tree = TopicTree(base: base)
    }

    /// A characteristic's value: the last one reported, else the one its accessory came with.
    func currentValue(_ address: CharacteristicAddress) -> CharacteristicValue? {
        Self.currentValue(address, values: values, accessories: accessories)
    }

    /// `currentValue(_:)` from the two tables it reads (`Gateway.currentValue(_:)`).
    static func currentValue(
        _ address: CharacteristicAddress, values: [CharacteristicAddress: CharacteristicValue],
        accessories: [String: Accessory]
    ) -> CharacteristicValue? {
        if let reported = values[address] { return reported }
        return describedValue(address, accessories: accessories)
    }

    /// The value a characteristic's accessory came with.
    static func describedValue(_ address: CharacteristicAddress, accessories: [String: Accessory])
        -> CharacteristicValue?
    {
        for service in accessories[address.accessoryID]?.services ?? [] {
            if let found = service.characteristics.first(where: { $0.iid == address.iid }) { return found.value }
        }
        return nil
    }

    /// The values a new description of a known accessory (a HAP accessory read again after a
    /// reconnect) carries, which no event may have reported: to be taken as updates like any
    /// other, while the old description still says what was there (`describe` after them). A
    /// button's last press is no such value: only an event is a press.
    func values(describedIn accessory: Accessory) -> [(CharacteristicAddress, CharacteristicValue)] {
        guard accessories[accessory.id] != nil else { return [] }
        var updates: [(CharacteristicAddress, CharacteristicValue)] = []
        for service in accessory.services {
            for characteristic in service.characteristics {
                guard let value = characteristic.value, !characteristic.isEvent else { continue }
                updates.append((CharacteristicAddress(accessoryID: accessory.id, iid: characteristic.iid), value))
            }
        }
        return updates
    }

    /// Keeps an accessory's description; a new accessory comes after those known.
    mutating func describe(_ accessory: Accessory) {
        if accessories[accessory.id] == nil { order.append(accessory.id) }
        accessories[accessory.id] = accessory
    }

    mutating func forget(_ id: String) {
        accessories[id] = nil
        order.removeAll { $0 == id }
        values = values.filter { $0.key.accessoryID != id }
    }

    /// Keeps a reported value; returns the one it replaces.
    mutating func record(_ value: CharacteristicValue, at address: CharacteristicAddress) -> CharacteristicValue? {
        // One look-up while the characteristic has reported before: the value replaced comes back.
        if let reported = values.updateValue(value, forKey: address) { return reported }
        return Self.describedValue(address, accessories: accessories)
    }

    /// Whether the accessory's reachability changed.
    mutating func setReachable(_ id: String, _ reachable: Bool) -> Bool {
        guard var accessory = accessories[id], accessory.isReachable != reachable else { return false }
        accessory.isReachable = reachable
        accessories[id] = accessory
        return true
    }

    /// The home database's latest view.
    mutating func read(_ home: Home) {
        self.home = home
        removed.formUnion(home.removedAccessoryIDs)
    }

    mutating func markRemoved(_ id: String) { removed.insert(id) }

    @discardableResult
    mutating func unmarkRemoved(_ id: String) -> Bool { removed.remove(id) != nil }

    mutating func setScope(_ scope: ScopeFilter) { self.scope = scope }

    /// Whether the home differs from the one the tree was built from.
    var homeChanged: Bool { home != treeHome }

    /// Builds the tree again from the accessories, the home and the scope; returns the old one.
    /// Nothing happens before the home database was first read.
    mutating func rebuildTree() -> TopicTree? {
        guard let home else { return nil }
        let old = tree
        treeHome = home
        tree = TopicTree(
            base: tree.base, accessories: order.filter { !removed.contains($0) }.compactMap { accessories[$0] },
            home: home, scope: scope)
        return old
    }
}
