import Foundation
public import Logging
public import NIOCore
import NIOPosix

// One TCP connection to a HAP accessory: HTTP requests and responses, EVENT/1.0 messages, and
// the encrypted session after pair-verify.

/// Hands received bytes and the close of the channel to the connection, on the channel's event
/// loop, which is the connection's executor: no hop between the socket and the parser.
private final class InboundBridge: ChannelInboundHandler, @unchecked Sendable {
    // Touched only on the channel's event loop (handler callbacks and `attach`).
    typealias InboundIn = ByteBuffer
    private var connection: HAPConnection?
    private var early: [ByteBuffer] = []
    private var closedEarly = false

    /// On the event loop: from now on bytes go to `connection` (those that came first as well).
    func attach(_ connection: HAPConnection) {
        self.connection = connection
        connection.assumeIsolated { c in
            for chunk in early { c.receive(chunk) }
            if closedEarly { c.receiveClose() }
        }
        early = []
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // The buffer itself, not a copy: the connection decrypts or parses straight from it, and
        // NIO reuses its storage for the next read once it is released.
        let buffer = unwrapInboundIn(data)
        guard let connection else {
            early.append(buffer)
            return
        }
        connection.assumeIsolated { $0.receive(buffer) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if let connection {
            connection.assumeIsolated { $0.receiveClose() }
        } else {
            closedEarly = true
        }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

/// An event loop as a task executor: the jobs of a task that prefers it run on the loop, as
/// the loop's serial executor (the connection's) runs them. A waiting requester prefers it, so
/// that the response resumes it on the loop that read it, not on a thread of the global pool.
@available(macOS 15.0, *)
private final class LoopTaskExecutor: TaskExecutor {
    let loop: any EventLoop

    init(_ loop: any EventLoop) { self.loop = loop }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        // Run as the loop's serial executor and this task executor both: the resumed requester's
        // hop back onto the connection (whose executor is the loop) is then no switch at all,
        // where the loop's own enqueue would run it once more, a loop turn later.
        loop.execute {
            job.runSynchronously(
                isolatedTo: self.loop.executor.asUnownedSerialExecutor(), taskExecutor: self.asUnownedTaskExecutor())
        }
    }
}

/// One TCP connection to an accessory: plain HTTP until pair-verify, then the encrypted
/// session. One request at a time; `EVENT/1.0` messages go to `events`.
///
/// The actor runs on its channel's event loop: a request is written, and its response read,
/// decrypted and parsed, on the thread that does the socket's I/O, and the requester is resumed
/// from there. The requester waits on a continuation kept in the actor (`pending`), so only the
/// caller's own hop onto the actor and back crosses threads; one watchdog per connection checks
/// the deadline of whatever request is pending.
public actor HAPConnection {
    public nonisolated let host: String
    public nonisolated let port: Int
    /// Events (`EVENT/1.0` messages) in arrival order; finishes when the connection closes.
    public nonisolated let events: AsyncStream<HAPHTTPMessage>
    public static let requestTimeout: TimeAmount = .seconds(10)

    /// The request on the wire: who waits for its answer, and until when.
    private struct Pending {
        var number: UInt64
        var deadline: NIODeadline
        var method: String
        var path: String
        var waiter: UnsafeContinuation<Result<HAPHTTPMessage, HAPError>, Never>
    }

    private let channel: any Channel
    /// The loop as a task executor, for the tasks waiting on a response.
    /// A `LoopTaskExecutor` where task executors exist (macOS 15, Linux), else nil.
    private nonisolated let loopExecutor: (any AnyObject & Sendable)?
    private let eventContinuation: AsyncStream<HAPHTTPMessage>.Continuation
    private var cipher: HAPSessionCipher?
    private var parser = HTTPResponseParser()
    private var pending: Pending?
    private var requestCount: UInt64 = 0
    private var requestInFlight = false
    private var waiters: [CheckedContinuation<Void, Never>] = []
    /// Fires at the pending request's deadline; armed while requests are made, left unarmed
    /// when the connection is idle.
    private var watchdog: Scheduled<Void>?
    /// The request being written, before encryption, and on the wire; both keep their storage
    /// from one request to the next (the socket write has released `outbound` by then).
    private var plain: [UInt8] = []
    private var outbound: ByteBuffer
    public private(set) var closeReason: HAPError?
    let logger: Logger

    public nonisolated var unownedExecutor: UnownedSerialExecutor {
        channel.eventLoop.executor.asUnownedSerialExecutor()
    }

    /// The thread the connection runs on: a caller isolated to it (an actor with this executor)
    /// reaches the connection without a thread switch.
    public nonisolated var eventLoop: any EventLoop { channel.eventLoop }

    public var isEncrypted: Bool { cipher != nil }
    public var isOpen: Bool { closeReason == nil }

    private init(host: String, port: Int, channel: any Channel, logger: Logger) {
        self.host = host
        self.port = port
        self.channel = channel
        self.logger = logger
        outbound = channel.allocator.buffer(capacity: 512)
        if #available(macOS 15.0, *) {
            loopExecutor = LoopTaskExecutor(channel.eventLoop)
        } else {
            loopExecutor = nil
        }
        (events, eventContinuation) = AsyncStream.makeStream(of: HAPHTTPMessage.self)
    }

    /// TCP keepalive of every connection, in seconds: a silent accessory is found dead
    /// `idle + interval × count` s (30 s) after it last answered.
    static let keepAlive: (idle: Int, interval: Int, count: Int) = (15, 5, 3)

    private static func tcpOption(_ name: CInt) -> ChannelOptions.Types.SocketOption {
        ChannelOptions.Types.SocketOption(level: .tcp, name: NIOBSDSocket.Option(rawValue: name))
    }

    /// Opens a TCP connection; `unreachable` if nothing answers within `timeout` seconds.
    public static func connect(host: String, port: Int, timeout: Double = 5, logger: Logger = Logger(label: "hap"))
        async throws(HAPError) -> HAPConnection
    {
        do {
            return try await open(host: host, port: port, timeout: timeout, logger: logger).get()
        } catch {
            throw error as? HAPError ?? HAPError(code: .io, message: "\(error)")
        }
    }

    /// The connect itself, as a future (`connect(firstOf:)` races several without a task each).
    /// `register` sees each channel before it connects, on its event loop, and can close it
    /// later to abandon the attempt; by throwing, it abandons the attempt at once. Fails with
    /// `unreachable`.
    static func open(
        host: String, port: Int, timeout: Double, logger: Logger,
        register: @escaping @Sendable (any Channel) throws -> Void = { _ in }
    ) -> EventLoopFuture<HAPConnection> {
        let bridge = InboundBridge()
        var bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(.milliseconds(Int64(timeout * 1000)))
            .channelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
        #if os(Linux)
            // An accessory that loses power or its address sends no FIN: with events only (no
            // polling) nothing would be written, and the accessory would stay online forever.
            // Probes after `keepAlive.idle` s of silence, every `interval` s, `count` times; data
            // not acknowledged within the same total also ends the connection.
            bootstrap =
                bootstrap
                .channelOption(ChannelOptions.socketOption(.so_keepalive), value: 1)
                .channelOption(Self.tcpOption(TCP_KEEPIDLE), value: Self.keepAlive.idle)
                .channelOption(Self.tcpOption(TCP_KEEPINTVL), value: Self.keepAlive.interval)
                .channelOption(Self.tcpOption(TCP_KEEPCNT), value: Self.keepAlive.count)
                .channelOption(
                    Self.tcpOption(TCP_USER_TIMEOUT),
                    value: 1000 * (Self.keepAlive.idle + Self.keepAlive.interval * Self.keepAlive.count)
                )
        #endif
        bootstrap =
            bootstrap
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try register(channel)
                    try channel.pipeline.syncOperations.addHandler(bridge)
                }
            }
        return bootstrap.connect(host: host, port: port)
            .flatMapErrorThrowing { error in
                throw HAPError(
                    code: .unreachable, message: "cannot connect to the accessory at \(host):\(port): \(error)")
            }
            .flatMap { channel in
                let connection = HAPConnection(host: host, port: port, channel: channel, logger: logger)
                // On the channel's loop, where the bridge lives: the bytes that came first too.
                return channel.eventLoop.submit {
                    bridge.attach(connection)
                    return connection
                }
            }
    }

    /// Switches to the encrypted session (after pair-verify M4).
    func enableEncryption(sharedSecret: [UInt8]) {
        cipher = HAPSessionCipher(sharedSecret: sharedSecret)
    }

    fileprivate func receiveClose() { fail(.closed()) }

    fileprivate func receive(_ buffer: ByteBuffer) {
        guard closeReason == nil else { return }
        do throws(HAPError) {
            if cipher != nil {
                try decrypt(buffer)
            } else {
                buffer.withUnsafeReadableBytes { parser.feed($0) }
            }
            while let message = try parser.next() {
                if message.isEvent {
                    eventContinuation.yield(message)
                } else if pending != nil {
                    resolve(.success(message))
                } else {
                    throw HAPError.proto("the accessory sent a response nobody asked for (status \(message.status))")
                }
            }
        } catch {
            logger.warning("closing connection to \(host):\(port): \(error.message)")
            fail(error)
        }
    }

    /// Decrypts what `buffer` completes into the parser's bytes (ByteBuffer's closure rethrows
    /// untyped errors; a Result carries the typed one out).
    private func decrypt(_ buffer: ByteBuffer) throws(HAPError) {
        try buffer.withUnsafeReadableBytes { raw in
            Result { () throws(HAPError) in try cipher!.decrypt(raw, appendingTo: &parser.buffer) }
        }.get()
    }

    /// Hands the pending request its outcome.
    private func resolve(_ result: Result<HAPHTTPMessage, HAPError>) {
        guard let request = pending else { return }
        pending = nil
        request.waiter.resume(returning: result)
    }

    private func fail(_ error: HAPError) {
        if closeReason == nil { closeReason = error }
        resolve(.failure(closeReason ?? error))
        watchdog?.cancel()
        watchdog = nil
        eventContinuation.finish()
        channel.close(promise: nil)
    }

    /// Closes the connection; pending and later requests fail with `closed`.
    public func close() {
        fail(.closed("the connection was closed"))
    }

    private func acquire() async {
        if !requestInFlight { requestInFlight = true; return }
        await withCheckedContinuation { waiters.append($0) }
    }

    private func release() {
        if waiters.isEmpty { requestInFlight = false } else { waiters.removeFirst().resume() }
    }

    /// Sends one request and waits for its response. No answer within 10 s closes the
    /// connection and fails with `timeout`.
    public func request(_ method: String, _ path: String, body: [UInt8] = [], contentType: String? = nil)
        async throws(HAPError) -> HAPHTTPMessage
    {
        let asked = ContinuousClock.now
        await acquire()
        defer { release() }
        if let reason = closeReason { throw reason }
        // Cancelled while it waited for its turn: nothing was sent, the connection stays usable.
        if Task.isCancelled { throw HAPError(code: .cancelled, message: "the request was cancelled") }
        requestCount += 1
        let request = Outgoing(
            number: requestCount, method: method, path: path, body: body, contentType: contentType)
        let result: Result<HAPHTTPMessage, HAPError>
        if #available(macOS 15.0, *), let loopExecutor {
            // A continuation resumes its task on the global executor, and the actor would then
            // hop back onto the loop: two thread switches for nothing. Preferring the loop as
            // the task's executor while it waits resumes it where the response was read.
            let executor = unsafeDowncast(loopExecutor, to: LoopTaskExecutor.self)
            result = await withTaskExecutorPreference(executor) { await exchange(request) }
        } else {
            result = await exchange(request)
        }
        // At debug level: how long a request waited for its turn, and for its answer (a request
        // behind one the accessory never answers waits as long as that one's deadline).
        logger.debug(
            "HAP \(method) \(path) answered",
            metadata: [
                "host": "\(host):\(port)", "request": "\(requestCount)", "outcome": "\(result.map(\.status))",
                "since-asked": "\(ContinuousClock.now - asked)",
            ])
        switch result {
        case .success(let response):
            return response
        case .failure(let error):
            // A late answer would be taken for the next request's: the connection is unusable.
            if error.code == .timeout || error.code == .cancelled || error.code == .io { fail(error) }
            throw error
        }
    }

    /// A request on its way: what `send` writes, and its number for the answer.
    private struct Outgoing: Sendable {
        var number: UInt64
        var method: String
        var path: String
        var body: [UInt8]
        var contentType: String?
    }

    /// Sends `request` and waits for its answer; a cancelled task gives up waiting. The waiter
    /// is in `pending` before the request is written, so no answer can come before it.
    private func exchange(_ request: Outgoing) async -> Result<HAPHTTPMessage, HAPError> {
        let deadline = NIODeadline.now() + Self.requestTimeout
        let number = request.number
        return await withTaskCancellationHandler {
            await withUnsafeContinuation { waiter in
                pending = Pending(
                    number: number, deadline: deadline, method: request.method, path: request.path, waiter: waiter)
                do throws(HAPError) {
                    try send(request.method, request.path, body: request.body, contentType: request.contentType)
                } catch {
                    resolve(.failure(error))
                    return
                }
                armWatchdog()
            }
        } onCancel: {
            // Any thread: the cancellation reaches the request on the connection's loop.
            eventLoop.execute { self.assumeIsolated { $0.cancel(number) } }
        }
    }

    /// Writes the request: the head and body assembled in `plain`, sealed into `outbound` when
    /// the session is encrypted, one write and flush. A write that fails closes the channel.
    private func send(_ method: String, _ path: String, body: [UInt8], contentType: String?) throws(HAPError) {
        plain.removeAll(keepingCapacity: true)
        plain.append(contentsOf: method.utf8)
        plain.append(UInt8(ascii: " "))
        plain.append(contentsOf: path.utf8)
        plain.append(contentsOf: " HTTP/1.1\r\nHost: ".utf8)
        plain.append(contentsOf: host.utf8)
        plain.append(contentsOf: "\r\n".utf8)
        if let contentType {
            plain.append(contentsOf: "Content-Type: ".utf8)
            plain.append(contentsOf: contentType.utf8)
            plain.append(contentsOf: "\r\n".utf8)
        }
        if !body.isEmpty || method != "GET" {
            plain.append(contentsOf: "Content-Length: ".utf8)
            plain.append(contentsOf: String(body.count).utf8)
            plain.append(contentsOf: "\r\n".utf8)
        }
        plain.append(contentsOf: "\r\n".utf8)
        plain.append(contentsOf: body)
        outbound.clear()
        if cipher != nil {
            try plain.withUnsafeBytes { raw in
                Result { () throws(HAPError) in try cipher!.encrypt(raw, into: &outbound) }
            }.get()
        } else {
            outbound.writeBytes(plain)
        }
        channel.writeAndFlush(outbound, promise: nil)
        // On the loop the write happens now; if it failed, the channel closed and said so.
        if let reason = closeReason {
            throw HAPError(code: .io, message: "sending to the accessory failed: \(reason.message)")
        }
    }

    private func cancel(_ number: UInt64) {
        guard pending?.number == number else { return }
        resolve(.failure(HAPError(code: .cancelled, message: "the request was cancelled")))
    }

    /// Arms the watchdog for the pending request unless it is armed already: a stream of
    /// requests arms it once per timeout period, not once per request.
    private func armWatchdog() {
        guard watchdog == nil, let deadline = pending?.deadline else { return }
        watchdog = channel.eventLoop.scheduleTask(deadline: deadline) {
            self.assumeIsolated { $0.watchdogFired() }
        }
    }

    private func watchdogFired() {
        watchdog = nil
        guard let request = pending else { return }
        if NIODeadline.now() < request.deadline {
            armWatchdog()
            return
        }
        resolve(
            .failure(
                HAPError(
                    code: .timeout,
                    message: "the accessory did not answer \(request.method) \(request.path) within 10 s")))
    }
}
