import HomeModel
import NIOCore

/// First in every web connection's pipeline, on the raw bytes: what the HTTP and WebSocket
/// parsers behind it do not bound.
///
/// - Admission: the connection takes a place under `ConnectionLimiter`'s cap, or is answered
///   503 and closed.
/// - The first request head must be whole within `headTimeout` and `maxHeaderBytes`: a client
///   that opens and then says little is closed (408), one that sends a head too large is answered
///   431 and closed. Later heads on a keep-alive connection are bounded by the HTTP decoder's
///   limits and Hummingbird's idle timeout.
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
    }

    private enum Phase {
        case head
        case http
        case webSocket
        case closing
    }

    private let limiter: ConnectionLimiter
    private let limits: Limits
    private var id: Int?
    private var phase = Phase.head
    private var head = HeadScanner()
    private var frames = MaskScanner()
    private var headTimer: Scheduled<Void>?
    private var stallTimer: Scheduled<Void>?

    init(limiter: ConnectionLimiter, limits: Limits) {
        self.limiter = limiter
        self.limits = limits
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
                refuse(
                    context, status: "431 Request Header Fields Too Large", code: .headerTooLarge,
                    message: "the request head is larger than \(limits.maxHeaderBytes) bytes")
            case .complete(let length):
                headTimer?.cancel()
                headTimer = nil
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
            evicted?.close(promise: nil)
            headTimer = context.eventLoop.assumeIsolated().scheduleTask(in: limits.headTimeout) { [self] in
                guard phase == .head else { return }
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
            refuse(
                context, status: "503 Service Unavailable", code: .busy,
                message: "the web view serves \(limiter.cap) connections at once; try again later")
        }
    }

    /// Answers with `status` and the gateway's JSON error shape, then closes: written as bytes,
    /// since the HTTP pipeline behind has not seen a whole request to answer.
    private func refuse(_ context: ChannelHandlerContext, status: String, code: ErrorCode, message: String) {
        let body = #"{"status":"error","code":"\#(code.rawValue)","message":"\#(message)"}"#
        let response =
            "HTTP/1.1 \(status)\r\nContent-Type: application/json; charset=utf-8\r\n"
            + "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n"
            + (code == .busy ? "Retry-After: 5\r\n" : "") + "\r\n" + body
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

/// Where a request head ends (the empty line, CRLF or a bare LF as the HTTP parser accepts),
/// how long it is, and whether it asks for a WebSocket (`Upgrade: websocket`).
struct HeadScanner {
    enum Result: Equatable {
        case more
        case tooLarge
        /// The head ends after `length` bytes of the buffer just scanned.
        case complete(length: Int)
    }

    private(set) var bytes = 0
    private(set) var isWebSocketUpgrade = false
    private var line: [UInt8] = []
    private var sawLine = false

    mutating func scan(_ data: ByteBufferView, limit: Int) -> Result {
        var offset = 0
        for byte in data {
            offset += 1
            bytes += 1
            if bytes > limit { return .tooLarge }
            switch byte {
            case UInt8(ascii: "\r"):
                continue
            case UInt8(ascii: "\n"):
                if line.isEmpty {
                    // Empty lines before the request line are allowed and skipped (RFC 9112 §2.2).
                    if sawLine { return .complete(length: offset) }
                    continue
                }
                sawLine = true
                noteHeader()
                line.removeAll(keepingCapacity: true)
            default:
                // Only the start of a line is kept: enough to recognise an Upgrade header.
                if line.count < 64 { line.append(byte) }
            }
        }
        return .more
    }

    private mutating func noteHeader() {
        let text = String(decoding: line, as: UTF8.self).lowercased()
        guard text.hasPrefix("upgrade:") else { return }
        if text.dropFirst("upgrade:".count).contains("websocket") { isWebSocketUpgrade = true }
    }
}

/// Follows a client's WebSocket frames through their headers and lengths, to see the mask bit
/// of each; false as soon as one is unmasked.
struct MaskScanner {
    private var header: [UInt8] = []
    private var payloadLeft: UInt64 = 0

    mutating func scan(_ data: ByteBufferView) -> Bool {
        var index = data.startIndex
        while index < data.endIndex {
            if payloadLeft > 0 {
                let skip = Int(min(payloadLeft, UInt64(data.endIndex - index)))
                index += skip
                payloadLeft -= UInt64(skip)
                continue
            }
            header.append(data[index])
            index += 1
            if header.count == 2, header[1] & 0x80 == 0 { return false }
            guard header.count >= 2 else { continue }
            let short = header[1] & 0x7F
            let extended = short == 126 ? 2 : short == 127 ? 8 : 0
            guard header.count == 2 + extended + 4 else { continue }
            payloadLeft =
                extended == 0 ? UInt64(short) : header[2..<(2 + extended)].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            header.removeAll(keepingCapacity: true)
        }
        return true
    }
}
