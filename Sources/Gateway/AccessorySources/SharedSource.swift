public import HomeModel
import ServiceLifecycle
import Synchronization

/// One source served by several homes' gateways (`lease(_:)` gives each its own view): events and
/// requests go straight through, and a characteristic's notifications stay on while any gateway
/// wants them. Without this, a gateway whose home an accessory left would turn off the
/// notifications the accessory's new home had just turned on.
public final class SharedSource: AccessorySource {
    /// Who wants each characteristic's notifications, shared by every view of one source.
    final class Ledger: Sendable {
        /// Each gateway's characteristics, by holder: almost always one gateway, so one set per
        /// gateway, kept by accessory. (A `Set` of holders per characteristic cost 39–44 MB at
        /// 10,000 accessories.)
        struct State {
            var held: [Int: CharacteristicAddressSet] = [:]

            /// Whether a gateway other than `holder` wants `address`.
            func heldByOthers(_ address: CharacteristicAddress, than holder: Int) -> Bool {
                held.contains { $0.key != holder && $0.value.contains(address) }
            }
        }
        let state = Mutex(State())
    }

    let base: any AccessorySource
    private let ledger: Ledger
    /// Whose view this is: each gateway's differs.
    let holder: Int

    public convenience init(_ base: any AccessorySource) {
        self.init(base, ledger: Ledger(), holder: 0)
    }

    private init(_ base: any AccessorySource, ledger: Ledger, holder: Int) {
        self.base = base
        self.ledger = ledger
        self.holder = holder
    }

    /// The view of gateway `holder` (distinct for each gateway).
    public func lease(_ holder: Int) -> SharedSource {
        SharedSource(base, ledger: ledger, holder: holder)
    }

    public var sourceName: String { base.sourceName }
    public func accessories() async -> [Accessory] { await base.accessories() }
    public func events() -> EventStream<SourceEvent> { base.events() }

    public func read(_ address: CharacteristicAddress) async throws(AccessoryError) -> CharacteristicValue {
        try await base.read(address)
    }

    public func write(_ address: CharacteristicAddress, value: CharacteristicValue) async throws(AccessoryError) {
        try await base.write(address, value: value)
    }

    public func identify(accessoryID: String) async throws(AccessoryError) {
        try await base.identify(accessoryID: accessoryID)
    }

    /// Turns a characteristic's notifications on at the source when the first gateway wants
    /// them, off when the last one no longer does.
    public func setNotifications(enabled: Bool, for addresses: [CharacteristicAddress]) async -> [CharacteristicAddress:
        AccessoryError]
    {
        let holder = self.holder
        let base = self.base
        let changed: [CharacteristicAddress] = ledger.state.withLock { ledger in
            var changed: [CharacteristicAddress] = []
            for address in addresses {
                let others = ledger.heldByOthers(address, than: holder)
                if enabled {
                    if ledger.held[holder, default: CharacteristicAddressSet()].insert(address), !others {
                        changed.append(address)
                    }
                } else if ledger.held[holder]?.remove(address) == true, !others {
                    changed.append(address)
                }
            }
            return changed
        }
        // Called from the caller's own task, as a source without homes is: each gateway's
        // calls come one at a time from its notification loop.
        guard !changed.isEmpty else { return [:] }
        let failures = await base.setNotifications(enabled: enabled, for: changed)
        if enabled, !failures.isEmpty {
            // Not on at the source: this gateway holds nothing there, and the next that asks
            // is passed to the source again.
            ledger.state.withLock { ledger in
                for address in failures.keys { ledger.held[holder]?.remove(address) }
            }
        }
        return failures
    }

    /// Lets go of every characteristic this view holds (its gateway stopped serving): those no
    /// other gateway wants are turned off at the source.
    public func releaseAll() async {
        let held = ledger.state.withLock { ledger in ledger.held[holder]?.sorted ?? [] }
        _ = await setNotifications(enabled: false, for: held)
    }

    public func run() async throws {
        try await base.run()
    }
}
