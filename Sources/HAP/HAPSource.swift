import Foundation
public import HomeModel
public import Logging
import ServiceLifecycle

/// Accessories of every paired HAP accessory server in the store, kept connected: pair-verify
/// on each connection, events subscribed, reconnect with backoff, `/accessories` refetched after
/// each reconnect (differences become added/removed/changed events).
public actor HAPSource: AccessorySource {
    public nonisolated let sourceName = "hap"
    public nonisolated let store: HAPPairingStore
    let logger: Logger
    let pollInterval: Double
    let connectTimeout: Double
    let backoff: (initial: Double, factor: Double, max: Double)
    private let hub = EventHub<SourceEvent>()

    private var pairings: [String: HAPPairing] = [:]
    private var accessoriesByID: [String: Accessory] = [:]
    private var order: [String] = []
    private var connections: [String: HAPConnection] = [:]
    /// Characteristics the gateway turned notifications off for.
    private var notificationsOff: Set<CharacteristicAddress> = []

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
    private var loops: [String: Loop] = [:]
    /// Loops for `run()` to start: pairings added before or while it runs.
    private let starts: AsyncStream<(String, UUID)>.Continuation
    private let startStream: AsyncStream<(String, UUID)>
    private var isRunning = false
    private var hasRun = false

    public init(
        store: HAPPairingStore, logger: Logger = Logger(label: "homemqtt.hap"), pollInterval: Double = 60,
        connectTimeout: Double = 5, backoff: (initial: Double, factor: Double, max: Double) = (0.5, 1.5, 60)
    ) {
        self.store = store
        self.logger = logger
        self.pollInterval = pollInterval
        self.connectTimeout = connectTimeout
        self.backoff = backoff
        (startStream, starts) = AsyncStream.makeStream(of: (String, UUID).self)
    }

    public nonisolated func events() -> AsyncStream<SourceEvent> { hub.subscribe() }

    public func accessories() -> [Accessory] { order.compactMap { accessoriesByID[$0] } }

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
        try? await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
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

    private func isCurrent(_ pairingID: String, _ token: UUID) -> Bool { loops[pairingID]?.token == token }

    private func attempted(_ pairingID: String, _ token: UUID) {
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

    // MARK: connection life

    /// Keeps one accessory server connected until cancelled or its pairing is removed.
    private func connectionLoop(_ pairingID: String, token: UUID) async {
        var delay = backoff.initial
        while !Task.isCancelled && isCurrent(pairingID, token) {
            guard let pairing = pairings[pairingID] else { return }
            do throws(HAPError) {
                let connection = try await HAPConnection.connect(host: pairing.host, port: pairing.port, timeout: connectTimeout, logger: logger)
                do throws(HAPError) {
                    try await connection.verify(pairing)
                    try await refresh(pairing, token: token, connection: connection)
                    connections[pairingID] = connection
                    delay = backoff.initial
                    // Reachable only once events are on: a change made by the accessory right
                    // after it is announced reachable must arrive as an event.
                    try await subscribeAll(pairingID, connection: connection)
                    setReachable(pairingID, true)
                    logger.info("connected to accessory \(pairingID) at \(pairing.host):\(pairing.port)")
                    attempted(pairingID, token)
                    await serve(pairingID, connection: connection)
                } catch {
                    await connection.close()
                    throw error
                }
                if let reason = await connection.closeReason, !Task.isCancelled, isCurrent(pairingID, token) {
                    logger.warning("lost accessory \(pairingID): \(reason.message)")
                }
            } catch {
                if !Task.isCancelled && isCurrent(pairingID, token) {
                    logger.warning("accessory \(pairingID) at \(pairing.host):\(pairing.port): \(error.message); retrying in \(String(format: "%.1f", delay)) s")
                }
            }
            attempted(pairingID, token)
            // A loop whose pairing was removed leaves the connections and accessories alone:
            // they are gone, or belong to a newer loop of the same pairing.
            guard isCurrent(pairingID, token) else { return }
            if let c = connections.removeValue(forKey: pairingID) { await c.close() }
            setReachable(pairingID, false)
            if Task.isCancelled { return }
            do {
                try await Task.sleep(nanoseconds: UInt64(delay * 1_000_000_000))
            } catch { return }
            delay = min(delay * backoff.factor, backoff.max)
        }
    }

    /// Consumes events until the connection closes; polls what cannot notify.
    private func serve(_ pairingID: String, connection: HAPConnection) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await message in connection.events {
                    await self.applyEvent(pairingID, message)
                }
            }
            // A poll interval of 0 turns polling off (the config's meaning), not into a busy loop.
            if pollInterval > 0 {
                group.addTask {
                    while !Task.isCancelled {
                        do { try await Task.sleep(nanoseconds: UInt64(self.pollInterval * 1_000_000_000)) } catch { return }
                        await self.poll(pairingID, connection: connection)
                    }
                }
            }
            // When the events stream ends the connection is gone: stop polling too.
            await group.next()
            group.cancelAll()
        }
    }

    private func applyEvent(_ pairingID: String, _ message: HAPHTTPMessage) {
        for (id, json) in HAPConnection.eventValues(message) {
            update(pairingID: pairingID, id: id, json: json, emit: true)
        }
    }

    private func poll(_ pairingID: String, connection: HAPConnection) async {
        var ids: [HAPCharacteristicID] = []
        for acc in accessoriesFor(pairingID) {
            for s in acc.services {
                for c in s.characteristics where c.metadata.permissions.contains(.read) && !c.metadata.permissions.contains(.notify) {
                    ids.append(HAPCharacteristicID(aid: acc.aid, iid: c.iid))
                }
            }
        }
        guard !ids.isEmpty, let results = try? await connection.readCharacteristics(ids) else { return }
        for (id, r) in results {
            if case .success(let json) = r { update(pairingID: pairingID, id: id, json: json, emit: true) }
        }
    }

    /// Records a value from the accessory; emits `valueUpdated` when it changed.
    @discardableResult
    private func update(pairingID: String, id: HAPCharacteristicID, json: JSONValue, emit: Bool) -> CharacteristicValue? {
        let accID = Self.accessoryID(pairingID, id.aid)
        guard var acc = accessoriesByID[accID] else { return nil }
        for si in acc.services.indices {
            if let ci = acc.services[si].characteristics.firstIndex(where: { $0.iid == id.iid }) {
                let format = acc.services[si].characteristics[ci].metadata.format
                guard let value = (try? HAPAccessoryJSON.convert(json, format: format)) ?? nil else { return nil }
                let old = acc.services[si].characteristics[ci].value
                acc.services[si].characteristics[ci].value = value
                accessoriesByID[accID] = acc
                if emit && old != value {
                    hub.yield(.valueUpdated(CharacteristicAddress(accessoryID: accID, iid: id.iid), value))
                }
                return value
            }
        }
        return nil
    }

    private func accessoriesFor(_ pairingID: String) -> [Accessory] {
        let prefix = "hap:\(pairingID):"
        return order.filter { $0.hasPrefix(prefix) }.compactMap { accessoriesByID[$0] }
    }

    static func accessoryID(_ pairingID: String, _ aid: UInt64) -> String { "hap:\(pairingID):\(aid)" }

    /// `hap:<pairing id>:<aid>` → (pairing id, aid); pairing ids contain colons.
    static func parseAccessoryID(_ id: String) -> (String, UInt64)? {
        guard id.hasPrefix("hap:"), let colon = id.lastIndex(of: ":"), let aid = UInt64(id[id.index(after: colon)...]) else { return nil }
        let pairingID = String(id[id.index(id.startIndex, offsetBy: 4)..<colon])
        return pairingID.isEmpty ? nil : (pairingID, aid)
    }

    /// Fetches `/accessories` and turns differences from what we knew into events.
    private func refresh(_ pairing: HAPPairing, token: UUID, connection: HAPConnection) async throws(HAPError) {
        let json = try await connection.accessoriesJSON()
        guard isCurrent(pairing.accessoryPairingID, token) else { throw HAPError.closed("the pairing was removed") }
        let fresh: [Accessory]
        do {
            fresh = try HAPAccessoryJSON.parse(json: json, idPrefix: pairing.idPrefix, category: pairing.category)
        } catch {
            throw HAPError(code: .protocolError, message: "the accessory's /accessories does not describe accessories: \(error.message)")
        }
        let prefix = pairing.idPrefix + ":"
        let freshIDs = Set(fresh.map(\.id))
        for oldID in order where oldID.hasPrefix(prefix) && !freshIDs.contains(oldID) {
            accessoriesByID[oldID] = nil
            hub.yield(.accessoryRemoved(id: oldID))
        }
        order.removeAll { $0.hasPrefix(prefix) && !freshIDs.contains($0) }
        for var acc in fresh {
            if let old = accessoriesByID[acc.id] {
                // Reachability changes are reported by setReachable once the session is up.
                acc.isReachable = old.isReachable
                accessoriesByID[acc.id] = acc
                if Self.structure(old) != Self.structure(acc) {
                    hub.yield(.accessoryChanged(acc))
                } else {
                    // Same accessory: report values that moved while we were away.
                    for s in acc.services {
                        for c in s.characteristics {
                            let before = old.characteristic(iid: c.iid)?.1.value
                            if let v = c.value, v != before {
                                hub.yield(.valueUpdated(CharacteristicAddress(accessoryID: acc.id, iid: c.iid), v))
                            }
                        }
                    }
                }
            } else {
                accessoriesByID[acc.id] = acc
                order.append(acc.id)
                hub.yield(.accessoryAdded(acc))
            }
        }
    }

    /// An accessory without its values and reachability, for telling "changed" from "same".
    static func structure(_ a: Accessory) -> Accessory {
        var s = a
        s.isReachable = true
        for i in s.services.indices {
            for j in s.services[i].characteristics.indices { s.services[i].characteristics[j].value = nil }
        }
        return s
    }

    private func setReachable(_ pairingID: String, _ reachable: Bool) {
        for var acc in accessoriesFor(pairingID) where acc.isReachable != reachable {
            acc.isReachable = reachable
            accessoriesByID[acc.id] = acc
            hub.yield(.reachabilityChanged(id: acc.id, isReachable: reachable))
        }
    }

    /// One `PUT /characteristics` per accessory with `ev: true` for its notifying characteristics.
    private func subscribeAll(_ pairingID: String, connection: HAPConnection) async throws(HAPError) {
        for acc in accessoriesFor(pairingID) {
            var items: [HAPCharacteristicID: [String: JSONValue]] = [:]
            for s in acc.services {
                for c in s.characteristics where c.metadata.permissions.contains(.notify)
                    && !notificationsOff.contains(CharacteristicAddress(accessoryID: acc.id, iid: c.iid)) {
                    items[HAPCharacteristicID(aid: acc.aid, iid: c.iid)] = ["ev": .bool(true)]
                }
            }
            let failures = try await connection.writeCharacteristics(items)
            for (id, err) in failures {
                logger.debug("accessory \(pairingID) refused events for \(id): \(err.message)")
            }
        }
    }

    // MARK: AccessorySource operations

    private func locate(_ address: CharacteristicAddress) throws(AccessoryError) -> (HAPConnection, HAPCharacteristicID, Characteristic) {
        guard let (pairingID, aid) = Self.parseAccessoryID(address.accessoryID),
              let acc = accessoriesByID[address.accessoryID] else {
            throw AccessoryError(.doesNotExist, "no HAP accessory \(address.accessoryID)")
        }
        guard let (_, c) = acc.characteristic(iid: address.iid) else {
            throw AccessoryError(.doesNotExist, "accessory \(address.accessoryID) has no characteristic \(address.iid)")
        }
        guard let connection = connections[pairingID] else {
            throw AccessoryError(.communicationFailure, "accessory \(address.accessoryID) is unreachable")
        }
        return (connection, HAPCharacteristicID(aid: aid, iid: address.iid), c)
    }

    public func read(_ address: CharacteristicAddress) async throws(AccessoryError) -> CharacteristicValue {
        let (connection, id, c) = try locate(address)
        guard c.metadata.permissions.contains(.read) else {
            throw AccessoryError(.writeOnly, "\(address) cannot be read")
        }
        let results: [HAPCharacteristicID: Result<JSONValue, AccessoryError>]
        do {
            results = try await connection.readCharacteristics([id])
        } catch {
            throw error.accessoryError
        }
        switch results[id] {
        case .success(let json)?:
            guard let (pairingID, _) = Self.parseAccessoryID(address.accessoryID),
                  let value = update(pairingID: pairingID, id: id, json: json, emit: true) else {
                throw AccessoryError(.communicationFailure, "the accessory sent a value for \(address) that is not a valid \(c.metadata.format.rawValue)")
            }
            return value
        case .failure(let e)?:
            throw e
        case nil:
            throw AccessoryError(.communicationFailure, "no answer for \(address)")
        }
    }

    public func write(_ address: CharacteristicAddress, value: CharacteristicValue) async throws(AccessoryError) {
        let (connection, id, c) = try locate(address)
        guard c.metadata.permissions.contains(.write) else {
            throw AccessoryError(.readOnly, "\(address) cannot be written")
        }
        let json = HAPAccessoryJSON.json(for: value, format: c.metadata.format)
        let failures: [HAPCharacteristicID: AccessoryError]
        do {
            failures = try await connection.writeCharacteristics([id: ["value": json]], timed: c.metadata.permissions.contains(.timedWrite))
        } catch {
            throw error.accessoryError
        }
        if let e = failures[id] { throw e }
        // The accessory does not send events to the controller that wrote the value.
        if c.metadata.permissions.contains(.read), let (pairingID, _) = Self.parseAccessoryID(address.accessoryID) {
            update(pairingID: pairingID, id: id, json: json, emit: true)
        }
    }

    public func setNotifications(enabled: Bool, for addresses: [CharacteristicAddress]) async -> [CharacteristicAddress: AccessoryError] {
        var failures: [CharacteristicAddress: AccessoryError] = [:]
        var byConnection: [ObjectIdentifier: (HAPConnection, [HAPCharacteristicID: [String: JSONValue]], [HAPCharacteristicID: CharacteristicAddress])] = [:]
        for address in addresses {
            if enabled { notificationsOff.remove(address) } else { notificationsOff.insert(address) }
            do throws(AccessoryError) {
                let (connection, id, c) = try locate(address)
                guard c.metadata.permissions.contains(.notify) else {
                    failures[address] = AccessoryError(.notificationNotSupported, "\(address) does not notify")
                    continue
                }
                let key = ObjectIdentifier(connection)
                var entry = byConnection[key] ?? (connection, [:], [:])
                entry.1[id] = ["ev": .bool(enabled)]
                entry.2[id] = address
                byConnection[key] = entry
            } catch {
                failures[address] = error
            }
        }
        for (_, (connection, items, map)) in byConnection {
            do {
                for (id, e) in try await connection.writeCharacteristics(items) {
                    if let a = map[id] { failures[a] = e }
                }
            } catch {
                for a in map.values { failures[a] = error.accessoryError }
            }
        }
        return failures
    }

    public func identify(accessoryID: String) async throws(AccessoryError) {
        guard let acc = accessoriesByID[accessoryID] else {
            throw AccessoryError(.doesNotExist, "no HAP accessory \(accessoryID)")
        }
        let identifyType = StandardUUID.longForm("14")
        guard let c = acc.services.first(where: { $0.type == StandardUUID.accessoryInformation })?.characteristic(type: identifyType) else {
            throw AccessoryError(.doesNotExist, "accessory \(accessoryID) has no Identify characteristic")
        }
        try await write(CharacteristicAddress(accessoryID: accessoryID, iid: c.iid), value: .bool(true))
    }
}
