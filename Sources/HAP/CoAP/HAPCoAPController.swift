public import HomeModel
public import Logging

// The controller's side of HAP over CoAP (issue 42), beside `HAPController`/`HAPConnection` for
// IP: pair-setup by setup code over `/1` and pair-verify over `/2` (the IP controller's own
// steps, `PairingProtocol`, over a CoAP `PairingChannel`), then encrypted PDUs on `/` through
// any `HAPCoAPExchange`. Operations are in HAPCoAPController+Operations.swift.

extension ErrorCode {
    /// The accessory answered a PDU with a HAP-BLE status other than success.
    public static let accessoryStatus = ErrorCode(rawValue: "accessory-status")
}

/// Pairing's TLVs over CoAP: a POST to `/1` or `/2` answered 2.04 with a TLV.
struct CoAPPairingChannel: PairingChannel {
    let exchange: any HAPCoAPExchange
    let host: String
    let port: Int
    var setupPath: String { HAPCoAPPath.pairSetup }
    var verifyPath: String { HAPCoAPPath.pairVerify }

    func post(_ path: String, _ body: [UInt8], step: String) async throws(HAPError) -> [UInt8] {
        let reply = try await exchange.post(path, body)
        // A refusal comes as a TLV error with 2.04; a 4.00 may carry one too.
        guard reply.code == .changed || (reply.code == .badRequest && !reply.payload.isEmpty) else {
            throw HAPError.proto("the accessory answered \(step) with CoAP \(reply.code)")
        }
        return reply.payload
    }
}

/// A characteristic's new value, as an event brought it (aid 1: a Thread accessory is one).
public struct HAPCoAPEvent: Sendable, Hashable {
    public var iid: UInt16
    /// nil when the value does not fit the characteristic's format (or the database was not
    /// read yet, so the format is unknown); `bytes` has what came.
    public var value: CharacteristicValue?
    public var bytes: [UInt8]
}

/// One paired HAP-over-CoAP accessory. Requests go one at a time (the session's counters
/// advance in the order they are sealed); a 4.04 on `/` (the accessory forgot the session) or
/// an answer no nearby counter opens makes it verify again and send the request once more.
public actor HAPCoAPController {
    public nonisolated let pairing: HAPPairing
    let exchange: any HAPCoAPExchange
    let logger: Logger
    var cipher: CoAPSessionCipher?
    /// The tree last read (`attributeDatabase()`): the formats of values and events.
    var database: ThreadAttributeDatabase?
    private var nextTID: UInt8 = 0
    private var busy = false
    private var waiters: [CheckedContinuation<Void, Never>] = []
    /// Values of subscribed characteristics as the accessory PUTs them.
    public nonisolated let events: AsyncStream<HAPCoAPEvent>
    private let eventInput: AsyncStream<HAPCoAPEvent>.Continuation
    /// Pair-verifies that made a session, for the owner's diagnostics.
    public private(set) var verifications = 0

    public init(pairing: HAPPairing, exchange: any HAPCoAPExchange, logger: Logger) {
        self.pairing = pairing
        self.exchange = exchange
        self.logger = logger
        (events, eventInput) = AsyncStream.makeStream(of: HAPCoAPEvent.self)
    }

    deinit { eventInput.finish() }

    /// Pair-setup with the setup code; returns the new pairing (the caller keeps it).
    /// `host`/`port` are recorded in it, as over IP.
    public static func pair(
        exchange: any HAPCoAPExchange, host: String, port: Int, setupCode: String, featureFlags: Int = 0
    ) async throws(HAPError) -> HAPPairing {
        try await PairingProtocol.pairSetup(
            CoAPPairingChannel(exchange: exchange, host: host, port: port), setupCode: setupCode,
            featureFlags: featureFlags)
    }

    /// `/0`: an unpaired accessory identifies itself. False when it refuses (it is paired).
    public static func identify(exchange: any HAPCoAPExchange) async throws(HAPError) -> Bool {
        try await exchange.post(HAPCoAPPath.identify, []).code == .changed
    }

    /// Pair-verify now (requests verify on their own when there is no session).
    public func verify() async throws(HAPError) {
        await acquire()
        defer { release() }
        try await verifyHeld()
    }

    private func verifyHeld() async throws(HAPError) {
        cipher = nil
        let channel = CoAPPairingChannel(exchange: exchange, host: pairing.host, port: pairing.port)
        let shared = try await PairingProtocol.pairVerify(channel, pairing: pairing)
        cipher = CoAPSessionCipher(keys: CoAPSessionKeys(sharedSecret: shared), role: .controller)
        verifications += 1
    }

    /// Ends the session on our side (the next request verifies again).
    public func dropSession() { cipher = nil }

    // MARK: Requests

    func tid() -> UInt8 {
        nextTID &+= 1
        return nextTID
    }

    /// Sends `requests` in one payload and returns their responses, in order.
    func send(_ requests: [CoAPRequestPDU]) async throws(HAPError) -> [CoAPResponsePDU] {
        let plain: [UInt8]
        do throws(CoAPCodecError) { plain = try CoAPRequestPDU.encode(requests) } catch { throw error.hapError }
        let opened = try await exchangeSealed(plain)
        do throws(CoAPCodecError) {
            return try CoAPResponsePDU.decode(opened, answering: requests)
        } catch {
            throw error.hapError
        }
    }

    /// Seals `plain`, posts it to `/` and opens the answer; verifies first when there is no
    /// session, and once again after a 4.04 or an answer that does not open.
    func exchangeSealed(_ plain: [UInt8]) async throws(HAPError) -> [UInt8] {
        await acquire()
        defer { release() }
        for attempt in 1...2 {
            if cipher == nil { try await verifyHeld() }
            guard let sealed = cipher?.seal(plain) else { continue }
            let reply = try await exchange.post(HAPCoAPPath.pdus, sealed)
            if reply.code == .notFound {
                logger.info("the accessory \(pairing.accessoryPairingID) has no session for us (4.04); verifying again")
                cipher = nil
                if attempt == 1 { continue }
                throw HAPError(
                    code: .closed, message: "the accessory \(pairing.accessoryPairingID) dropped a fresh session (4.04)"
                )
            }
            guard reply.code == .changed else {
                throw HAPError.proto(
                    "the accessory answered a request with CoAP \(reply.code)"
                        + (reply.payload.isEmpty ? "" : ": \(String(decoding: reply.payload, as: UTF8.self))"))
            }
            do throws(CoAPCodecError) {
                guard var c = cipher else { continue }
                let opened = try c.open(reply.payload)
                cipher = c
                return opened
            } catch {
                // Out of step beyond the window: a fresh session, and the request again (a
                // write is then made twice; writes of a value are idempotent).
                logger.info("the accessory's answer does not open (\(error)); verifying again")
                cipher = nil
                if attempt == 1 { continue }
                throw error.hapError
            }
        }
        throw HAPError(code: .closed, message: "no session with the accessory \(pairing.accessoryPairingID)")
    }

    /// One request; its response, which must be a success.
    func sendOne(_ request: CoAPRequestPDU, what: String) async throws(HAPError) -> CoAPResponsePDU {
        let response = try await send([request])[0]
        guard response.status == .success else { throw Self.statusError(response.status, what) }
        return response
    }

    static func statusError(_ status: CoAPPDUStatus, _ what: String) -> HAPError {
        HAPError(code: .accessoryStatus, message: "the accessory refused \(what): \(status)")
    }

    private func acquire() async {
        if !busy {
            busy = true
            return
        }
        await withCheckedContinuation { waiters.append($0) }
    }

    private func release() {
        if waiters.isEmpty { busy = false } else { waiters.removeFirst().resume() }
    }

    // MARK: Events

    /// An event PUT to our `/` (the transport calls this): 2.03 when it opens, 4.04 when not
    /// (no session, or out of step: aiohomekit's answer too).
    public func receiveEvent(_ payload: [UInt8]) -> CoAPCode {
        guard var c = cipher else { return .notFound }
        let plain: [UInt8]
        do throws(CoAPCodecError) {
            plain = try c.openEvent(payload)
        } catch {
            logger.info("an event from \(pairing.accessoryPairingID) does not open: \(error)")
            return .notFound
        }
        cipher = c
        let pdus: [CoAPEventPDU]
        do throws(CoAPCodecError) {
            pdus = try CoAPEventPDU.decodeAll(plain)
        } catch {
            logger.info("a malformed event from \(pairing.accessoryPairingID): \(error)")
            return .badRequest
        }
        for pdu in pdus {
            let bytes = (try? HAPBLEBody.decode(pdu.body).value) ?? nil ?? []
            let value = format(of: pdu.iid).flatMap { try? HAPBLEValue.decode(bytes, format: $0) }
            eventInput.yield(HAPCoAPEvent(iid: pdu.iid, value: value, bytes: bytes))
        }
        return .valid
    }

    func characteristic(_ iid: UInt16) -> ThreadAttributeDatabase.Characteristic? {
        database?.accessories.first?.services.lazy.flatMap(\.characteristics).first { $0.iid == iid }
    }

    func format(of iid: UInt16) -> CharacteristicFormat? { characteristic(iid)?.format }
}
