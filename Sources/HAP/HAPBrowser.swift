import Foundation
public import HomeModel
public import Logging
public import MDNS
public import ServiceLifecycle

// HAP accessories followed on the network by their pairing ids, on top of a generic
// `_hap._tcp.local` browser (`MDNS.MDNSBrowser`: socket, query schedule, known answers, TTLs):
// what is HAP's here is reading the TXT keys (`id`, `c#`, `sf`, …), telling subscribers when
// an accessory appears, moves, changes its `c#`/`sf`, or leaves, and asking afresh for one
// accessory after a failed connection.

/// Follows every HAP accessory on the local network by its pairing id, for as long as `run()`
/// runs (a child of `HAPSource.run()`).
public actor HAPBrowser: Service {
    /// What the browser tells its subscribers.
    public enum Event: Sendable, Hashable {
        /// An accessory was found, or its address, port, `c#`, `sf` or name changed.
        case updated(HAPDiscoveredAccessory)
        /// Its records were withdrawn (goodbye) or expired.
        case removed(id: String)
    }

    let logger: Logger
    private let mdns: MDNSBrowser
    /// `_hap._tcp.local` or `_hap._udp.local`.
    let service: String
    private let hub = EventHub<Event>()
    /// The accessories last published, by upper-cased pairing id.
    private var published: [String: HAPDiscoveredAccessory] = [:]
    private var instances: [String: String] = [:]
    /// `lookup(id:)` callers waiting for a fresh answer, with when they asked.
    private var lookups:
        [UUID: (id: String, since: ContinuousClock.Instant, continuation: CheckedContinuation<Void, Never>)] =
            [:]
    /// Whether `run()` is between its start and its end: a lookup outside it has no answer.
    private var isRunning = false
    /// Each lookup's deadline, for a timer that is a child of `run()`.
    private let lookupTimers: AsyncStream<(token: UUID, deadline: ContinuousClock.Instant)>.Continuation
    private let lookupTimerStream: AsyncStream<(token: UUID, deadline: ContinuousClock.Instant)>

    /// `service`: `_hap._tcp.local` (IP accessories) or `HAPDiscovery.threadService` (Thread ones).
    public init(
        service: String = HAPDiscovery.service, interfaces: MDNSInterfaces = .all,
        logger: Logger = Logger(label: "homemqtt.mdns")
    ) {
        self.logger = logger
        self.service = service
        mdns = MDNSBrowser(service: service, interfaces: interfaces, logger: logger)
        (lookupTimerStream, lookupTimers) = AsyncStream.makeStream()
    }

    /// Events from now on; subscribe before `run()` to miss nothing. They end when `run()` does.
    public nonisolated func events() -> EventStream<Event> { hub.subscribe() }

    /// The accessories known now.
    public func accessories() -> [HAPDiscoveredAccessory] { published.values.sorted { $0.id < $1.id } }

    /// The accessory with this pairing id, as known now.
    public func accessory(id: String) -> HAPDiscoveredAccessory? { published[id.uppercased()] }

    /// Browses until cancelled: the mDNS browser, its updates read into accessories, and a
    /// timer for each lookup, all children of one group. Throws when no socket can be opened;
    /// either way the events end and waiting lookups are released.
    public func run() async throws {
        isRunning = true
        defer {
            isRunning = false
            for (_, l) in lookups { l.continuation.resume() }
            lookups = [:]
            hub.finish()
        }
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { try await self.mdns.run() }
            group.addTask { for await update in self.mdns.updates { await self.apply(update) } }
            group.addTask {
                await withDiscardingTaskGroup { timers in
                    for await timer in self.lookupTimerStream {
                        timers.addTask {
                            // Answered early, the lookup is gone and ending it does nothing.
                            try? await Task.sleep(until: timer.deadline)
                            await self.endLookup(timer.token)
                        }
                    }
                }
            }
        }
    }

    /// Asks the network for this accessory afresh and waits (up to `timeout` seconds) for an
    /// answer; returns what is known then. For a connection that failed: the accessory may
    /// have moved while its old records still looked valid.
    public func lookup(id: String, timeout: Double) async -> HAPDiscoveredAccessory? {
        guard isRunning else { return nil }
        let key = id.uppercased()
        let asked = ContinuousClock.now
        var questions = [DNSMessage.Question(name: HAPDiscovery.service, type: DNSMessage.RecordType.ptr)]
        if let instance = instances[key] {
            questions.append(DNSMessage.Question(name: instance, type: DNSMessage.RecordType.srv))
            questions.append(DNSMessage.Question(name: instance, type: DNSMessage.RecordType.txt))
        }
        // No known answers: every accessory, this one included, answers in full.
        guard await mdns.ask(questions), isRunning else { return nil }
        let token = UUID()
        let deadline = asked + .seconds(max(0, timeout))
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            lookups[token] = (key, asked, c)
            lookupTimers.yield((token, deadline))
        }
        return published[key]
    }

    private func endLookup(_ token: UUID) {
        lookups.removeValue(forKey: token)?.continuation.resume()
    }

    // MARK: receiving

    private func apply(_ update: MDNSBrowser.Update) {
        guard update.changed || !lookups.isEmpty else { return }
        publish(update.records)
        // A lookup is answered by any fresh SRV of its accessory (the answer may repeat what
        // was known: then it is confirmed).
        let answered = Set(
            update.received.compactMap { r -> String? in
                guard case .srv = r.data else { return nil }
                return instances.first { $0.value.lowercased() == r.name.lowercased() }?.key
            })
        guard !answered.isEmpty else { return }
        let now = ContinuousClock.now
        for (token, l) in lookups where answered.contains(l.id) && now >= l.since {
            endLookup(token)
        }
    }

    /// Publishes the differences between what the records describe and what was published:
    /// the accessories described completely (PTR, SRV, TXT with an `id`, an address).
    private func publish(_ records: [DNSMessage.Record]) {
        var current: [String: (instance: String, accessory: HAPDiscoveredAccessory)] = [:]
        for (instance, accessory) in HAPDiscovery.resolve(records, service: service) where !accessory.addresses.isEmpty
        {
            current[accessory.id.uppercased()] = (instance, accessory)
        }
        for (id, entry) in current.sorted(by: { $0.key < $1.key }) {
            instances[id] = entry.instance
            if published[id] != entry.accessory {
                published[id] = entry.accessory
                let a = entry.accessory
                // All of it a LAN peer's words: escaped here as the log handler would, for a
                // logger that does not (HomeModel's `escapingControlCharacters`).
                logger.debug(
                    "mDNS: accessory '\(a.name.escapingControlCharacters)' announced",
                    metadata: [
                        "id": "\(a.id.escapingControlCharacters)", "model": "\(a.model.escapingControlCharacters)",
                        "c#": "\(a.configurationNumber)", "paired": "\(a.isPaired)",
                        "at": "\(a.host.escapingControlCharacters):\(a.port)",
                    ])
                hub.yield(.updated(entry.accessory))
            }
        }
        for id in published.keys.sorted() where current[id] == nil {
            published[id] = nil
            instances[id] = nil
            hub.yield(.removed(id: id))
        }
    }
}
