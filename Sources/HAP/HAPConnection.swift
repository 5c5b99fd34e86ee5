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
    private var early: [[UInt8]] = []
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
        var buffer = unwrapInboundIn(data)
        guard let bytes = buffer.readBytes(length: buffer.readableBytes) else { return }
        guard let connection else {
            early.append(bytes)
            return
        }
        connection.assumeIsolated { $0.receive(bytes) }
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

/// A one-time slot for a response, resumable from the reader, a timer or cancellation.
private final class ResponseSlot: @unchecked Sendable {
    private let lock = NSLock()
    private var result: Result<HAPHTTPMessage, HAPError>?
    private var continuation: CheckedContinuation<HAPHTTPMessage, any Error>?

    func resolve(_ r: Result<HAPHTTPMessage, HAPError>) {
        lock.lock()
        guard result == nil else { lock.unlock(); return }
        result = r
        let c = continuation
        continuation = nil
        lock.unlock()
        c?.resume(with: r.mapError { $0 as any Error })
    }

    func wait() async throws(HAPError) -> HAPHTTPMessage {
        do {
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (c: CheckedContinuation<HAPHTTPMessage, any Error>) in
                    lock.lock()
                    if let r = result {
                        lock.unlock()
                        c.resume(with: r.mapError { $0 as any Error })
                    } else {
                        continuation = c
                        lock.unlock()
                    }
                }
            } onCancel: {
                resolve(.failure(HAPError(code: .cancelled, message: "the request was cancelled")))
            }
        } catch let e as HAPError {
            throw e
        } catch {
            throw HAPError(code: .io, message: "\(error)")
        }
    }
}

/// One TCP connection to an accessory: plain HTTP until pair-verify, then the encrypted
/// session. One request at a time; `EVENT/1.0` messages go to `events`.
///
/// The actor runs on its channel's event loop: a request is written, and its response read,
/// decrypted and parsed, on the thread that does the socket's I/O, and the requester is resumed
/// from there. Only the caller's own hop onto the actor and back remains.
public actor HAPConnection {
    public nonisolated let host: String
    public nonisolated let port: Int
    /// Events (`EVENT/1.0` messages) in arrival order; finishes when the connection closes.
    public nonisolated let events: AsyncStream<HAPHTTPMessage>
    public static let requestTimeout: TimeAmount = .seconds(10)

    private let channel: any Channel
    private let eventContinuation: AsyncStream<HAPHTTPMessage>.Continuation
    private var cipher: HAPSessionCipher?
    private var parser = HTTPResponseParser()
    private var pending: ResponseSlot?
    private var requestInFlight = false
    private var waiters: [CheckedContinuation<Void, Never>] = []
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
        (events, eventContinuation) = AsyncStream.makeStream(of: HAPHTTPMessage.self)
    }

    /// Opens a TCP connection; `unreachable` if nothing answers within `timeout` seconds.
    public static func connect(host: String, port: Int, timeout: Double = 5, logger: Logger = Logger(label: "hap"))
        async throws(HAPError) -> HAPConnection
    {
        let bridge = InboundBridge()
        let bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(.milliseconds(Int64(timeout * 1000)))
            .channelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(bridge)
                }
            }
        let channel: any Channel
        do {
            channel = try await bootstrap.connect(host: host, port: port).get()
        } catch {
            throw HAPError(code: .unreachable, message: "cannot connect to the accessory at \(host):\(port): \(error)")
        }
        let connection = HAPConnection(host: host, port: port, channel: channel, logger: logger)
        try? await channel.eventLoop.submit { bridge.attach(connection) }.get()
        return connection
    }

    /// Switches to the encrypted session (after pair-verify M4).
    func enableEncryption(sharedSecret: [UInt8]) {
        cipher = HAPSessionCipher(sharedSecret: sharedSecret)
    }

    fileprivate func receiveClose() { fail(.closed()) }

    fileprivate func receive(_ chunk: [UInt8]) {
        guard closeReason == nil else { return }
        do {
            var plain = chunk
            if cipher != nil { plain = try cipher!.decrypt(chunk) }
            parser.feed(plain)
            while let message = try parser.next() {
                if message.isEvent {
                    eventContinuation.yield(message)
                } else if let slot = pending {
                    pending = nil
                    slot.resolve(.success(message))
                } else {
                    throw HAPError.proto("the accessory sent a response nobody asked for (status \(message.status))")
                }
            }
        } catch let error as HAPError {
            logger.warning("closing connection to \(host):\(port): \(error.message)")
            fail(error)
        } catch {
            fail(.proto("\(error)"))
        }
    }

    private func fail(_ error: HAPError) {
        if closeReason == nil { closeReason = error }
        pending?.resolve(.failure(closeReason ?? error))
        pending = nil
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
        await acquire()
        defer { release() }
        if let reason = closeReason { throw reason }
        var head = "\(method) \(path) HTTP/1.1\r\nHost: \(host)\r\n"
        if let contentType { head += "Content-Type: \(contentType)\r\n" }
        if !body.isEmpty || method != "GET" { head += "Content-Length: \(body.count)\r\n" }
        head += "\r\n"
        var bytes = Array(head.utf8) + body
        if cipher != nil { bytes = try cipher!.encrypt(bytes) }
        let slot = ResponseSlot()
        pending = slot
        var buffer = channel.allocator.buffer(capacity: bytes.count)
        buffer.writeBytes(bytes)
        channel.writeAndFlush(buffer).whenFailure { error in
            slot.resolve(.failure(HAPError(code: .io, message: "sending to the accessory failed: \(error)")))
        }
        let timer = channel.eventLoop.scheduleTask(in: Self.requestTimeout) {
            slot.resolve(
                .failure(
                    HAPError(code: .timeout, message: "the accessory did not answer \(method) \(path) within 10 s")))
        }
        defer { timer.cancel() }
        do {
            return try await slot.wait()
        } catch {
            if pending === slot { pending = nil }
            // A late answer would be taken for the next request's: the connection is unusable.
            if error.code == .timeout || error.code == .cancelled || error.code == .io { fail(error) }
            throw error
        }
    }
}
