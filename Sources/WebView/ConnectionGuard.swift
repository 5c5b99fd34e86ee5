import HTTPTypes
import HomeModel
import NIOCore

/// First in every web connection's pipeline, on the raw bytes: what the HTTP and WebSocket
/// parsers behind it do not bound.
///
/// - Admission: the connection takes a place under `ConnectionLimiter`'s cap, or is answered
///   503 and closed.
/// - The first request head must be whole within `headTimeout` and `maxHeaderBytes`: a client
///   that opens and then says little is closed (408), one that sends a head too large is answered
///   431 and closed. One that declares a body over `maxBodyBytes` (`Content-Length`) is
///   answered 413 and closed at once, its body never read; a WebSocket upgrade of `/ws` that
///   `upgradeCheck` refuses (no valid token) gets its answer (401) as every route would give it,
///   where the WebSocket library could only say 400. Later heads on a keep-alive connection are
///   bounded by the HTTP decoder's limits and Hummingbird's idle timeout.
/// - Each of these routine refusals goes to `RefusalLog`: debug lines, one warning a minute.
/// - A connection whose writes have not drained for `stallTimeout` (its peer does not read) is
///   closed: what is queued for it is then freed, and its descriptor with it.
/// - After a WebSocket upgrade request, every client frame must be masked (RFC 6455 §5.1): one
///   that is not fails the connection with close code 1002, before the frame parser sees it.
final class ConnectionGuard: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundOut = ByteBuffer

    struct Limits: Sendable {
        var headTimeout: TimeAmount
        var maxHeaderBytes: Int
        var stallTimeout: TimeAmount
        /// The largest body a request may declare.
        var maxBodyBytes: Int
    }

    /// Why a WebSocket upgrade is refused from its head alone, or nil to let the router decide.
    typealias UpgradeCheck = @Sendable (HeadScanner) -> WebError?

    private enum Phase {
        case head
        case http
        case webSocket
        case closing
    }

    private let limiter: ConnectionLimiter
    private let limits: Limits
    private let refusals: RefusalLog
    private let upgradeCheck: UpgradeCheck
    private var id: Int?
    private var phase = Phase.head
    private var head = HeadScanner()
    private var frames = MaskScanner()
    private var headTimer: Scheduled<Void>?
    private var stallTimer: Scheduled<Void>?

    init(limiter: ConnectionLimiter, limits: Limits, refusals: RefusalLog, upgradeCheck: @escaping UpgradeCheck) {
        self.limiter = limiter
        self.limits = limits
        self.refusals = refusals
        self.upgradeCheck = upgradeCheck
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { admit(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        admit(context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        release()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        release()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        stallTimer?.cancel()
        stallTimer = nil
        if !context.channel.isWritable {
            stallTimer = context.eventLoop.assumeIsolated().scheduleTask(in: limits.stallTimeout) {
                context.close(promise: nil)
            }
        }
        context.fireChannelWritabilityChanged()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        switch phase {
        case .closing:
            return
        case .http:
            context.fireChannelRead(data)
        case .webSocket:
            checkFrames(context, buffer)
        case .head:
            switch head.scan(buffer.readableBytesView, limit: limits.maxHeaderBytes) {
            case .more:
                context.fireChannelRead(data)
            case .tooLarge:
                refusals.note(.headTooLarge, peer: context.remoteAddress, on: context.eventLoop)
                refuse(
                    context, status: "431 Request Header Fields Too Large", code: .headerTooLarge,
                    message: "the request head is larger than \(limits.maxHeaderBytes) bytes")
            case .complete(let length):
                headTimer?.cancel()
                headTimer = nil
                if let declared = head.contentLength, declared > limits.maxBodyBytes {
                    refusals.note(.bodyTooLarge, peer: context.remoteAddress, on: context.eventLoop)
                    refuse(
                        context,
                        WebError(
                            status: .contentTooLarge, code: .tooLarge,
                            message:
                                "the request body may be \(limits.maxBodyBytes) bytes at most; \(declared) declared"))
                    return
                }
                if head.isWebSocketUpgrade, head.path == "/ws", let error = upgradeCheck(head) {
                    refuse(context, error)
                    return
                }
                if let id { limiter.headCompleted(id) }
                phase = head.isWebSocketUpgrade ? .webSocket : .http
                let headBytes = buffer.readSlice(length: length) ?? ByteBuffer()
                context.fireChannelRead(wrapInboundOut(headBytes))
                guard buffer.readableBytes > 0 else { return }
                if phase == .webSocket {
                    checkFrames(context, buffer)
                } else {
                    context.fireChannelRead(wrapInboundOut(buffer))
                }
            }
        }
    }

    private func admit(_ context: ChannelHandlerContext) {
        guard id == nil, phase == .head else { return }
        switch limiter.admit(context.channel) {
        case .admitted(let id, let evicted):
            self.id = id
            if let evicted {
                refusals.note(.evicted, peer: evicted.remoteAddress, on: context.eventLoop)
                evicted.close(promise: nil)
            }
            headTimer = context.eventLoop.assumeIsolated().scheduleTask(in: limits.headTimeout) { [self] in
                guard phase == .head else { return }
                refusals.note(.headTimeout, peer: context.remoteAddress, on: context.eventLoop)
                if head.bytes == 0 {
                    phase = .closing
                    context.close(promise: nil)
                } else {
                    refuse(
                        context, status: "408 Request Timeout", code: .timeout,
                        message:
                            "the request head did not arrive within \(limits.headTimeout.nanoseconds / 1_000_000) ms")
                }
            }
        case .refused:
            refusals.note(.busy, peer: context.remoteAddress, on: context.eventLoop)
            refuse(
                context, status: "503 Service Unavailable", code: .busy,
                message: "the web view serves \(limiter.cap) connections at once; try again later")
        }
    }

    /// Answers with `status` and the gateway's JSON error shape, then closes: written as bytes,
    /// since the HTTP pipeline behind has not seen a whole request to answer.
    private func refuse(
        _ context: ChannelHandlerContext, status: String, code: ErrorCode, message: String, headers: String = ""
    ) {
        // The same body as `WebError` gives (JSONValue: a message quoting the client is escaped).
        let body = JSONValue.object([
            "status": "error", "code": .string(code.rawValue), "message": .string(message),
        ]).encoded()
        let response =
            "HTTP/1.1 \(status)\r\nContent-Type: application/json; charset=utf-8\r\nCache-Control: no-store\r\n"
            + "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n"
            + (code == .busy ? "Retry-After: 5\r\n" : "") + headers + "\r\n" + body
        guard id != nil else {
            // Refused at the cap, it holds no place: its descriptor goes at once, or a flood of
            // refused connections would hold a descriptor each for the linger below.
            phase = .closing
            context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: response)), promise: nil)
            context.close(promise: nil)
            return
        }
        closeAfter(context, ByteBuffer(string: response))
    }

    /// Answers as the router would have answered `error`.
    private func refuse(_ context: ChannelHandlerContext, _ error: WebError) {
        refuse(
            context, status: "\(error.status.code) \(error.status.reasonPhrase)", code: error.code,
            message: error.message, headers: error.status == .unauthorized ? "WWW-Authenticate: Bearer\r\n" : "")
    }

    /// Writes `last`, ends the output and closes: what the client still sends is read and
    /// dropped meanwhile (closing with unread bytes would reset the connection, and the client
    /// could lose the answer), for a second at most. The connection keeps its place under the
    /// cap meanwhile (one without a whole head is still among the first to make room).
    private func closeAfter(_ context: ChannelHandlerContext, _ last: ByteBuffer) {
        phase = .closing
        headTimer?.cancel()
        headTimer = nil
        context.writeAndFlush(wrapOutboundOut(last), promise: nil)
        context.close(mode: .output, promise: nil)
        context.eventLoop.assumeIsolated().scheduleTask(in: .seconds(1)) { context.close(promise: nil) }
    }

    private func checkFrames(_ context: ChannelHandlerContext, _ buffer: ByteBuffer) {
        guard frames.scan(buffer.readableBytesView) else {
            // A close frame, code 1002 (protocol error), unmasked as a server's frames are.
            closeAfter(context, ByteBuffer(bytes: [0x88, 0x02, 0x03, 0xEA]))
            return
        }
        context.fireChannelRead(wrapInboundOut(buffer))
    }

    private func release() {
        headTimer?.cancel()
        stallTimer?.cancel()
        headTimer = nil
        stallTimer = nil
        if let id { limiter.release(id) }
        id = nil
    }
}
