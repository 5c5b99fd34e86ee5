import HomeModel
import Testing

/// `CharacteristicAddressSet` behaves as a `Set<CharacteristicAddress>` would, whatever the order
/// addresses come in.
@Suite struct CharacteristicAddressSetTests {
    static func address(_ accessory: Int, _ iid: UInt64) -> CharacteristicAddress {
        CharacteristicAddress(accessoryID: "sim:a\(accessory)", iid: iid)
    }

    @Test func itAgreesWithASetThroughRandomInsertsAndRemoves() {
        var generator = SystemRandomNumberGenerator()
        var set = CharacteristicAddressSet()
        var reference = Set<CharacteristicAddress>()
        for _ in 0..<5000 {
            let address = Self.address(
                Int.random(in: 0..<7, using: &generator), UInt64.random(in: 1...40, using: &generator))
            if Bool.random(using: &generator) {
                let inserted = set.insert(address)
                #expect(inserted == reference.insert(address).inserted)
            } else {
                let removed = set.remove(address)
                #expect(removed == (reference.remove(address) != nil))
            }
            #expect(set.count == reference.count)
        }
        #expect(set.addresses == reference)
        for accessory in 0..<7 {
            for iid in 1...40 {
                let address = Self.address(accessory, UInt64(iid))
                #expect(set.contains(address) == reference.contains(address))
            }
        }
    }

    @Test func anAccessoryGoesWithAllItsAddresses() {
        var set = CharacteristicAddressSet((1...25).map { Self.address(1, $0) } + (1...3).map { Self.address(2, $0) })
        #expect(set.count == 28)
        set.removeAccessory("sim:a1")
        #expect(set.count == 3)
        #expect(!set.contains(Self.address(1, 5)))
        #expect(set.contains(Self.address(2, 3)))
        set.removeAccessory("sim:nothing")
        #expect(set.count == 3)
        for iid: UInt64 in 1...3 {
            let removed = set.remove(Self.address(2, iid))
            #expect(removed)
        }
        #expect(set.isEmpty && set.addresses.isEmpty)
        let again = set.remove(Self.address(2, 3))
        #expect(!again)
    }

    /// The notification sync's difference: every address of one set not in the other, each
    /// once, in order, in batches of whole accessories that close once they reach the size.
    @Test func itsDifferenceComesInBatchesOfWholeAccessories() {
        var generator = SystemRandomNumberGenerator()
        let all = (0..<40).flatMap { accessory in (1...30).map { Self.address(accessory, UInt64($0)) } }
        let one = CharacteristicAddressSet(all.filter { _ in Bool.random(using: &generator) })
        let other = CharacteristicAddressSet(all.filter { _ in Bool.random(using: &generator) })
        let batches = Array(one.batches(notIn: other, size: 50))
        let expected = one.sorted.filter { !other.contains($0) }
        #expect(batches.flatMap { $0 } == expected)
        for (index, batch) in batches.enumerated() {
            let accessories = Set(batch.map(\.accessoryID))
            // No accessory is split between batches, and a batch stops at the first accessory
            // that takes it to the size.
            for later in batches.dropFirst(index + 1) {
                #expect(accessories.isDisjoint(with: later.map(\.accessoryID)))
            }
            let withoutLast = batch.filter { $0.accessoryID != batch.last?.accessoryID }
            #expect(withoutLast.count < 50)
            #expect(!batch.isEmpty)
        }
        #expect(Array(one.batches(notIn: one, size: 50)).isEmpty)
        #expect(Array(CharacteristicAddressSet().batches(notIn: one, size: 50)).isEmpty)
        #expect(Array(one.batches(notIn: CharacteristicAddressSet(), size: 1_000)) == [one.sorted])
    }
}
