public import Foundation
public import HAP
public import Logging
import Synchronization

/// A HAP accessory over CoAP, as a HAP-over-Thread accessory is (issue 42): it serves one
/// accessory of a `HAPAccessoryDatabase` (the tree's aid 1, as the IP server serves its tree)
/// with the identity, pairings and setup code of a state directory, as `HAPAccessoryServer`
/// does and through the same pair-setup and pair-verify machines.
///
/// It is transport-free: the owner's transport calls `handle` for each request (`/0` identify,
/// `/1` pair-setup, `/2` pair-verify, `/` encrypted PDUs) and gives it a `HAPCoAPEventSender`
/// for events. CoAP has no connections: a controller is the address its requests come from,
/// one session each, and a new pair-verify from that address replaces its session.
public final class HAPCoAPAccessory: Sendable {
    public struct Configuration: Sendable {
        public var stateDirectory: URL
        public var setupCode: HAPSetupCode
        /// A pair-setup another address began and left this long ago no longer holds the
        /// accessory (there is no connection whose close would free it, as over IP).
        public var abandonedSetup: Duration = .seconds(60)
        /// Addresses kept at most (HAP asks for 8 sessions at least). A new address past the
        /// limit pushes out one without a session and without a pair-setup under way; when every
        /// address has one, the new one is refused (5.03) rather than a session dropped.
        public var maxPeers = 32
        /// A read or write the database has not answered by then is refused (`maxProcedures`).
        public var databaseTimeout: Duration = .seconds(8)
        /// How the accessory waits out `databaseTimeout`: `Task.sleep`, or a test's own wait, so
        /// the deadline passes when the test says and not when a busy machine lets it.
        public var databaseDeadline: @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }

        public init(stateDirectory: URL, setupCode: HAPSetupCode) {
            self.stateDirectory = stateDirectory
            self.setupCode = setupCode
        }
    }

    /// One address's pairing steps and session.
    struct Peer {
        let connection: UInt64
        var setup: PairSetupMachine
        var setupStarted: ContinuousClock.Instant?
        var verify = PairVerifyMachine()
        var session: Session?

        init(connection: UInt64) {
            self.connection = connection
            setup = PairSetupMachine(connection: connection)
        }
    }

    /// A verified session: its cipher, subscriptions, a prepared timed write per iid and the
    /// answer of the last write to the pairings characteristic (read back by the controller).
    struct Session {
        let id: UInt64
        let controller: HAPControllerPairing
        var cipher: CoAPSessionCipher
        var subscriptions: Set<UInt16> = []
        var prepared: [UInt16: (value: [UInt8], expires: ContinuousClock.Instant)] = [:]
        var pairingsAnswer: [UInt8]?
        /// Its controller's pairing was removed by this session's own request: it ends once
        /// the answer is sealed.
        var endsAfterAnswer = false
    }

    public let configuration: Configuration
    let state: AccessoryState
    let database: any HAPAccessoryDatabase
    let events: any HAPCoAPEventSender
    let logger: Logger
    let peers = Mutex<[String: Peer]>([:])
    let served = Mutex<ServedTree?>(nil)
    private let nextID = Atomic<UInt64>(0)

    /// Loads the accessory's identity and pairings (a fresh identity is made and saved when
    /// there are none). `onStatusChange` as for `HAPAccessoryServer`.
    public init(
        configuration: Configuration, database: any HAPAccessoryDatabase, events: any HAPCoAPEventSender,
        logger: Logger, onStatusChange: @escaping @Sendable (HAPServerStatus) -> Void = { _ in }
    ) throws(HAPServerError) {
        // Read before anything is stored: Swift 6.3's optimiser crashes (an ownership error in
        // CopyPropagation) on this init when the throw comes after a stored property is set.
        let state = try AccessoryState(
            store: HAPServerStore(directory: configuration.stateDirectory), setupCode: configuration.setupCode,
            onStatusChange: onStatusChange)
        self.configuration = configuration
        self.state = state
        self.database = database
        self.events = events
        self.logger = logger
    }

    public var status: HAPServerStatus { state.status }
    public var pairings: [HAPControllerPairing] { state.pairings }
    /// Verified sessions now.
    public var sessionCount: Int { peers.withLock { $0.values.filter { $0.session != nil }.count } }

    /// Answers one request from `peer` (the transport's name for its address). The tree is
    /// read on the first request if `databaseChanged` was not called before.
    public func handle(_ path: String, _ payload: [UInt8], from peer: String) async -> CoAPReply {
        if served.withLock({ $0 == nil }) {
            do throws(HAPServerError) { try await databaseChanged() } catch {
                logger.error("cannot serve the accessory over CoAP: \(error)")
                return CoAPReply(.internalServerError, Array(error.message.utf8))
            }
        }
        switch path {
        case HAPCoAPPath.identify: return await identify()
        case HAPCoAPPath.pairSetup: return pairSetup(payload, from: peer)
        case HAPCoAPPath.pairVerify: return pairVerify(payload, from: peer)
        case HAPCoAPPath.pdus: return await pdus(payload, from: peer)
        default: return CoAPReply(.notFound)
        }
    }

    /// Forgets every session, as a restart does: each controller's next request gets 4.04
    /// and it verifies again.
    public func forgetSessions() {
        peers.withLock { p in
            for key in p.keys { p[key]?.session = nil }
        }
    }

    // MARK: Unauthenticated resources

    /// `/0`: an unpaired accessory identifies itself; a paired one answers only its
    /// controllers (over the session, the Identify characteristic), as HAP-IP's `/identify`.
    private func identify() async -> CoAPReply {
        guard !state.isPaired else { return CoAPReply(.unauthorized) }
        await database.identify()
        return CoAPReply(.changed)
    }

    private func pairSetup(_ payload: [UInt8], from peer: String) -> CoAPReply {
        guard let request = try? TLV8.decode(payload) else {
            return CoAPReply(.badRequest, PairSetupMachine.error(.unknown, state: 2).encoded())
        }
        let now = ContinuousClock.now
        let step: PairSetupMachine.Step? = peers.withLock { p in
            if request[TLVType.state] == [1] { releaseAbandonedSetups(&p, except: peer, now: now) }
            guard var entry = p[peer] ?? newPeer(&p) else { return nil }
            let step = entry.setup.handle(request, state: state)
            switch entry.setup.phase {
            case .idle: entry.setupStarted = nil
            case .awaitingM3 where request[TLVType.state] == [1]: entry.setupStarted = now
            default: break
            }
            p[peer] = entry
            return step
        }
        guard let step else { return CoAPReply(.serviceUnavailable) }
        if let paired = step.paired { logger.notice("controller \(paired.id) paired over CoAP from \(peer)") }
        return CoAPReply(.changed, step.response.encoded())
    }

    /// A new address's entry, room made for it (see `maxPeers`); nil when there is none.
    private func newPeer(_ p: inout [String: Peer]) -> Peer? {
        if p.count >= configuration.maxPeers {
            guard let idle = p.first(where: { $0.value.session == nil && $0.value.setupStarted == nil })?.key else {
                return nil
            }
            p[idle]?.setup.abandon(state)
            p.removeValue(forKey: idle)
        }
        return Peer(connection: nextID.wrappingAdd(1, ordering: .relaxed).newValue)
    }

    /// Frees the pair-setup another address left under way longer than `abandonedSetup` ago.
    private func releaseAbandonedSetups(_ p: inout [String: Peer], except peer: String, now: ContinuousClock.Instant) {
        for key in p.keys where key != peer {
            guard let started = p[key]?.setupStarted, now - started > configuration.abandonedSetup else { continue }
            p[key]?.setup.abandon(state)
            p[key]?.setupStarted = nil
        }
    }

    private func pairVerify(_ payload: [UInt8], from peer: String) -> CoAPReply {
        guard let request = try? TLV8.decode(payload) else {
            return CoAPReply(.badRequest, PairSetupMachine.error(.unknown, state: 2).encoded())
        }
        let step: PairVerifyMachine.Step? = peers.withLock { p in
            guard var entry = p[peer] ?? newPeer(&p) else { return nil }
            let step = entry.verify.handle(request, state: state)
            if let (pairing, shared) = step.verified {
                // A new session replaces the address's old one: its counters start at zero.
                entry.session = Session(
                    id: nextID.wrappingAdd(1, ordering: .relaxed).newValue, controller: pairing,
                    cipher: CoAPSessionCipher(keys: CoAPSessionKeys(sharedSecret: shared), role: .accessory))
            }
            p[peer] = entry
            return step
        }
        guard let step else { return CoAPReply(.serviceUnavailable) }
        if let (pairing, _) = step.verified { logger.info("controller \(pairing.id) verified from \(peer)") }
        return CoAPReply(.changed, step.response.encoded())
    }

    // MARK: The session

    /// `/`: opens the payload with the address's session, answers its PDUs, seals the answer.
    /// No session, or a payload no nearby counter opens (the session is out of step, and the
    /// controller's counter only drifts further), is 4.04: the controller verifies again.
    private func pdus(_ payload: [UInt8], from peer: String) async -> CoAPReply {
        let opened: Result<(session: Session, plain: [UInt8]), CoAPCodecError>? = peers.withLock { p in
            guard var session = p[peer]?.session else { return nil }
            do throws(CoAPCodecError) {
                let plain = try session.cipher.open(payload)
                p[peer]?.session = session
                return .success((session, plain))
            } catch {
                p[peer]?.session = nil
                return .failure(error)
            }
        }
        let session: Session
        let plain: [UInt8]
        switch opened {
        case nil:
            return CoAPReply(.notFound)
        case .failure(let error)?:
            logger.info("dropping the session of \(peer): \(error)")
            return CoAPReply(.notFound)
        case .success(let o)?:
            (session, plain) = (o.session, o.plain)
        }
        let incoming: [IncomingPDU]
        do throws(CoAPCodecError) {
            incoming = try IncomingPDU.split(plain)
        } catch {
            // Nothing to seal an answer per PDU into: the framing itself is broken.
            logger.info("a malformed request from \(peer): \(error)")
            return CoAPReply(.badRequest, Array(error.description.utf8))
        }
        var responses: [CoAPResponsePDU] = []
        for pdu in incoming { responses.append(await answer(pdu, session: session.id, peer: peer)) }
        let body = (try? CoAPResponsePDU.encode(responses)) ?? []
        let sealed: [UInt8]? = peers.withLock { p in
            // The session may have been replaced while the database answered: its answer is
            // sealed for the session that asked, or not at all.
            guard var s = p[peer]?.session, s.id == session.id else { return nil }
            let sealed = s.cipher.seal(body)
            p[peer]?.session = s.endsAfterAnswer ? nil : s
            return sealed
        }
        guard let sealed else { return CoAPReply(.notFound) }
        return CoAPReply(.changed, sealed)
    }

    /// Runs `body` on the session `id` of `peer` if it is still there.
    func withSession<T>(_ peer: String, _ id: UInt64, _ body: (inout Session) -> T) -> T? {
        peers.withLock { p in
            guard var s = p[peer]?.session, s.id == id else { return nil }
            let result = body(&s)
            p[peer]?.session = s
            return result
        }
    }

    /// Ends the sessions of `controller` (nil: everyone's), after a pairing was removed; the
    /// session `except` (the remover's) once its answer is out.
    func closeSessions(except: (peer: String, id: UInt64), controller: String?, reason: String) {
        peers.withLock { p in
            for key in p.keys where controller == nil || p[key]?.session?.controller.id == controller {
                guard let s = p[key]?.session else { continue }
                logger.info("closing the session of \(key): \(reason)")
                if key == except.peer && s.id == except.id {
                    p[key]?.session?.endsAfterAnswer = true
                } else {
                    p[key]?.session = nil
                }
            }
        }
    }

    // MARK: Events

    /// Sends the changes to the sessions subscribed to them, except `cause` (the session whose
    /// write made the change), as encrypted event PUTs. Returns how many sessions were sent one
    /// that the controller took (2.03). Changes of other aids are not served here.
    @discardableResult
    public func notify(_ changes: [HAPValueChange], cause: HAPSessionID? = nil) async -> Int {
        guard let tree = served.withLock({ $0 }) else { return 0 }
        var pdus: [UInt16: [UInt8]] = [:]
        for change in changes where change.id.aid == tree.aid {
            guard let iid = UInt16(exactly: change.id.iid), let c = tree.characteristics[iid],
                let bytes = try? ServedTree.bytes(change.value, c)
            else { continue }
            pdus[iid] = (try? CoAPEventPDU(iid: iid, body: HAPBLEBody(value: bytes).encoded()).encoded()) ?? []
        }
        guard !pdus.isEmpty else { return 0 }
        let outgoing: [(peer: String, sealed: [UInt8])] = peers.withLock { p in
            var out: [(String, [UInt8])] = []
            for key in p.keys.sorted() {
                guard var s = p[key]?.session, s.id != cause?.rawValue else { continue }
                let payload = pdus.keys.sorted().filter(s.subscriptions.contains).flatMap { pdus[$0]! }
                guard !payload.isEmpty else { continue }
                out.append((key, s.cipher.sealEvent(payload)))
                p[key]?.session = s
            }
            return out
        }
        var reached = 0
        for (peer, sealed) in outgoing {
            do throws(HAPError) {
                let code = try await events.put(sealed, to: peer)
                if code == .valid {
                    reached += 1
                } else {
                    logger.info("the controller at \(peer) answered an event \(code)")
                }
            } catch {
                logger.info("an event to \(peer) failed: \(error)")
            }
        }
        return reached
    }

    /// Reads the tree again (call it when accessories, services or characteristics change):
    /// the attribute database and the checks of reads and writes follow it; `c#` goes up when
    /// its shape differs from the last one served.
    public func databaseChanged() async throws(HAPServerError) {
        let tree = await database.accessories()
        let servedTree = try ServedTree(tree)
        served.withLock { $0 = servedTree }
        _ = try state.updateConfiguration(digest: CharacteristicIndex.shapeDigest([servedTree.accessory]))
    }
}
