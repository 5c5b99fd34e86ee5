// A set of characteristic addresses kept by accessory, for the sets that hold most of a home:
// which characteristics notify. At 10,000 accessories that is 250,000 addresses; a
// `Set<CharacteristicAddress>` cost ~80 bytes each (19 MB in the simulator alone), a sorted
// array of iids per accessory ~8.

/// Characteristic addresses grouped by accessory: each accessory's iids in a sorted array.
public struct CharacteristicAddressSet: Sendable, Equatable {
    private var byAccessory: [String: [UInt64]] = [:]
    /// How many addresses it holds.
    public private(set) var count = 0

    public init() {}

    public init(_ addresses: some Sequence<CharacteristicAddress>) {
        for address in addresses { insert(address) }
    }

    public var isEmpty: Bool { count == 0 }

    public func contains(_ address: CharacteristicAddress) -> Bool {
        guard let iids = byAccessory[address.accessoryID] else { return false }
        return Self.position(of: address.iid, in: iids).found
    }

    /// The iids held of one accessory, in order; nil when none. With `contains(_:in:)`, for a
    /// caller that asks about several characteristics of one accessory in a row.
    public func iids(ofAccessory id: String) -> [UInt64]? { byAccessory[id] }

    /// Whether `iids` (from `iids(ofAccessory:)`) holds `iid`.
    public static func contains(_ iid: UInt64, in iids: [UInt64]) -> Bool { position(of: iid, in: iids).found }

    /// Adds `address`; true when it was not there yet.
    @discardableResult
    public mutating func insert(_ address: CharacteristicAddress) -> Bool {
        // In place: the accessory's array is not copied.
        let inserted = Self.insert(address.iid, into: &byAccessory[address.accessoryID, default: []])
        if inserted { count += 1 }
        return inserted
    }

    /// Removes `address`; true when it was there.
    @discardableResult
    public mutating func remove(_ address: CharacteristicAddress) -> Bool {
        guard byAccessory[address.accessoryID] != nil else { return false }
        let removed = Self.remove(address.iid, from: &byAccessory[address.accessoryID, default: []])
        if removed { count -= 1 }
        if byAccessory[address.accessoryID]?.isEmpty == true { byAccessory[address.accessoryID] = nil }
        return removed
    }

    private static func insert(_ iid: UInt64, into iids: inout [UInt64]) -> Bool {
        // Addresses mostly come in iid order: appended without a search.
        if iids.last.map({ $0 < iid }) ?? true {
            iids.append(iid)
            return true
        }
        let (index, found) = position(of: iid, in: iids)
        if found { return false }
        iids.insert(iid, at: index)
        return true
    }

    private static func remove(_ iid: UInt64, from iids: inout [UInt64]) -> Bool {
        let (index, found) = position(of: iid, in: iids)
        if found { iids.remove(at: index) }
        return found
    }

    /// Removes every address of one accessory.
    public mutating func removeAccessory(_ accessoryID: String) {
        count -= byAccessory.removeValue(forKey: accessoryID)?.count ?? 0
    }

    /// Every address in `CharacteristicAddress` order (by accessory id, then iid).
    public var sorted: [CharacteristicAddress] {
        var out: [CharacteristicAddress] = []
        out.reserveCapacity(count)
        for id in byAccessory.keys.sorted() {
            for iid in byAccessory[id] ?? [] { out.append(CharacteristicAddress(accessoryID: id, iid: iid)) }
        }
        return out
    }

    /// The addresses not in `other`, in `CharacteristicAddress` order, a few thousand at a time:
    /// each batch of whole accessories, closed once it holds `size` (so a batch exceeds `size`
    /// by at most one accessory's addresses). The first notification sync of 10,000
    /// accessories made them as one array and filtered it into another: ~20 MB at the
    /// start-up's peak, for a moment.
    public func batches(notIn other: CharacteristicAddressSet, size: Int) -> Batches {
        Batches(set: self, other: other, ids: byAccessory.keys.sorted(), size: max(size, 1))
    }

    public struct Batches: Sequence, IteratorProtocol {
        fileprivate let set: CharacteristicAddressSet
        fileprivate let other: CharacteristicAddressSet
        fileprivate let ids: [String]
        fileprivate let size: Int
        private var index = 0

        fileprivate init(set: CharacteristicAddressSet, other: CharacteristicAddressSet, ids: [String], size: Int) {
            (self.set, self.other, self.ids, self.size) = (set, other, ids, size)
        }

        public mutating func next() -> [CharacteristicAddress]? {
            var batch: [CharacteristicAddress] = []
            while index < ids.count, batch.count < size {
                let id = ids[index]
                index += 1
                let theirs = other.byAccessory[id] ?? []
                for iid in set.byAccessory[id] ?? [] where !CharacteristicAddressSet.position(of: iid, in: theirs).found
                {
                    batch.append(CharacteristicAddress(accessoryID: id, iid: iid))
                }
            }
            return batch.isEmpty ? nil : batch
        }
    }

    /// Every address, as a `Set`.
    public var addresses: Set<CharacteristicAddress> {
        var out = Set<CharacteristicAddress>(minimumCapacity: count)
        for (id, iids) in byAccessory {
            for iid in iids { out.insert(CharacteristicAddress(accessoryID: id, iid: iid)) }
        }
        return out
    }

    /// Where `iid` is in the sorted `iids`, or would go.
    fileprivate static func position(of iid: UInt64, in iids: [UInt64]) -> (index: Int, found: Bool) {
        var (low, high) = (0, iids.count)
        while low < high {
            let middle = (low + high) / 2
            if iids[middle] < iid { low = middle + 1 } else { high = middle }
        }
        return (low, low < iids.count && iids[low] == iid)
    }
}
