import Foundation
public import Logging
import NIOCore
import NIOPosix
public import ServiceLifecycle

// An embedded mDNS responder for one service instance (no daemon needed; avahi, if present,
// shares port 5353): it probes for its names, renames itself "Name (2)" when another holds
// them, announces, answers queries (unicast when asked), announces again when its TXT changes,
// and says goodbye when it stops. What it says is `MDNSAdvertisement`'s; this is the socket and
// the schedule. IPv4 multicast, on the default route and every admitted interface, as the
// browser asks; AAAA records are announced there too.

/// Advertises one service instance for as long as `run()` runs.
public actor MDNSResponder: Service {
    /// What the owner and the receiver tell the schedule.
    enum Event: Sendable {
        case txt([String: String])
        case conflict
    }

    public nonisolated let interfaces: MDNSInterfaces
    let logger: Logger
    /// The instance as first asked for; renames count from it.
    private let base: MDNSServiceInstance
    private var advertisement: MDNSAdvertisement
    private var probing = true
    private var channel: (any Channel)?
    private var joined: [NIONetworkDevice] = []
    private nonisolated let events: AsyncStream<Event>
    private nonisolated let eventsContinuation: AsyncStream<Event>.Continuation

    /// - Parameter addresses: the host's addresses to announce; nil: those of the admitted
    ///   interfaces (`MDNSResponder.addresses(admitting:)`).
    public init(
        instance: MDNSServiceInstance, addresses: [String]? = nil, interfaces: MDNSInterfaces = .all,
        logger: Logger = Logger(label: "homemqtt.mdns")
    ) {
        base = instance
        self.interfaces = interfaces
        self.logger = logger
        advertisement = MDNSAdvertisement(
            instance: instance, addresses: addresses ?? Self.addresses(admitting: interfaces))
        (events, eventsContinuation) = AsyncStream.makeStream(of: Event.self)
    }

    /// The name announced now (after a rename, not the one asked for).
    public var name: String { advertisement.instance.name }

    /// Changes the TXT record: announced at once, from any thread (the HAP server's status
    /// callback is synchronous).
    public nonisolated func update(txt: [String: String]) {
        eventsContinuation.yield(.txt(txt))
    }

    /// The addresses of the admitted interfaces: IPv4 and IPv6, loopback only when there is
    /// nothing else (a test's network namespace), each once.
    public static func addresses(admitting interfaces: MDNSInterfaces) -> [String] {
        let devices = (try? System.enumerateDevices()) ?? []
        var all: [(address: String, loopback: Bool)] = []
        for device in devices where interfaces.admits(device.name) {
            guard let ip = device.address?.ipAddress else { continue }
            let loopback = ip.hasPrefix("127.") || ip == "::1"
            all.append((ip, loopback))
        }
        let wanted = all.contains { !$0.loopback } ? all.filter { !$0.loopback } : all
        var seen: Set<String> = []
        return wanted.map(\.address).filter { seen.insert($0).inserted }
    }

    public func run() async throws {
        defer { eventsContinuation.finish() }
        let inbound = try await open()
        // A graceful shutdown ends the events, so the schedule ends and the goodbye is sent.
        await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { group in
                group.addTask {
                    for await (bytes, from) in inbound { await self.received(bytes, from: from) }
                }
                group.addTask {
                    await self.schedule()
                    // Closing the socket ends the receiver too.
                    await self.finish()
                }
            }
        } onGracefulShutdown: {
            self.eventsContinuation.finish()
        }
    }

    /// The goodbye, awaited before the socket closes (RFC 6762 §10.1): browsers drop the
    /// instance now rather than when its records expire.
    private func finish() async {
        if !probing { await send(advertisement.goodbye, wait: true) }
        try? await channel?.close().get()
        channel = nil
    }

    // MARK: the schedule

    /// Probes, announces, and then follows the events: a TXT change is announced, a conflict
    /// sends it back to probing under the next name. Ends on cancellation or graceful shutdown.
    private func schedule() async {
        var events = self.events.makeAsyncIterator()
        var conflicts = 0
        while !Task.isCancelled, !Task.isShuttingDownGracefully {
            // RFC 6762 §8.1: three probes 250 ms apart, the first after 0–250 ms; after 15
            // conflicts, a second between tries (§8.1's rate limit, made simpler).
            probing = true
            pendingConflict = false
            if conflicts >= 15 { try? await Task.sleep(for: .seconds(1)) }
            try? await Task.sleep(for: .milliseconds(Int.random(in: 0...250)))
            for _ in 0..<3 where !pendingConflict {
                await send(advertisement.probe)
                try? await Task.sleep(for: .milliseconds(250))
            }
            guard !Task.isCancelled, !Task.isShuttingDownGracefully else { return }
            if pendingConflict {
                conflicts += 1
                rename()
                continue
            }
            probing = false
            logger.info(
                "mDNS: advertising \(advertisement.instance.fullName) on port \(advertisement.instance.port)",
                metadata: ["addresses": "\(advertisement.addresses.joined(separator: ", "))"])
            await announce()
            // Until a conflict: TXT changes announced, twice each (§8.3).
            var conflicted = false
            while !conflicted, let event = await events.next() {
                switch event {
                case .txt(let txt):
                    guard txt != advertisement.instance.txt else { continue }
                    advertisement.instance.txt = txt
                    await announce()
                case .conflict:
                    conflicted = true
                }
            }
            guard conflicted else { return }
            conflicts += 1
            rename()
        }
    }

    /// Set by the receiver while probing.
    private var pendingConflict = false
    /// When every record was last multicast (an announcement); a QU question is answered by
    /// unicast within a quarter of the shortest TTL after it.
    private var lastMulticast: ContinuousClock.Instant?
    static let recentlyMulticast = Duration.seconds(Int(MDNSAdvertisement.hostTTL) / 4)

    private func announce() async {
        lastMulticast = .now
        await send(advertisement.announcement)
        try? await Task.sleep(for: .seconds(1))
        guard !Task.isCancelled else { return }
        await send(advertisement.announcement)
    }

    private func rename() {
        let from = advertisement.instance.name
        advertisement.instance = MDNSAdvertisement.renamed(advertisement.instance, base: base)
        logger.notice(
            "mDNS: '\(from)' is taken on the network; advertising as '\(advertisement.instance.name)'")
    }

    // MARK: receiving

    private func received(_ bytes: [UInt8], from: SocketAddress) async {
        // Anyone on the network can send anything: a packet that does not parse is dropped.
        guard let message = try? DNSMessage.parse(bytes) else { return }
        if advertisement.conflicts(with: message) {
            if probing {
                pendingConflict = true
            } else {
                eventsContinuation.yield(.conflict)
            }
            return
        }
        guard !probing, var answer = advertisement.answer(to: message) else { return }
        if from.port != 5353 {
            // A legacy unicast query (RFC 6762 §6.7): its id and questions repeated, short
            // TTLs, no cache-flush bits, to its own port.
            answer.id = message.id
            answer.questions = message.questions
            answer.records = answer.records.map {
                var r = $0
                r.ttl = min(r.ttl, 10)
                r.cacheFlush = false
                return r
            }
            await send(answer, to: from)
        } else if message.questions.allSatisfy(\.unicastResponse), let last = lastMulticast,
            ContinuousClock.now - last < Self.recentlyMulticast
        {
            // QU (RFC 6762 §5.4): unicast, unless the records were not multicast in the last
            // quarter of their TTL, when everyone's cache gains by a multicast answer.
            await send(answer, to: from)
        } else {
            await send(answer)
        }
    }

    // MARK: the socket

    private func open() async throws -> AsyncStream<([UInt8], SocketAddress)> {
        let (inbound, continuation) = AsyncStream.makeStream(
            of: ([UInt8], SocketAddress).self, bufferingPolicy: .bufferingNewest(256))
        let ch = try await DatagramBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.socketOption(.so_reuseaddr), value: 1)
            .channelOption(.socketOption(NIOBSDSocket.Option(rawValue: SO_REUSEPORT)), value: 1)
            .channelInitializer { ch in
                ch.eventLoop.makeCompletedFuture {
                    try ch.pipeline.syncOperations.addHandler(AddressedReceiver(continuation))
                }
            }
            .bind(host: "0.0.0.0", port: 5353).get()
        if let multicast = ch as? any MulticastChannel {
            do { try await multicast.joinGroup(SocketAddress.mDNSGroup).get() } catch {
                logger.warning("mDNS: cannot join 224.0.0.251 (no multicast route?): \(error)")
            }
            let devices = ((try? System.enumerateDevices()) ?? []).filter { device in
                guard case .v4(let v4)? = device.address else { return false }
                return device.multicastSupported && interfaces.admits(device.name)
                    && v4.address.sin_addr.s_addr != INADDR_ANY
            }
            for device in devices {
                do {
                    try await multicast.joinGroup(SocketAddress.mDNSGroup, device: device).get()
                    joined.append(device)
                } catch let error as IOError where error.errnoCode == EADDRINUSE {
                    continue
                } catch {
                    logger.warning("mDNS: cannot join 224.0.0.251 on \(device.name): \(error)")
                }
            }
        }
        channel = ch
        return inbound
    }

    /// Sends to the group on the default route and each joined interface, or to one address.
    /// `wait`: until the event loop has written it (the goodbye, before the socket closes).
    private func send(_ message: DNSMessage, to address: SocketAddress? = nil, wait: Bool = false) async {
        guard let channel else { return }
        let bytes = message.encoded(limit: DNSMessage.maximumPacketSize)
        var buffer = channel.allocator.buffer(capacity: bytes.count)
        buffer.writeBytes(bytes)
        var writes: [EventLoopFuture<Void>] = []
        let envelope = AddressedEnvelope(remoteAddress: address ?? SocketAddress.mDNSGroup, data: buffer)
        writes.append(channel.writeAndFlush(envelope))
        if address == nil, !joined.isEmpty, let options = channel as? any SocketOptionProvider {
            for device in joined {
                guard case .v4(let v4)? = device.address else { continue }
                writes.append(options.setIPMulticastIF(v4.address.sin_addr))
                writes.append(channel.writeAndFlush(envelope))
            }
            writes.append(options.setIPMulticastIF(in_addr(s_addr: INADDR_ANY)))
        }
        for write in writes {
            if wait {
                do { try await write.get() } catch { logger.debug("mDNS: cannot send: \(error)") }
            } else {
                write.whenFailure { [logger] error in logger.debug("mDNS: cannot send: \(error)") }
            }
        }
    }
}

/// Hands each datagram and its sender to a stream, which ends with the channel.
final class AddressedReceiver: ChannelInboundHandler, Sendable {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    let continuation: AsyncStream<([UInt8], SocketAddress)>.Continuation
    init(_ c: AsyncStream<([UInt8], SocketAddress)>.Continuation) { continuation = c }
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var envelope = unwrapInboundIn(data)
        if let bytes = envelope.data.readBytes(length: envelope.data.readableBytes) {
            continuation.yield((bytes, envelope.remoteAddress))
        }
    }
    func channelInactive(context: ChannelHandlerContext) {
        continuation.finish()
        context.fireChannelInactive()
    }
}
