import Foundation
public import HomeModel
public import Logging

// The HAP source's session with a Thread accessory (issue 42): a `HAPCoAPController` over a
// link the composition root makes (libcoap, in HAPThread: the HAP module knows no CoAP
// library), seen through `HAPSession` like an IP connection. UDP has no connection to lose:
// the accessory is found gone by a request that gets no answer — the source's own, or a probe
// after `probeInterval` s without one (as IP's TCP keepalive finds a silent accessory). A
// session the accessory forgot (a 4.04: it restarted) or whose counters went out of step is
// verified again by the controller; its subscriptions went with it, so this session sends them
// again and reads what changed meanwhile, handed on like events.

/// One Thread accessory's carrier: POSTs to it, and the events it PUTs back.
public protocol HAPThreadLink: HAPCoAPExchange {
    /// Hands the events the accessory PUTs to `controller` until closed or cancelled.
    func deliverEvents(to controller: HAPCoAPController) async
    /// Frees the socket; `deliverEvents` ends.
    func close() async
}

/// Makes the link to a Thread accessory at host and port (the composition root's, on libcoap).
public typealias HAPThreadLinkMaker = @Sendable (_ host: String, _ port: Int) throws(HAPError) -> any HAPThreadLink

/// A verified HAP-over-CoAP session with a paired Thread accessory (one accessory, aid 1).
public actor HAPThreadSession: HAPSession {
    public nonisolated let host: String
    public nonisolated let controller: HAPCoAPController
    let link: any HAPThreadLink
    let probeInterval: Double
    let logger: Logger
    public private(set) var closeReason: HAPError?
    /// The characteristics events are on for: sent again after a new pair-verify.
    private var subscribed: Set<UInt16> = []
    /// The controller's pair-verifies this session has seen (a higher count: a new session).
    private var verifications: Int
    /// When a request last got an answer: a probe is due `probeInterval` s later.
    private var lastAnswer = ContinuousClock.now
    /// Values read after a new pair-verify, handed on by `serveEvents` with the events.
    private let caughtUp: AsyncStream<(HAPCharacteristicID, JSONValue)>
    private let caughtUpInput: AsyncStream<(HAPCharacteristicID, JSONValue)>.Continuation

    init(host: String, controller: HAPCoAPController, link: any HAPThreadLink, probeInterval: Double, logger: Logger)
        async
    {
        self.host = host
        self.controller = controller
        self.link = link
        self.probeInterval = probeInterval
        self.logger = logger
        verifications = await controller.verifications
        (caughtUp, caughtUpInput) = AsyncStream.makeStream()
    }

    /// Pair-verify with the first of `hosts` that answers at the pairing's port.
    public static func open(
        _ pairing: HAPPairing, hosts: [String], makeLink: HAPThreadLinkMaker, probeInterval: Double, logger: Logger
    ) async throws(HAPError) -> HAPThreadSession {
        var failure = HAPError(
            code: .unreachable, message: "no address for the accessory \(pairing.accessoryPairingID)")
        for host in hosts {
            let link = try makeLink(host, pairing.port)
            var reached = pairing
            reached.host = host
            let controller = HAPCoAPController(pairing: reached, exchange: link, logger: logger)
            do {
                try await controller.verify()
                return await HAPThreadSession(
                    host: host, controller: controller, link: link, probeInterval: probeInterval, logger: logger)
            } catch {
                await link.close()
                failure = error
            }
        }
        throw failure
    }

    static let aid: UInt64 = 1

    // MARK: HAPSession

    public func accessories(of pairing: HAPPairing) async throws(HAPError) -> (
        accessories: [Accessory], problems: [String]
    ) {
        var problems: [String] = []
        let tree = try await answered { () async throws(HAPError) in
            try await controller.accessories(problems: &problems)
        }
        return (tree, problems)
    }

    public func readCharacteristics(_ ids: [HAPCharacteristicID]) async throws(HAPError) -> [HAPCharacteristicID:
        Result<JSONValue, AccessoryError>]
    {
        let iids = try Self.iids(ids)
        let results = try await answered { () async throws(HAPError) in try await controller.read(iids) }
        var out: [HAPCharacteristicID: Result<JSONValue, AccessoryError>] = [:]
        for (iid, result) in results {
            let id = HAPCharacteristicID(aid: Self.aid, iid: UInt64(iid))
            switch result {
            case .success(let value): out[id] = .success(await json(value, iid))
            case .failure(let error): out[id] = .failure(error.accessoryError)
            }
        }
        return out
    }

    public func writeCharacteristics(_ items: [HAPCharacteristicID: [String: JSONValue]], timed: Bool)
        async throws(HAPError) -> [HAPCharacteristicID: AccessoryError]
    {
        var failures: [HAPCharacteristicID: AccessoryError] = [:]
        var on: [HAPCharacteristicID] = []
        var off: [HAPCharacteristicID] = []
        for (id, fields) in items.sorted(by: { $0.key < $1.key }) {
            let iid = try Self.iids([id])[0]
            if let json = fields["value"] {
                do throws(HAPError) {
                    try await write(iid, json, timed: timed)
                } catch  where error.code == .accessoryStatus {
                    failures[id] = error.accessoryError
                }
            }
            if case .bool(let ev)? = fields["ev"] {
                if ev { on.append(id) } else { off.append(id) }
            }
        }
        for (ids, enable) in [(on, true), (off, false)] where !ids.isEmpty {
            let iids = try Self.iids(ids)
            do throws(HAPError) {
                try await answered { () async throws(HAPError) in try await controller.subscribe(iids, enable) }
                if enable { subscribed.formUnion(iids) } else { subscribed.subtract(iids) }
            } catch  where error.code == .accessoryStatus {
                // The batch's refusal names one characteristic; all of it stands refused.
                for id in ids { failures[id] = error.accessoryError }
            }
        }
        return failures
    }

    public func serveEvents(_ body: @escaping @Sendable ([(HAPCharacteristicID, JSONValue)]) async -> Void) async {
        guard closeReason == nil else { return }
        let (controller, link, caughtUp) = (controller, link, caughtUp)
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await link.deliverEvents(to: controller) }
            group.addTask {
                for await event in controller.events {
                    guard let value = event.value else { continue }
                    let iid = UInt64(event.iid)
                    await body([(HAPCharacteristicID(aid: Self.aid, iid: iid), await self.json(value, event.iid))])
                }
            }
            group.addTask { for await (id, json) in caughtUp { await body([(id, json)]) } }
            // The probe: returns when the accessory is found gone, or the session closed.
            group.addTask { await self.probe() }
            await group.next()
            group.cancelAll()
        }
    }

    public func close() async {
        guard closeReason == nil else { return }
        closeReason = HAPError(code: .closed, message: "the session was closed")
        caughtUpInput.finish()
        await link.close()
    }

    // MARK: liveness and new sessions

    /// Sends a request when none was answered for `probeInterval` s; returns once one fails
    /// (then the session is closed with its reason) or the session is closed.
    private func probe() async {
        while closeReason == nil && !Task.isCancelled {
            let due = lastAnswer + .seconds(probeInterval)
            if due > .now {
                do { try await Task.sleep(until: due) } catch { return }
                continue
            }
            do throws(HAPError) {
                // The smallest request that needs the session: a read of one characteristic.
                let iid = await controller.database?.accessories.first?.services.first?.characteristics
                    .first { $0.permissions.contains(.read) }?.iid
                if let iid {
                    _ = try await answered { () async throws(HAPError) in try await controller.read([iid]) }
                } else {
                    _ = try await answered { () async throws(HAPError) in try await controller.attributeDatabase() }
                }
            } catch {
                guard closeReason == nil else { return }
                logger.info("the Thread accessory \(controller.pairing.accessoryPairingID) does not answer: \(error)")
                closeReason = error
                caughtUpInput.finish()
                await link.close()
                return
            }
        }
    }

    /// Runs a request; notes the answer, and a new pair-verify the controller made meanwhile.
    private func answered<T>(_ request: () async throws(HAPError) -> T) async throws(HAPError) -> T {
        if let closeReason { throw closeReason }
        let result = try await request()
        lastAnswer = .now
        await renewIfVerifiedAgain()
        return result
    }

    /// After a new pair-verify (the accessory restarted, or counters out of step) events are
    /// off on the accessory: on again, and what was subscribed read, since changes meanwhile
    /// sent no event.
    private func renewIfVerifiedAgain() async {
        let now = await controller.verifications
        guard now > verifications else { return }
        verifications = now
        let iids = subscribed.sorted()
        logger.info(
            "the Thread accessory \(controller.pairing.accessoryPairingID) has a new session; subscribing again")
        guard !iids.isEmpty else { return }
        do {
            try await controller.subscribe(iids)
            let readable = await readableOf(iids)
            for case (let iid, .success(let value)) in try await controller.read(readable) {
                caughtUpInput.yield((HAPCharacteristicID(aid: Self.aid, iid: UInt64(iid)), await json(value, iid)))
            }
        } catch {
            logger.warning("cannot subscribe again to the Thread accessory's events: \(error.message)")
        }
    }

    private func readableOf(_ iids: [UInt16]) async -> [UInt16] {
        var out: [UInt16] = []
        for iid in iids where await controller.characteristic(iid)?.permissions.contains(.read) ?? false {
            out.append(iid)
        }
        return out
    }

    // MARK: values

    private func write(_ iid: UInt16, _ json: JSONValue, timed: Bool) async throws(HAPError) {
        guard let format = await controller.format(of: iid) else {
            throw HAPError.proto("characteristic \(iid) is not in the attribute database read")
        }
        let converted: CharacteristicValue?
        do { converted = try HAPAccessoryJSON.convert(json, format: format) } catch {
            throw HAPError(code: .protocolError, message: "not a \(format.rawValue): \(json)")
        }
        guard let value = converted else { throw HAPError(code: .protocolError, message: "no value to write") }
        try await answered { () async throws(HAPError) in
            if timed {
                try await controller.timedWrite(iid, value)
            } else {
                try await controller.write(iid, value)
            }
        }
    }

    /// A value as HAP's JSON (the IP wire format the source reads).
    private func json(_ value: CharacteristicValue, _ iid: UInt16) async -> JSONValue {
        guard let format = await controller.format(of: iid) else { return .null }
        return HAPAccessoryJSON.json(for: value, format: format)
    }

    static func iids(_ ids: [HAPCharacteristicID]) throws(HAPError) -> [UInt16] {
        var out: [UInt16] = []
        for id in ids {
            guard id.aid == aid, let iid = UInt16(exactly: id.iid) else {
                throw HAPError.proto("a Thread accessory has no characteristic \(id)")
            }
            out.append(iid)
        }
        return out
    }
}
