import Foundation
public import HomeModel
public import Logging
public import MDNS
import ServiceLifecycle

// The HAP source's state and lifecycle: its stored state, `run()`, and pairings added and
// removed while it runs, each with its own connection loop.

/// Accessories of every paired HAP accessory server in the store, kept connected: pair-verify
/// on each connection, events subscribed, reconnect with backoff, `/accessories` refetched after
/// each reconnect (differences become added/removed/changed events). Each accessory is followed
/// on the network by its pairing id (mDNS, `HAPBrowser`): a new address or port is used and
/// saved, and a new configuration number (`c#`) re-reads `/accessories`.
public actor HAPSource: AccessorySource {
    /// A short name for logs and the health report, as `AccessorySource` asks.
    public nonisolated let sourceName = "hap"
    /// Where the pairings are kept: `run()` serves every pairing saved there.
    public nonisolated let store: HAPPairingStore
    /// Connection, pairing and retry messages.
    let logger: Logger
    /// Seconds between reads of the characteristics that cannot notify; 0 turns polling off.
    let pollInterval: Double
    /// How long one connection attempt may take, in seconds.
    let connectTimeout: Double
    /// The delay before a reconnect: its first value, the factor it grows by, its ceiling.
    let backoff: (initial: Double, factor: Double, max: Double)
    /// Hands every event to each `events()` stream.
    let hub = EventHub<SourceEvent>()
    /// Follows the paired accessories on the network; nil when told not to (`followsNetwork`).
    let browser: HAPBrowser?
    /// Follows the Thread accessories (`_hap._udp`); nil without `threadLinks` or `followsNetwork`.
    let threadBrowser: HAPBrowser?
    /// Makes the CoAP link of a Thread pairing's session; nil: Thread pairings are not reached.
    let threadLinks: HAPThreadLinkMaker?
    /// Seconds without an answer from a Thread accessory before a probe asks whether it is there.
    let threadProbeInterval: Double
    /// Where mDNS looks for accessories (`mdns-interfaces`): the browser's, and `discover`'s.
    public nonisolated let mdnsInterfaces: MDNSInterfaces
    /// Pairings whose loop should stop waiting and connect now: mDNS saw them at a new address.
    var nudged: Set<String> = []
    /// This gateway's id (`GatewayIdentity`): an accessory whose route holds it passed through
    /// this gateway already and is left out (`GatewayRoute`); nil: nothing is left out.
    public nonisolated let gatewayID: String?
    /// The accessories left out of each pairing because they came back (see `gatewayID`), by
    /// pairing id: each is logged once, when it is first left out.
    var cameBack: [String: [Accessory]] = [:]

    /// The pairings served now, by accessory pairing id.
    var pairings: [String: HAPPairing] = [:]
    /// Every address mDNS last gave for each pairing (the stored one is the last that
    /// answered): a connection tries them all (`HAPConnection.connect(firstOf:)`).
    var announced: [String: [String]] = [:]
    /// Every accessory of the served pairings, by id (`hap:<pairing id>:<aid>`).
    var accessoriesByID: [String: Accessory] = [:]
    /// Accessory ids in the order they first came: the order `accessories()` lists them in.
    var order: [String] = []
    /// The verified session of each pairing connected now (IP or Thread); operations go through it.
    var connections: [String: any HAPSession] = [:]
    /// Characteristics the gateway turned notifications off for.
    var notificationsOff: Set<CharacteristicAddress> = []
    /// Connection handshakes (TCP connect and pair-verify) running
    /// now, and the loops waiting for a slot (see `SetupSlots`).
    let setups = SetupSlots()

    /// Each served pairing's connection loop (see `Loop`).
    private var loops: [String: Loop] = [:]
    /// Loops for `run()` to start: pairings added before or while it runs.
    private let starts: AsyncStream<(String, UUID)>.Continuation
    /// What `run()` reads the loops to start from: the other end of `starts`.
    private let startStream: AsyncStream<(String, UUID)>
    /// Whether `run()` is serving: only then does `add(pairing:)` wait for a first attempt.
    private var isRunning = false
    /// `run()` runs once; a second run only logs an error.
    private var hasRun = false

    /// One connection loop per pairing. The token tells a loop of a pairing that was removed
    /// (and perhaps added again) from the current one, so a stale loop never touches state.
    private struct Loop {
        var token: UUID
        var stop: AsyncStream<Void>.Continuation
        var stopSignal: AsyncStream<Void>
        /// Callers of `add(pairing:)` waiting for the first connection attempt.
        var waiters: [CheckedContinuation<Void, Never>] = []
        var attempted = false
    }

    public init(
        store: HAPPairingStore, logger: Logger = Logger(label: "homemqtt.hap"), pollInterval: Double = 60,
        connectTimeout: Double = 5, backoff: (initial: Double, factor: Double, max: Double) = (0.5, 1.5, 60),
        followsNetwork: Bool = true, mdnsInterfaces: MDNSInterfaces = .all, gatewayID: String? = nil,
        threadLinks: HAPThreadLinkMaker? = nil, threadProbeInterval: Double = 15
    ) {
        self.store = store
        self.gatewayID = gatewayID
        self.logger = logger
        self.pollInterval = pollInterval
        self.connectTimeout = connectTimeout
        self.backoff = backoff
        self.mdnsInterfaces = mdnsInterfaces
        browser = followsNetwork ? HAPBrowser(interfaces: mdnsInterfaces, logger: logger) : nil
        threadBrowser =
            followsNetwork && threadLinks != nil
            ? HAPBrowser(service: HAPDiscovery.threadService, interfaces: mdnsInterfaces, logger: logger) : nil
        self.threadLinks = threadLinks
        self.threadProbeInterval = threadProbeInterval
        (startStream, starts) = AsyncStream.makeStream(of: (String, UUID).self)
    }

    public nonisolated func events() -> EventStream<SourceEvent> { hub.subscribe() }

    public func accessories() -> [Accessory] { order.compactMap { accessoriesByID[$0] } }

    /// The accessories of a pairing left out because they passed through this gateway already.
    public func cameBack(pairingID: String) -> [Accessory] { cameBack[pairingID] ?? [] }

    /// Whether the accessory server of this pairing is connected and verified now.
    public func isConnected(pairingID: String) -> Bool { connections[pairingID] != nil }

    public func run() async throws {
        guard !hasRun else {
            logger.error("HAP source run twice; the second run does nothing")
            return
        }
        hasRun = true
        let loaded: [HAPPairing]
        do {
            loaded = try store.all()
        } catch {
            logger.error("cannot load HAP pairings: \(error.message)")
            throw error
        }
        // Pairings added before run() are already registered; the store has them too.
        for p in loaded where loops[p.accessoryPairingID] == nil { register(p) }
        isRunning = true
        logger.info("HAP source starting with \(pairings.count) paired accessory server(s)")
        // Graceful shutdown cancels the connection loops; each closes its connection.
        let startStream = self.startStream
        await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
                for browser in [self.browser, self.threadBrowser].compactMap({ $0 }) {
                    group.addTask { await self.follow(browser) }
                }
                for await (pairingID, token) in startStream {
                    group.addTask { await self.supervise(pairingID, token: token) }
                }
                group.cancelAll()
            }
        }
        isRunning = false
        for id in Array(loops.keys) { finishLoop(id) }
        await closeAll()
        hub.finish()
    }

    // MARK: pairings added and removed while running

    /// Starts serving a pairing (already saved in the store) while running: connects, reports
    /// its accessories as added and keeps it connected. Returns once the first connection
    /// attempt has ended, with the accessories it brought (none if the accessory could not be
    /// reached yet; the source keeps retrying). Adding a pairing that is served replaces it.
    @discardableResult
    public func add(pairing: HAPPairing) async -> [Accessory] {
        let id = pairing.accessoryPairingID
        if loops[id] != nil { await remove(pairingID: id) }
        let token = register(pairing)
        guard isRunning else { return [] }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            if var loop = loops[id], loop.token == token, !loop.attempted {
                loop.waiters.append(c)
                loops[id] = loop
            } else {
                c.resume()
            }
        }
        return accessoriesFor(id)
    }

    /// Stops serving a pairing: disconnects and reports its accessories as removed. The
    /// pairing file is the caller's business (`HAPController.unpair` removes it).
    public func remove(pairingID: String) async {
        guard loops[pairingID] != nil else { return }
        pairings[pairingID] = nil
        announced[pairingID] = nil
        cameBack[pairingID] = nil
        nudged.remove(pairingID)
        finishLoop(pairingID)
        let prefix = "hap:\(pairingID):"
        let gone = order.filter { $0.hasPrefix(prefix) }
        order.removeAll { $0.hasPrefix(prefix) }
        for id in gone {
            accessoriesByID[id] = nil
            hub.yield(.accessoryRemoved(id: id))
        }
        notificationsOff = notificationsOff.filter { !$0.accessoryID.hasPrefix(prefix) }
        if let c = connections.removeValue(forKey: pairingID) { await c.close() }
    }

    /// The ids of the pairings served now.
    public func pairingIDs() -> [String] { pairings.keys.sorted() }

    /// `hap:<pairing id>:<aid>` → the pairing id; nil for an id that is not a HAP accessory's.
    public nonisolated static func pairingID(forAccessoryID id: String) -> String? {
        parseAccessoryID(id)?.0
    }

    @discardableResult
    private func register(_ pairing: HAPPairing) -> UUID {
        let token = UUID()
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self)
        pairings[pairing.accessoryPairingID] = pairing
        loops[pairing.accessoryPairingID] = Loop(token: token, stop: continuation, stopSignal: stream)
        starts.yield((pairing.accessoryPairingID, token))
        return token
    }

    /// Ends a loop's life: its stop signal fires and whoever waits for it is released.
    private func finishLoop(_ pairingID: String) {
        guard let loop = loops.removeValue(forKey: pairingID) else { return }
        loop.stop.finish()
        for w in loop.waiters { w.resume() }
    }

    func isCurrent(_ pairingID: String, _ token: UUID) -> Bool { loops[pairingID]?.token == token }

    /// The token of the pairing's current loop, for work done outside it (a `c#` re-read).
    func currentToken(_ pairingID: String) -> UUID? { loops[pairingID]?.token }

    func attempted(_ pairingID: String, _ token: UUID) {
        guard var loop = loops[pairingID], loop.token == token, !loop.attempted else { return }
        loop.attempted = true
        let waiters = loop.waiters
        loop.waiters = []
        loops[pairingID] = loop
        for w in waiters { w.resume() }
    }

    /// Runs a pairing's connection loop until the pairing is removed or the source stops.
    private func supervise(_ pairingID: String, token: UUID) async {
        guard let stopSignal = loops[pairingID].flatMap({ $0.token == token ? $0.stopSignal : nil }) else { return }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.connectionLoop(pairingID, token: token) }
            group.addTask { for await _ in stopSignal {} }
            await group.next()
            group.cancelAll()
        }
        attempted(pairingID, token)
    }

    private func closeAll() async {
        for (_, c) in connections { await c.close() }
        connections = [:]
    }
}
