import HAP
import HomeModel
import Logging
import NIOCore
import Synchronization

/// What every connection shares: the accessory's state, the open sessions, the database and the
/// characteristics' metadata as last read from it.
final class ServerContext: Sendable {
    let state: AccessoryState
    let registry: SessionRegistry
    let database: any HAPAccessoryDatabase
    let index = Mutex(CharacteristicIndex([]))
    let databaseTimeout: Duration
    let verifyTimeout: Duration
    let verifyDeadline: @Sendable (Duration) async throws -> Void
    let logger: Logger

    init(
        state: AccessoryState, registry: SessionRegistry, database: any HAPAccessoryDatabase,
        databaseTimeout: Duration, verifyTimeout: Duration,
        verifyDeadline: @escaping @Sendable (Duration) async throws -> Void, logger: Logger
    ) {
        self.state = state
        self.registry = registry
        self.database = database
        self.databaseTimeout = databaseTimeout
        self.verifyTimeout = verifyTimeout
        self.verifyDeadline = verifyDeadline
        self.logger = logger
    }
}

/// One controller's connection: plain HTTP for pair-setup and pair-verify, then the encrypted
/// session. Used by its own task only (the server's child for this connection), so it needs no
/// lock; bytes, events and closes reach it through one stream (`ConnectionInput`).
final class HAPServerConnection {
    let id: UInt64
    let context: ServerContext
    var logger: Logger
    private var parser = HTTPRequestParser()
    private(set) var cipher: HAPSessionCipher?
    private var setup: PairSetupMachine
    private var verify = PairVerifyMachine()
    /// The verified controller; nil before pair-verify.
    private(set) var controller: HAPControllerPairing?
    /// A timed write's `/prepare`: its id and when it expires.
    var prepared: (pid: UInt64, expires: ContinuousClock.Instant)?
    /// The channel's loop: the database's deadlines are timers on it (`withDeadline`).
    let eventLoop: any EventLoop

    init(id: UInt64, context: ServerContext, peer: String, eventLoop: any EventLoop) {
        self.id = id
        self.eventLoop = eventLoop
        self.context = context
        self.setup = PairSetupMachine(connection: id)
        var logger = context.logger
        logger[metadataKey: "hap-connection"] = "\(id) \(peer)"
        self.logger = logger
    }

    var requestContext: HAPRequestContext {
        HAPRequestContext(session: HAPSessionID(id), controller: controller?.id ?? "")
    }

    /// Serves the channel until the peer leaves, breaks the protocol, misses pair-verify's
    /// deadline, or the server closes the session.
    func run(_ accepted: AcceptedConnection) async {
        let (channel, input) = (accepted.channel, accepted.input)
        guard context.registry.register(id, input: input) else {
            logger.info("refusing a connection: \(context.registry.limit) are open already")
            input.finish()
            try? await channel.close()
            return
        }
        defer {
            context.registry.unregister(id)
            setup.abandon(context.state)
            input.finish()
        }
        let (verifyTimeout, verifyDeadline) = (context.verifyTimeout, context.verifyDeadline)
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                // A connection that never finishes pair-verify holds a slot and possibly the
                // pair-setup: it gets this long.
                guard (try? await verifyDeadline(verifyTimeout)) != nil else { return }
                input.yield(.verifyDeadline)
            }
            await serve(accepted.inputs, channel)
            // Before the channel closes: a controller that sees the close may try again at once.
            setup.abandon(context.state)
            context.registry.unregister(id)
            group.cancelAll()
        }
        try? await channel.close()
    }

    private func serve(_ inputs: AsyncStream<ConnectionInput>, _ channel: any Channel) async {
        channel.read()
        for await item in inputs {
            switch item {
            case .bytes(let buffer):
                guard await receive(Array(buffer.readableBytesView), channel) else { return }
                // Handled: the socket may be read again (`ConnectionInputHandler`).
                channel.read()
            case .peerClosed:
                logger.debug("the controller closed the connection")
                return
            case .verifyDeadline:
                if controller == nil {
                    logger.info("closing a connection that did not finish pair-verify in time")
                    return
                }
            case .events(let events):
                guard cipher != nil else { continue }
                let wanted = events.filter { context.registry.isSubscribed(id, to: $0.id) }
                guard !wanted.isEmpty else { continue }
                guard await send(Self.event(wanted), channel, event: true) else { return }
            case .close(let reason):
                logger.info("closing the session: \(reason)")
                return
            }
        }
    }

    static func event(_ events: [HAPValueChange]) -> HAPResponse {
        let body = JSONValue.object([
            "characteristics": .array(
                events.map {
                    .object(["aid": .int(Int64($0.id.aid)), "iid": .int(Int64($0.id.iid)), "value": $0.value])
                })
        ])
        return .json(200, body.encodedUTF8())
    }

    /// Takes bytes from the socket; false when the connection must close.
    func receive(_ bytes: [UInt8], _ channel: any Channel) async -> Bool {
        guard feed(bytes) else { return false }
        while true {
            let request: HAPRequest?
            do {
                request = try parser.next()
            } catch {
                logger.info("closing the connection: invalid HTTP (\(error.message))")
                _ = await send(.status(400, .invalidValue), channel)
                return false
            }
            guard let request else { return true }
            let (response, after) = await route(request)
            guard await send(response, channel) else { return false }
            switch after {
            case .none: continue
            case .close: return false
            case .encrypt(let sharedSecret):
                cipher = HAPSessionCipher(sharedSecret: sharedSecret, isController: false)
                // Frames that came in the same read as pair-verify's M3 are the session's first.
                guard feed(parser.takeRemainder()) else { return false }
            }
        }
    }

    /// Decrypts (in a session) and hands the bytes to the parser; false on a bad frame.
    private func feed(_ bytes: [UInt8]) -> Bool {
        guard !bytes.isEmpty else { return true }
        guard var session = cipher else {
            parser.feed(bytes)
            return true
        }
        do {
            parser.feed(try session.decrypt(bytes))
            cipher = session
            return true
        } catch {
            logger.info("closing the session: a frame from the controller is invalid (\(error.code))")
            return false
        }
    }

    /// Writes a response or event, sealed in a session; false if the socket is gone.
    ///
    /// Written without waiting while the channel takes more; when it does not (a controller that
    /// stopped reading while events pile up), waits until this write is out, so what is queued for
    /// a slow reader stays bounded.
    func send(_ response: HAPResponse, _ channel: any Channel, event: Bool = false) async -> Bool {
        let bytes = response.encoded(event: event)
        guard channel.isActive else { return false }
        var buffer: ByteBuffer
        if var session = cipher {
            // Sealed straight into the buffer that is written: 18 bytes of framing per 1024.
            buffer = channel.allocator.buffer(capacity: bytes.count + (bytes.count / 1024 + 1) * 18)
            guard (try? session.encrypt(bytes, into: &buffer)) != nil else { return false }
            cipher = session
        } else {
            buffer = channel.allocator.buffer(bytes: bytes)
        }
        guard !channel.isWritable else {
            channel.writeAndFlush(buffer, promise: nil)
            return true
        }
        do {
            try await channel.writeAndFlush(buffer).get()
            return true
        } catch {
            return false
        }
    }

    enum After {
        case none
        case close
        case encrypt(sharedSecret: [UInt8])
    }

    func route(_ request: HAPRequest) async -> (HAPResponse, After) {
        switch (request.method, request.path) {
        case ("POST", "/pair-setup"):
            guard let tlv = try? TLV8.decode(request.body) else {
                setup.abandon(context.state)
                return (Self.badTLV(state: 2), .none)
            }
            let step = setup.handle(tlv, state: context.state)
            if let paired = step.paired { logger.notice("paired with controller \(paired.id) (admin)") }
            if let code = step.response[TLVType.error]?.first.flatMap(TLVErrorCode.init) {
                // Never the code itself: only that, and how often, it was wrong.
                let failures = context.state.failedSetupAttempts
                logger.info(
                    "pair-setup refused (\(code)); \(failures) of \(AccessoryState.maxFailedSetupAttempts) tries used")
            }
            return (.tlv(step.response.encoded()), .none)
        case ("POST", "/pair-verify"):
            guard cipher == nil else { return (.status(400, .invalidValue), .close) }
            guard let tlv = try? TLV8.decode(request.body) else { return (Self.badTLV(state: 2), .none) }
            let step = verify.handle(tlv, state: context.state)
            guard let verified = step.verified else { return (.tlv(step.response.encoded()), .none) }
            controller = verified.pairing
            context.registry.verified(id, controller: verified.pairing.id)
            logger.debug("session verified for controller \(verified.pairing.id)")
            return (.tlv(step.response.encoded()), .encrypt(sharedSecret: verified.sharedSecret))
        case ("POST", "/identify"):
            guard !context.state.isPaired else { return (.status(400, .insufficientPrivileges), .none) }
            await context.database.identify()
            return (.noContent, .none)
        default:
            break
        }
        guard cipher != nil, controller != nil else {
            // HAP's answer to a request that needs a session: 470 (HAP-NodeJS; iOS pair-verifies).
            return (.status(470, .insufficientPrivileges), .none)
        }
        switch (request.method, request.path) {
        case ("GET", "/accessories"): return (await accessories(), .none)
        case ("GET", "/characteristics"): return (await readCharacteristics(request), .none)
        case ("PUT", "/characteristics"): return (await writeCharacteristics(request), .none)
        case ("PUT", "/prepare"): return (prepare(request), .none)
        case ("POST", "/pairings"): return (pairings(request), .none)
        case (_, "/accessories"), (_, "/characteristics"), (_, "/prepare"), (_, "/pairings"):
            return (.status(405, .invalidValue), .none)
        default:
            return (.status(404, .doesNotExist), .none)
        }
    }

    /// A TLV body that does not decode: the error Unknown, with HTTP 400.
    static func badTLV(state: UInt8) -> HAPResponse {
        HAPResponse(
            status: 400, contentType: HAPResponse.tlv8, body: PairSetupMachine.error(.unknown, state: state).encoded())
    }
}
