import Foundation
import HomeModel
import Logging

// The HAP source following its accessories on the network: the stored host and port are the
// last known address, replaced (and saved) when mDNS says otherwise; a failed connection asks
// mDNS afresh before the next retry; a new configuration number re-reads `/accessories`.

extension HAPSource {
    /// Runs the browser (a child of `run()`'s group) and applies what it says until it ends.
    /// When it cannot run, the stored addresses are all there is.
    func follow(_ browser: HAPBrowser) async {
        let events = browser.events()
        await withDiscardingTaskGroup { group in
            group.addTask { for await event in events { await self.apply(event) } }
            do {
                try await browser.run()
            } catch {
                logger.warning("accessories are not followed on the network: \(error)")
            }
        }
    }

    /// The served pairing with this pairing id; mDNS may spell it in another case.
    private func servedPairingID(_ id: String) -> String? {
        if pairings[id] != nil { return id }
        return pairings.keys.first { $0.caseInsensitiveCompare(id) == .orderedSame }
    }

    /// What mDNS says about an accessory, applied to its pairing.
    func apply(_ event: HAPBrowser.Event) async {
        // A removal (goodbye, expiry) changes nothing: the last known address stays, and the
        // connection loop finds out by itself whether the accessory still answers there.
        guard case .updated(let found) = event, let id = servedPairingID(found.id), var pairing = pairings[id],
            !found.addresses.isEmpty
        else { return }
        announced[id] = found.addresses
        let moved = !found.addresses.contains(pairing.host) || found.port != pairing.port
        let oldConfiguration = pairing.configurationNumber
        guard moved || oldConfiguration != found.configurationNumber else { return }
        if moved {
            logger.info(
                "accessory \(id) is now at \(found.host):\(found.port) (was \(pairing.host):\(pairing.port))")
            // Keep the address in use when the accessory still has it (multi-homed).
            if !found.addresses.contains(pairing.host) { pairing.host = found.host }
            pairing.port = found.port
        }
        pairing.configurationNumber = found.configurationNumber
        keep(pairing, id)
        if moved {
            // A connection to the old address is to an accessory that is gone from there.
            if let c = connections[id] { await c.close() }
            nudged.insert(id)
        } else if let old = oldConfiguration, old != found.configurationNumber {
            await configurationChanged(id, from: old, to: found.configurationNumber)
        }
    }

    /// Called when a paired accessory announces a new configuration number (`c#`): its
    /// attribute database changed (firmware update, a bridge that gained or lost an
    /// accessory). Re-reads `/accessories` on the open session and reports the difference as
    /// accessoryAdded/Changed/Removed events — the same path as after a reconnect — then
    /// subscribes to the events of what is new; the session and the subscriptions of what did
    /// not change stay. When not connected, the next connection re-reads it anyway.
    func configurationChanged(_ pairingID: String, from old: Int, to new: Int) async {
        guard let connection = connections[pairingID], let pairing = pairings[pairingID],
            let token = currentToken(pairingID)
        else { return }
        logger.info("accessory \(pairingID) changed its configuration (c# \(old) → \(new)); reading it again")
        do throws(HAPError) {
            try await refresh(pairing, token: token, connection: connection)
            guard connections[pairingID] === connection else { return }
            try await subscribeAll(pairingID, connection: connection)
            setReachable(pairingID, true)
        } catch {
            logger.warning("cannot read the new configuration of accessory \(pairingID): \(error.message)")
        }
    }

    /// The accessory answered (and verified) at `host`, another of its announced addresses
    /// than `tried`'s, which did not answer first: the next connection tries `host` first.
    /// Nothing changes when mDNS moved the pairing meanwhile.
    func answered(_ pairingID: String, at host: String, insteadOf tried: HAPPairing) {
        guard var pairing = pairings[pairingID], pairing.host == tried.host, pairing.port == tried.port else { return }
        logger.info("accessory \(pairingID) answers at \(host), not first at \(pairing.host)")
        pairing.host = host
        keep(pairing, pairingID)
    }

    /// Serves `pairing` from now on and saves it; a failed save leaves the running gateway
    /// with the new address and the file with the old one, said in the log.
    private func keep(_ pairing: HAPPairing, _ pairingID: String) {
        pairings[pairingID] = pairing
        do {
            try store.save(pairing)
        } catch {
            logger.warning("cannot save the new address of accessory \(pairingID): \(error.message)")
        }
    }

    /// Whether the Thread browser has heard an accessory announced as `_hap._udp` at `host`
    /// and `port`: `pair` without a transport then pairs over CoAP.
    public func isAnnouncedAsThread(host: String, port: Int) async -> Bool {
        guard let threadBrowser else { return false }
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        return await threadBrowser.accessories().contains { found in
            found.port == port
                && (found.host.caseInsensitiveCompare(bare) == .orderedSame
                    || found.addresses.contains { $0.caseInsensitiveCompare(bare) == .orderedSame })
        }
    }

    /// Asks mDNS for the accessory afresh (after a failed connection) and applies the answer.
    func lookUp(_ pairingID: String, timeout: Double) async {
        let browser = pairings[pairingID]?.isThread == true ? threadBrowser : browser
        guard let browser, let found = await browser.lookup(id: pairingID, timeout: timeout) else { return }
        await apply(.updated(found))
    }

    /// Waits `seconds` before a retry, or less when mDNS saw the accessory at a new address.
    /// Returns whether it was cut short that way.
    func pause(_ pairingID: String, seconds: Double) async -> Bool {
        let end = Date().addingTimeInterval(max(0, seconds))
        while true {
            if nudged.remove(pairingID) != nil { return true }
            let left = end.timeIntervalSinceNow
            if left <= 0 || Task.isCancelled { return false }
            // Short slices: a nudge is seen within 50 ms, and the loop stays cancellable.
            try? await Task.sleep(nanoseconds: UInt64(min(left, 0.05) * 1_000_000_000))
        }
    }
}
