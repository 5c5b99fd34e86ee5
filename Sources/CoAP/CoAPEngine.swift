internal import CCoAP
import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// How a route (a server path, or a client's event path) answers a request.
public enum CoAPRoute: Sendable {
    /// Runs on the network thread; its answer is piggybacked on the ACK. It must be quick:
    /// every peer waits while it runs.
    case immediate(@Sendable (CoAPIncoming) -> CoAPResponse)
    /// The request is acknowledged at once (an empty ACK), the handler runs in the server's
    /// `run()`, and its answer goes as a separate confirmable response (RFC 7252 §5.2.2).
    case separate(@Sendable (CoAPIncoming) async -> CoAPResponse)
}

/// One libcoap context and the thread that runs it: the engine under `CoAPClient` and
/// `CoAPServer`. libcoap 4.3.1 is not thread-safe, so everything that touches the context,
/// its sessions and PDUs runs on the network thread; other threads post commands (`post`) and
/// wake it through an eventfd. Waiters (one continuation per request) live under a lock, and
/// whoever takes one out first resumes it: the answer, the deadline, a cancellation or the stop.
final class CoAPEngine: @unchecked Sendable {
    typealias Outcome = Result<CoAPResponse, CoAPError>

    struct Shared {
        var commands: [@Sendable (CoAPEngine) -> Void] = []
        var waiters: [UInt64: CheckedContinuation<Outcome, Never>] = [:]
        var started = false
        var stopRequested = false
        var finished = false
        var finishWaiters: [CheckedContinuation<Void, Never>] = []
        var nextID: UInt64 = 1
    }

    /// A separate route's request, handed to the server's `run()` to answer.
    struct Job: Sendable {
        let id: UInt64
        let incoming: CoAPIncoming
        let handler: @Sendable (CoAPIncoming) async -> CoAPResponse
    }

    let shared = Mutex(Shared())
    let logger: Logger
    let transmission: CoAPTransmission
    /// Where incoming requests on `.separate` routes go; nil answers them 5.03.
    let jobs: AsyncStream<Job>.Continuation?
    /// Separate answers pending at once at most; past it, 5.03 at once (a flood of slow
    /// requests holds no more than this many handlers, async entries and sessions).
    var separateLimit = 256
    /// Requests to event routes, for the owner to read (`CoAPClient.events`).
    let incoming: AsyncStream<CoAPIncoming>.Continuation?
    /// The address and port bound (`CoAPServer`, or a client's listening endpoint).
    let bound: CoAPPeer?

    private let wakeFD: Int32

    // MARK: Network thread only (and init, before the thread starts)

    // `nonisolated(unsafe)`-like: touched by the network thread alone once it runs.
    let context: OpaquePointer
    var routes: [String: CoAPRoute] = [:]
    /// Our client sessions, one per peer (referenced until the stop).
    var clientSessions: [CoAPPeer: OpaquePointer] = [:]
    /// Server sessions of peers that sent us requests, newest last, referenced while kept:
    /// requests to them (an accessory's events) go out from the port they wrote to.
    var serverSessions: [CoAPPeer: OpaquePointer] = [:]
    var serverSessionOrder: [CoAPPeer] = []
    /// Requests in flight: by session and token (for the answer) and by id (for deadlines).
    var byToken: [TokenKey: UInt64] = [:]
    var inFlight: [UInt64: (key: TokenKey, deadline: ContinuousClock.Instant)] = [:]
    /// Separate answers: the request's session and token while its handler runs, then the answer
    /// until libcoap calls the route again to send it.
    var separatePending: [UInt64: (session: OpaquePointer, token: [UInt8])] = [:]
    var separateAnswers: [UInt64: CoAPResponse] = [:]
    /// Whether libcoap does block-wise transfers (a server: it cuts large answers into Block2 and
    /// joins Block1 bodies) or we do, for our requests (a client: `CoAPEngine+Blocks.swift`).
    let libcoapBlocks: Bool
    var transfers: [UInt64: Transfer] = [:]

    static let maxServerSessions = 64

    struct TokenKey: Hashable {
        let session: UInt
        let token: [UInt8]
    }

    init(
        bind: CoAPPeer?, routes: [String: CoAPRoute], transmission: CoAPTransmission, libcoapBlocks: Bool,
        logger: Logger, jobs: AsyncStream<Job>.Continuation?, incoming: AsyncStream<CoAPIncoming>.Continuation?
    ) throws(CoAPError) {
        CoAPLibrary.start()
        guard let context = coap_new_context(nil) else { throw .sendFailed("libcoap could not make a context") }
        self.context = context
        self.logger = logger
        self.transmission = transmission
        self.jobs = jobs
        self.incoming = incoming
        self.libcoapBlocks = libcoapBlocks
        wakeFD = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        // RFC 7959 in libcoap: it serves large answers block by block and joins request bodies,
        // handing over whole ones only.
        if libcoapBlocks {
            coap_context_set_block_mode(context, UInt8(COAP_BLOCK_USE_LIBCOAP | COAP_BLOCK_SINGLE_BODY))
        }
        coap_register_response_handler(context, coapResponseHandler)
        coap_register_nack_handler(context, coapNackHandler)
        var boundPeer: CoAPPeer?
        if let bind {
            var address = coap_address_t()
            guard hm_coap_address_set(&address, bind.host, bind.port) == 1 else {
                coap_free_context(context)
                close(wakeFD)
                throw .badAddress(bind.host)
            }
            guard let endpoint = coap_new_endpoint(context, &address, COAP_PROTO_UDP) else {
                coap_free_context(context)
                close(wakeFD)
                throw .sendFailed("cannot bind UDP \(bind)")
            }
            // libcoap reads the port back from the socket (port 0 binds a free one) and tells it
            // only as text, "[::1]:5683 UDP", in a static buffer: read under a process-wide lock.
            let text = CoAPLibrary.textLock.withLock { _ in String(cString: coap_endpoint_str(endpoint)) }
            let printed = text.split(separator: " ").first ?? ""
            let port = printed.split(separator: ":").last.flatMap { UInt16($0) } ?? bind.port
            boundPeer = CoAPPeer(host: bind.host, port: port)
        }
        bound = boundPeer
        for (path, route) in routes { addRoute(path, route) }
        coap_set_app_data(context, Unmanaged.passUnretained(self).toOpaque())
    }

    private func addRoute(_ path: String, _ route: CoAPRoute) {
        let trimmed = path.split(separator: "/", omittingEmptySubsequences: true).joined(separator: "/")
        routes[trimmed] = route
        let bytes = Array(trimmed.utf8)
        // coap_resource_init copies the path (no RELEASE_URI flag).
        let resource = bytes.withUnsafeBufferPointer { buffer in
            var path = coap_str_const_t(length: buffer.count, s: buffer.baseAddress)
            return coap_resource_init(&path, 0)
        }
        guard let resource else { return }
        for method in [COAP_REQUEST_GET, COAP_REQUEST_POST, COAP_REQUEST_PUT, COAP_REQUEST_DELETE] {
            coap_register_handler(resource, method, coapRouteHandler)
        }
        coap_add_resource(context, resource)
    }

    /// Starts the network thread, once (false after the first call); the thread holds the engine
    /// until it finishes.
    @discardableResult
    func start(name: String) -> Bool {
        let first = shared.withLock { state in
            guard !state.started && !state.stopRequested else { return false }
            state.started = true
            return true
        }
        guard first else { return false }
        let thread = Thread { [self] in
            ThreadNaming.set(name)
            self.networkThreadMain()
        }
        thread.start()
        return true
    }

    /// An engine whose thread never ran still owns its context and eventfd.
    deinit {
        if !shared.withLock({ $0.started }) {
            coap_free_context(context)
            close(wakeFD)
        }
    }

    // MARK: Any thread

    func makeID() -> UInt64 {
        shared.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
    }

    /// Queues `body` for the network thread; false once the engine is stopping.
    @discardableResult
    func post(_ body: @escaping @Sendable (CoAPEngine) -> Void) -> Bool {
        let accepted = shared.withLock { state in
            guard !state.stopRequested else { return false }
            state.commands.append(body)
            return true
        }
        if accepted { wake() }
        return accepted
    }

    private func wake() {
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    /// Waits for the answer of a request that `begin` (run on the network thread) sends.
    /// Cancellation ends the wait at once with `.cancelled`.
    func exchange(id: UInt64, begin: @escaping @Sendable (CoAPEngine) -> Void) async -> Outcome {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Outcome, Never>) in
                // Under the lock with the cancellation handler: a task cancelled before this
                // point is seen here, one cancelled after finds the waiter.
                let refused: CoAPError? = shared.withLock { state in
                    if Task.isCancelled { return .cancelled }
                    // No thread to send it (a server not running yet) or none any more.
                    if state.stopRequested || !state.started { return .closed }
                    state.waiters[id] = continuation
                    state.commands.append(begin)
                    return nil
                }
                if let refused { continuation.resume(returning: .failure(refused)) } else { wake() }
            }
        } onCancel: {
            complete(id, .failure(.cancelled))
            post { $0.forget(id) }
        }
    }

    /// Resumes request `id`'s waiter, if it still waits.
    func complete(_ id: UInt64, _ outcome: Outcome) {
        let waiter = shared.withLock { $0.waiters.removeValue(forKey: id) }
        waiter?.resume(returning: outcome)
    }

    /// Asks the thread to stop; it fails what still waits with `.closed` and frees the context.
    func stop() {
        shared.withLock { $0.stopRequested = true }
        wake()
    }

    /// Stops and returns once the network thread has finished.
    func stopAndWait() async {
        stop()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = shared.withLock { state in
                if state.finished || !state.started { return true }
                state.finishWaiters.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }

    // MARK: The loop

    private func networkThreadMain() {
        let coapFD = coap_context_get_coap_fd(context)
        var descriptors = [
            pollfd(fd: coapFD, events: Int16(POLLIN), revents: 0),
            pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0),
        ]
        while true {
            let (commands, stopping) = shared.withLock { state in
                defer { state.commands.removeAll() }
                return (state.commands, state.stopRequested)
            }
            if stopping { break }
            for command in commands { command(self) }
            expireDeadlines()
            // Reads what arrived, dispatches it (our callbacks), sends what is due.
            _ = coap_io_process(context, UInt32.max) // COAP_IO_NO_WAIT: ((uint32_t)-1)
            var now: coap_tick_t = 0
            coap_ticks(&now)
            // Milliseconds until libcoap's next retransmission or timer (0: none).
            let libcoapNext = Int(coap_io_prepare_epoll(context, now))
            var timeout = libcoapNext == 0 ? 1000 : min(libcoapNext, 1000)
            if let nearest = inFlight.values.map(\.deadline).min() {
                let left = ContinuousClock.now.duration(to: nearest)
                timeout = max(
                    0,
                    min(
                        timeout,
                        Int(
                            left.components.seconds * 1000 + left.components.attoseconds
                                / 1_000_000_000_000_000) + 1))
            }
            descriptors[0].revents = 0
            descriptors[1].revents = 0
            _ = poll(&descriptors, 2, Int32(timeout))
            if descriptors[1].revents != 0 {
                var value: UInt64 = 0
                _ = read(wakeFD, &value, 8)
            }
        }
        shutdown()
    }

    private func expireDeadlines() {
        let now = ContinuousClock.now
        for (id, entry) in inFlight where entry.deadline <= now {
            forget(id)
            complete(id, .failure(.deadlineExceeded))
        }
    }

    /// Stops waiting for request `id`'s answer: a late one is answered with a reset.
    /// (libcoap 4.3.1 has no call to cancel a request's retransmissions; they run out.)
    func forget(_ id: UInt64) {
        if let entry = inFlight.removeValue(forKey: id) { byToken[entry.key] = nil }
        transfers[id] = nil
    }

    private func shutdown() {
        for (id, _) in separatePending { separateAnswers[id] = nil }
        for (_, entry) in separatePending { coap_session_release(entry.session) }
        separatePending.removeAll()
        for session in serverSessions.values { coap_session_release(session) }
        serverSessions.removeAll()
        for session in clientSessions.values { coap_session_release(session) }
        clientSessions.removeAll()
        coap_free_context(context)
        close(wakeFD)
        jobs?.finish()
        incoming?.finish()
        let (waiters, finishers) = shared.withLock { state in
            state.finished = true
            defer {
                state.waiters.removeAll()
                state.finishWaiters.removeAll()
                state.commands.removeAll()
            }
            return (Array(state.waiters.values), state.finishWaiters)
        }
        for waiter in waiters { waiter.resume(returning: .failure(.closed)) }
        for finisher in finishers { finisher.resume() }
        logger.debug("CoAP network thread finished")
    }
}
