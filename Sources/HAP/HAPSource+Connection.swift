import Foundation
import HomeModel
import Logging
import Synchronization

// The HAP source's connection loop: reconnects with backoff, re-subscribes events, reports
// reachability; and keeps the accessories and values each connection brings, as events.

extension HAPSource {
    // MARK: connection life

    /// Keeps one accessory server connected until cancelled or its pairing is removed.
    func connectionLoop(_ pairingID: String, token: UUID) async {
        var delay = backoff.initial
        while !Task.isCancelled && isCurrent(pairingID, token) {
            guard pairings[pairingID] != nil, await takeSetupSlot() else { return }
            var holdsSlot = true
            func releaseSlot() {
                if holdsSlot { releaseSetupSlot() }
                holdsSlot = false
            }
            // Read after the wait for a slot: mDNS may have moved the accessory meanwhile.
            guard let pairing = pairings[pairingID], !Task.isCancelled, isCurrent(pairingID, token) else {
                releaseSlot()
                return
            }
            let hosts = [pairing.host] + (announced[pairingID] ?? []).filter { $0 != pairing.host }
            do throws(HAPError) {
                let connection = try await openSession(pairing, hosts: hosts)
                do throws(HAPError) {
                    releaseSlot()
                    // Only the accessory itself (verified) moves the pairing to another address.
                    if connection.host != pairing.host && isCurrent(pairingID, token) {
                        answered(pairingID, at: connection.host, insteadOf: pairing)
                    }
                    try await refresh(pairing, token: token, connection: connection)
                    connections[pairingID] = connection
                    delay = backoff.initial
                    // Reachable only once events are on: a change made by the accessory right
                    // after it is announced reachable must arrive as an event.
                    try await subscribeAll(pairingID, connection: connection)
                    setReachable(pairingID, true)
                    logger.info("connected to accessory \(pairingID) at \(connection.host):\(pairing.port)")
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
                    logger.warning(
                        "accessory \(pairingID) at \(hosts.joined(separator: ", ")) port \(pairing.port): \(error.message); asking the network where it is; retrying within \(String(format: "%.1f", delay)) s, at once if it moved"
                    )
                }
            }
            releaseSlot()
            attempted(pairingID, token)
            // A loop whose pairing was removed leaves the connections and accessories alone:
            // they are gone, or belong to a newer loop of the same pairing.
            guard isCurrent(pairingID, token) else { return }
            if let c = connections.removeValue(forKey: pairingID) { await c.close() }
            setReachable(pairingID, false)
            if Task.isCancelled { return }
            // The accessory may have moved (reboot, DHCP): ask the network before retrying.
            let asked = Date()
            if !nudged.contains(pairingID) { await lookUp(pairingID, timeout: min(1, delay)) }
            let waited = Date().timeIntervalSince(asked)
            if await pause(pairingID, seconds: delay - waited) {
                delay = backoff.initial
            } else {
                delay = min(delay * backoff.factor, backoff.max)
            }
            if Task.isCancelled { return }
        }
    }

    /// A verified session with the pairing's accessory: over TCP, or over CoAP for a Thread one.
    private func openSession(_ pairing: HAPPairing, hosts: [String]) async throws(HAPError) -> any HAPSession {
        guard pairing.isThread else {
            return try await HAPConnection.open(pairing, hosts: hosts, timeout: connectTimeout, logger: logger)
        }
        guard let threadLinks else {
            throw HAPError(code: .unreachable, message: "this gateway was built without HAP over Thread")
        }
        return try await HAPThreadSession.open(
            pairing, hosts: hosts, makeLink: threadLinks, probeInterval: threadProbeInterval, logger: logger)
    }

    /// Consumes events until the session ends; polls what cannot notify.
    private func serve(_ pairingID: String, connection: any HAPSession) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await connection.serveEvents { values in await self.applyEvent(pairingID, values) }
            }
            // A poll interval of 0 turns polling off (the config's meaning), not into a busy loop.
            if pollInterval > 0 {
                group.addTask {
                    while !Task.isCancelled {
                        do { try await Task.sleep(nanoseconds: UInt64(self.pollInterval * 1_000_000_000)) } catch {
                            return
                        }
                        await self.poll(pairingID, connection: connection)
                    }
                }
            }
            // When the events stream ends the connection is gone: stop polling too.
            await group.next()
            group.cancelAll()
        }
    }

    private func applyEvent(_ pairingID: String, _ values: [(HAPCharacteristicID, JSONValue)]) {
        for (id, json) in values { update(pairingID: pairingID, id: id, json: json, emit: true) }
    }

    private func poll(_ pairingID: String, connection: any HAPSession) async {
        var ids: [HAPCharacteristicID] = []
        for acc in accessoriesFor(pairingID) {
            for s in acc.services {
                for c in s.characteristics
                where c.metadata.permissions.contains(.read) && !c.metadata.permissions.contains(.notify) {
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
    func update(pairingID: String, id: HAPCharacteristicID, json: JSONValue, emit: Bool) -> CharacteristicValue? {
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

    func accessoriesFor(_ pairingID: String) -> [Accessory] {
        let prefix = "hap:\(pairingID):"
        return order.filter { $0.hasPrefix(prefix) }.compactMap { accessoriesByID[$0] }
    }

    static func accessoryID(_ pairingID: String, _ aid: UInt64) -> String { "hap:\(pairingID):\(aid)" }

    /// `hap:<pairing id>:<aid>` → (pairing id, aid); pairing ids contain colons.
    static func parseAccessoryID(_ id: String) -> (String, UInt64)? {
        guard id.hasPrefix("hap:"), let colon = id.lastIndex(of: ":"), let aid = UInt64(id[id.index(after: colon)...])
        else { return nil }
        let pairingID = String(id[id.index(id.startIndex, offsetBy: 4)..<colon])
        return pairingID.isEmpty ? nil : (pairingID, aid)
    }

    /// Fetches `/accessories` and turns differences from what we knew into events.
    func refresh(_ pairing: HAPPairing, token: UUID, connection: any HAPSession) async throws(HAPError) {
        let (parsed, problems) = try await connection.accessories(of: pairing)
        guard isCurrent(pairing.accessoryPairingID, token) else { throw HAPError.closed("the pairing was removed") }
        let (fresh, back) = GatewayRoute.partition(parsed, gatewayID: gatewayID)
        noteCameBack(back, pairing.accessoryPairingID)
        for problem in problems {
            logger.warning(
                "a value the accessory sent cannot be read",
                metadata: ["pairing": "\(pairing.accessoryPairingID)", "problem": "\(problem)"])
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

    /// Keeps what came back, and logs each accessory the first time it is left out.
    private func noteCameBack(_ back: [Accessory], _ pairingID: String) {
        let before = Set((cameBack[pairingID] ?? []).map(\.id))
        for a in back where !before.contains(a.id) {
            logger.notice(
                "HAP accessory left out: it came through this gateway already (its route holds this gateway's id)",
                metadata: [
                    "pairing": "\(pairingID)", "accessory": "\(a.id)", "name": "\(a.name)",
                    "route": "\(GatewayRoute.route(of: a).joined(separator: " > "))",
                ])
        }
        cameBack[pairingID] = back.isEmpty ? nil : back
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

    func setReachable(_ pairingID: String, _ reachable: Bool) {
        for var acc in accessoriesFor(pairingID) where acc.isReachable != reachable {
            acc.isReachable = reachable
            accessoriesByID[acc.id] = acc
            hub.yield(.reachabilityChanged(id: acc.id, isReachable: reachable))
        }
    }

    /// One `PUT /characteristics` per accessory with `ev: true` for its notifying characteristics,
    /// then one `GET` of what was subscribed (`readBack`).
    func subscribeAll(_ pairingID: String, connection: any HAPSession) async throws(HAPError) {
        var subscribed: [HAPCharacteristicID] = []
        for acc in accessoriesFor(pairingID) {
            var items: [HAPCharacteristicID: [String: JSONValue]] = [:]
            for s in acc.services {
                for c in s.characteristics
                where c.metadata.permissions.contains(.notify)
                    && !notificationsOff.contains(CharacteristicAddress(accessoryID: acc.id, iid: c.iid))
                {
                    let id = HAPCharacteristicID(aid: acc.aid, iid: c.iid)
                    items[id] = ["ev": .bool(true)]
                    if c.metadata.permissions.contains(.read) { subscribed.append(id) }
                }
            }
            let failures = try await connection.writeCharacteristics(items)
            for (id, err) in failures {
                logger.debug("accessory \(pairingID) refused events for \(id): \(err.message)")
                subscribed.removeAll { $0 == id }
            }
        }
        await readBack(subscribed, pairingID, connection: connection)
    }

    /// Reads characteristics just subscribed and reports what changed: a change between the
    /// values last read (`/accessories`) and the subscription sent no event. The subscription
    /// stands if the read fails; the values then wait for the next event.
    func readBack(_ ids: [HAPCharacteristicID], _ pairingID: String, connection: any HAPSession) async {
        guard !ids.isEmpty else { return }
        do {
            for case (let id, .success(let json)) in try await connection.readCharacteristics(ids) {
                update(pairingID: pairingID, id: id, json: json, emit: true)
            }
        } catch {
            logger.debug("accessory \(pairingID) did not answer a read after subscribing: \(error.message)")
        }
    }
}

/// Connection set-ups in flight, at most `limit`: a home of many accessories starts (or comes
/// back after a network outage) without a storm of simultaneous handshakes, each accessory still
/// with its own backoff. A slot is held for the handshakes, from the TCP connect through
/// pair-verify (at most the connect timeout and two requests); reading `/accessories` and
/// subscribing follow without one.
///
/// Behind a lock of its own, as `Observers` in the gateway: a waiter's cancellation handler
/// (which runs on whatever thread cancels) takes it off the table and resumes it right there,
/// with no hop onto the source's actor.
final class SetupSlots: Sendable {
    static let limit = 8

    private struct Table {
        var inUse = 0
        var next = 0
        /// The loops waiting, in the order they came, by key.
        var waiting: [(key: Int, continuation: CheckedContinuation<Bool, Never>)] = []
    }

    private let table = Mutex(Table())

    /// Waits for a slot; false when the task is cancelled first. On the caller's actor (the
    /// source's): no hop off it and back for a slot that is free.
    func take(isolation: isolated (any Actor)? = #isolation) async -> Bool {
        if Task.isCancelled { return false }
        let key = table.withLock { t in
            t.next += 1
            return t.next
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                // One look under the lock, shared with `release` and the handler: a slot freed
                // meanwhile is taken; a cancellation is seen here or, coming later, finds the
                // waiter on the table and takes it off.
                let answer: Bool? = table.withLock { t in
                    if Task.isCancelled { return false }
                    if t.inUse < Self.limit {
                        t.inUse += 1
                        return true
                    }
                    t.waiting.append((key, continuation))
                    return nil
                }
                if let answer { continuation.resume(returning: answer) }
            }
        } onCancel: {
            let waiter = table.withLock { t in
                t.waiting.firstIndex { $0.key == key }.map { t.waiting.remove(at: $0).continuation }
            }
            waiter?.resume(returning: false)
        }
    }

    /// Hands the slot to the first waiter, or frees it.
    func release() {
        let next = table.withLock { t -> CheckedContinuation<Bool, Never>? in
            if t.waiting.isEmpty {
                t.inUse -= 1
                return nil
            }
            return t.waiting.removeFirst().continuation
        }
        next?.resume(returning: true)
    }
}

extension HAPSource {
    /// Waits for a set-up slot; false when the task is cancelled first.
    func takeSetupSlot() async -> Bool { await setups.take() }

    /// Hands the slot to the first waiter, or frees it.
    func releaseSetupSlot() { setups.release() }
}
