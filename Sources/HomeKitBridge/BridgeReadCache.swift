import Gateway
import HAPServer
import HomeModel
import Synchronization

/// The values a controller's read is answered with at once (`HAPAccessoryDatabase.valuesAtHand`),
/// without a hop to the bridge's actor, a task, or a read from the accessory: the fixed values
/// of information services, and the characteristics the gateway keeps current — those of a
/// reachable accessory that notify every change (`notify` permission), whose value it knows.
///
/// What holds: the table changes only on the bridge's actor, in the order the gateway's view
/// reports (a snapshot replaces it whole: a reachability change brings one, so an unreachable
/// accessory's reads go to the gateway and answer `-70402`); a write the accessory accepted is
/// its value at once, so a read after it on any session says so; everything else (a
/// characteristic that cannot notify and is polled, one whose value is not known yet) is read
/// from the accessory through the gateway, as before.
final class BridgeReadCache: Sendable {
    private let table = Mutex<[HAPCharacteristicID: JSONValue]>([:])

    func replace(_ values: [HAPCharacteristicID: JSONValue]) { table.withLock { $0 = values } }

    func set(_ id: HAPCharacteristicID, _ value: JSONValue) { table.withLock { $0[id] = value } }

    func values(_ ids: [HAPCharacteristicID]) -> [HAPCharacteristicID: JSONValue] {
        table.withLock { table in
            var found: [HAPCharacteristicID: JSONValue] = [:]
            for id in ids { if let value = table[id] { found[id] = value } }
            return found
        }
    }
}

extension BridgeReadCache {
    /// The addresses whose values the gateway keeps current in `published`.
    static func current(in published: TopicTree) -> Set<CharacteristicAddress> {
        var out: Set<CharacteristicAddress> = []
        for node in published.accessories where node.accessory.isReachable {
            for service in node.services {
                for c in service.characteristics
                where !c.isEvent && c.characteristic.metadata.permissions.contains(.notify) {
                    out.insert(c.address)
                }
            }
        }
        return out
    }

    /// The whole table for `tree`: its fixed values, and the current ones known in `values`.
    static func table(
        _ tree: BridgeTree, current: Set<CharacteristicAddress>, values: [CharacteristicAddress: CharacteristicValue]
    ) -> [HAPCharacteristicID: JSONValue] {
        var out: [HAPCharacteristicID: JSONValue] = [:]
        for (id, target) in tree.targets {
            switch target {
            case .fixed(let value): out[id] = value
            case .characteristic(let address, let format):
                if current.contains(address), let value = values[address] { out[id] = BridgeTree.json(value, format) }
            case .identify, .identifyBridge: break
            }
        }
        return out
    }
}
