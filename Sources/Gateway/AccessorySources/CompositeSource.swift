public import HomeModel
import ServiceLifecycle
import Synchronization

/// Several sources seen as one, so that the gateway has exactly one `AccessorySource`.
/// Accessory ids are unique across sources by their prefixes (`sim:`, `hap:`); an id is routed
/// to the source that last reported it.
public final class CompositeSource: AccessorySource {
    public let sources: [any AccessorySource]
    private let owners = Mutex<[String: Int]>([:])
    /// Every source's events, merged by `run()`, for any number of readers.
    private let hub = EventHub<SourceEvent>()
    /// Each source's stream, taken at once so that nothing it reports before `run()` starts
    /// forwarding is lost.
    private let streams: [(index: Int, events: EventStream<SourceEvent>)]

    public init(_ sources: [any AccessorySource]) {
        self.sources = sources
        streams = sources.enumerated().map { ($0.offset, $0.element.events()) }
    }

    public var sourceName: String { sources.map(\.sourceName).joined(separator: "+") }

    public func accessories() async -> [Accessory] {
        var all: [Accessory] = []
        for (index, source) in sources.enumerated() {
            let list = await source.accessories()
            owners.withLock { map in for accessory in list { map[accessory.id] = index } }
            all += list
        }
        return all
    }

    public func events() -> EventStream<SourceEvent> { hub.subscribe() }

    private func source(for accessoryID: String) throws(AccessoryError) -> any AccessorySource {
        guard let index = owners.withLock({ $0[accessoryID] }) else {
            throw AccessoryError(.doesNotExist, "no source has an accessory '\(accessoryID)'")
        }
        return sources[index]
    }

    public func read(_ address: CharacteristicAddress) async throws(AccessoryError) -> CharacteristicValue {
        try await source(for: address.accessoryID).read(address)
    }

    public func write(_ address: CharacteristicAddress, value: CharacteristicValue) async throws(AccessoryError) {
        try await source(for: address.accessoryID).write(address, value: value)
    }

    public func setNotifications(enabled: Bool, for addresses: [CharacteristicAddress]) async -> [CharacteristicAddress:
        AccessoryError]
    {
        var byIndex: [Int: [CharacteristicAddress]] = [:]
        var failures: [CharacteristicAddress: AccessoryError] = [:]
        let map = owners.withLock { $0 }
        for address in addresses {
            if let index = map[address.accessoryID] {
                byIndex[index, default: []].append(address)
            } else {
                failures[address] = AccessoryError(.doesNotExist, "unknown accessory '\(address.accessoryID)'")
            }
        }
        for (index, list) in byIndex {
            failures.merge(await sources[index].setNotifications(enabled: enabled, for: list)) { a, _ in a }
        }
        return failures
    }

    public func identify(accessoryID: String) async throws(AccessoryError) {
        try await source(for: accessoryID).identify(accessoryID: accessoryID)
    }

    /// Runs every source and forwards their events, each source's in its order; the merged
    /// streams end when every source's has, or when this ends.
    public func run() async throws {
        defer { hub.finish() }
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask {
                await withDiscardingTaskGroup { forwarders in
                    for (index, events) in self.streams {
                        forwarders.addTask { await self.forward(events, from: index) }
                    }
                }
                self.hub.finish()
            }
            for source in sources {
                group.addTask { try await source.run() }
            }
        }
    }

    private func forward(_ events: EventStream<SourceEvent>, from index: Int) async {
        for await event in events {
            switch event {
            case .accessoryAdded(let accessory), .accessoryChanged(let accessory):
                owners.withLock { $0[accessory.id] = index }
            default: break
            }
            hub.yield(event)
        }
    }
}
