import Foundation
public import Logging
import NIOCore
import NIOPosix
public import ServiceLifecycle
import Synchronization

// A continuous browser for one service type, embedded (no mDNS daemon needed): a UDP socket on
// 224.0.0.251:5353, joined on the default multicast route and on every other multicast-capable
// IPv4 interface the filter admits, that asks on each with known-answer suppression on RFC
// 6762's schedule, keeps what
// instances answer and announce for as long as their TTLs say, refreshes records before they
// expire, and asks for what is missing to resolve an instance. What the records mean is the
// caller's: it reads `updates` (HAP's `HAPBrowser` follows accessories by pairing id).

/// Browses one service type (`_hap._tcp.local`) for as long as `run()` runs.
public actor MDNSBrowser: Service {
    /// What changed: sent for every response received (so that a caller waiting for an answer
    /// sees it even when it repeats what was known) and for every expiry.
    public struct Update: Sendable {
        /// Whether the records held changed.
        public var changed: Bool
        /// Every record held now, oldest first.
        public var records: [DNSMessage.Record]
        /// The records of the response that came (none for an expiry).
        public var received: [DNSMessage.Record]
        /// The interface the response came in on (`wlan0`), over IPv4 or IPv6: nil for an expiry,
        /// or when the kernel did not say. `homemqtt doctor` checks its router-advertisement
        /// settings.
        public var interface: String? = nil
    }

    static let group = SocketAddress.mDNSGroup
    /// RFC 6762 §5.2: the interval between queries doubles up to at least an hour.
    static let maximumQueryInterval: Double = 3600
    /// How often the browser looks at its cache for expired records and due refreshes.
    static let tick: Double = 0.25

    public nonisolated let service: String
    /// Which interfaces, beyond the default route's, the browser joins and asks on.
    public nonisolated let interfaces: MDNSInterfaces
    /// The interfaces joined besides the default route's: queries go out on each.
    private var joined: [NIONetworkDevice] = []
    /// Why the IPv4 socket could not join the group, if it could not.
    var ipv4Problem: String?
    /// The IPv6 socket (`[::]:5353`, ff02::fb), when the machine has IPv6 (MDNSBrowser+IPv6).
    var channel6: (any Channel)?
    /// The interfaces it joined ff02::fb on: queries go out on each, and a link-local address
    /// heard on one is given its scope.
    var joined6: [NIONetworkDevice] = []
    /// Interface names by index, beyond those joined (`interfaceName`).
    private var otherInterfaces: [Int: String] = [:]
    /// Every update, for one reader; finishes when `run()` ends.
    public nonisolated let updates: AsyncStream<Update>
    private let updatesContinuation: AsyncStream<Update>.Continuation
    let logger: Logger
    private var cache: MDNSCache
    private var channel: (any Channel)?
    private var queryInterval: Double = 1
    private var nextQuery: Double = 0
    /// Questions for what is missing to resolve an instance, each with its own backoff, so an
    /// instance that never answers one is not asked every second forever.
    private var missingBackoff: [DNSMessage.Question: (next: Double, interval: Double)] = [:]
    /// Counted outside the actor: a failed send is reported on the channel's event loop.
    private nonisolated let sendFailures = Atomic<Int>(0)
    private let start = ContinuousClock.now

    public init(service: String, interfaces: MDNSInterfaces = .all, logger: Logger = Logger(label: "homemqtt.mdns")) {
        self.service = service
        self.interfaces = interfaces
        self.logger = logger
        cache = MDNSCache(service: service)
        (updates, updatesContinuation) = AsyncStream.makeStream(of: Update.self)
    }

    /// Opens the socket and browses until cancelled; then closes it and ends `updates`. Port
    /// 5353 is shared with any other responder or browser on the machine (SO_REUSEADDR and
    /// SO_REUSEPORT); when it cannot be had, the browser asks from another port and gets
    /// unicast answers (RFC 6762 §6.7), without announcements. Throws only when no socket
    /// can be opened at all.
    public func run() async throws(MDNSError) {
        defer { updatesContinuation.finish() }
        let inbound = try await open()
        let inbound6 = await openIPv6()
        sayWhatIsFollowed()
        // A first query after 20–120 ms (RFC 6762 §5.2), then 1 s, 2 s, 4 s, …
        nextQuery = now + Double.random(in: 0.02...0.12)
        await withDiscardingTaskGroup { group in
            group.addTask {
                for await datagram in inbound {
                    await self.received(datagram.bytes, interfaceIndex: datagram.interfaceIndex, ipv6: false)
                }
            }
            if let inbound6 {
                group.addTask {
                    for await datagram in inbound6 {
                        await self.received(datagram.bytes, interfaceIndex: datagram.interfaceIndex, ipv6: true)
                    }
                }
            }
            group.addTask {
                while !Task.isCancelled {
                    await self.housekeeping()
                    try? await Task.sleep(for: .seconds(Self.tick))
                }
            }
        }
        if let channel { try? await channel.close().get() }
        channel = nil
        if let channel6 { try? await channel6.close().get() }
        channel6 = nil
    }

    /// Sends these questions without known answers, so that every instance answers them in
    /// full; false when the browser is not running.
    public func ask(_ questions: [DNSMessage.Question]) -> Bool {
        guard channel != nil else { return false }
        send(DNSMessage(isResponse: false, questions: questions))
        return true
    }

    private func open() async throws(MDNSError) -> AsyncStream<Datagram> {
        let (inbound, continuation) = AsyncStream.makeStream(of: Datagram.self, bufferingPolicy: .bufferingNewest(256))
        var lastError: (any Error)?
        for port in [5353, 0] {
            do {
                let ch = try await DatagramBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                    .channelOption(.socketOption(.so_reuseaddr), value: 1)
                    .channelOption(.socketOption(NIOBSDSocket.Option(rawValue: SO_REUSEPORT)), value: 1)
                    // The interface each datagram came in on, for `Update.interface`.
                    .channelOption(.receivePacketInfo, value: true)
                    .channelInitializer { ch in
                        ch.eventLoop.makeCompletedFuture {
                            try ch.pipeline.syncOperations.addHandler(DatagramReceiver(continuation))
                        }
                    }
                    .bind(host: "0.0.0.0", port: port).get()
                if port == 5353, let multicast = ch as? any MulticastChannel {
                    do {
                        try await multicast.joinGroup(Self.group).get()
                    } catch {
                        // No multicast route (a machine with only loopback, or without IPv4):
                        // queries fail too, and the browser stays quiet rather than failing
                        // its caller. Said once IPv6 is open too (`sayWhatIsFollowed`).
                        ipv4Problem = "cannot join 224.0.0.251: \(error)"
                    }
                    let devices = interfaceDevices { device in
                        guard case .v4(let v4)? = device.address else { return false }
                        return v4.address.sin_addr.s_addr != INADDR_ANY
                    }
                    joined = await join(Self.group, on: devices, multicast)
                }
                channel = ch
                logger.debug("mDNS browser for \(service) listening on port \(ch.localAddress?.port ?? 0)")
                return inbound
            } catch {
                lastError = error
            }
        }
        continuation.finish()
        throw MDNSError(code: .io, message: "cannot open a UDP socket for mDNS: \(String(describing: lastError))")
    }

    /// The multicast-capable interfaces the filter admits whose address `family` accepts, one
    /// entry per name (a device is listed once per address).
    func interfaceDevices(_ family: (NIONetworkDevice) -> Bool) -> [NIONetworkDevice] {
        let devices: [NIONetworkDevice]
        do { devices = try System.enumerateDevices() } catch {
            logger.warning("mDNS: cannot list the network interfaces (\(error)); asking on the default route only")
            return []
        }
        var seen: Set<String> = []
        return devices.filter {
            $0.multicastSupported && interfaces.admits($0.name) && family($0) && seen.insert($0.name).inserted
        }
    }

    /// Joins `group` on each of `devices`; returns those joined. An interface already in the
    /// group (the default route's, for IPv4) answers 'in use': its queries go out by default.
    func join(_ group: SocketAddress, on devices: [NIONetworkDevice], _ channel: any MulticastChannel) async
        -> [NIONetworkDevice]
    {
        var joined: [NIONetworkDevice] = []
        for device in devices {
            do {
                try await channel.joinGroup(group, device: device).get()
                joined.append(device)
                logger.debug("mDNS: joined \(group) on \(device.name)")
            } catch let error as IOError where error.errnoCode == EADDRINUSE {
                continue
            } catch {
                logger.warning("mDNS: cannot join \(group) on \(device.name): \(error)")
            }
        }
        return joined
    }

    // MARK: receiving

    private var now: Double {
        let d = ContinuousClock.now - start
        return Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }

    /// A response heard on `interfaceIndex`. Over IPv6 a link-local address in it gets that
    /// interface as its scope (`fe80::1%wlan0`), without which it cannot be connected to; over
    /// IPv4 addresses are kept as announced, and the interface is only said (`Update.interface`).
    func received(_ packet: [UInt8], interfaceIndex: Int? = nil, ipv6: Bool = false) {
        // Anyone on the network can send anything: a packet that does not parse is dropped.
        guard let message = try? DNSMessage.parse(packet), message.isResponse else { return }
        var records = message.records
        let interface = interfaceIndex.flatMap(interfaceName)
        if ipv6, let interface, joined6.contains(where: { $0.name == interface }) {
            records = records.map { $0.scopingLinkLocal(to: interface) }
        }
        let changed = cache.insert(records, now: now)
        updatesContinuation.yield(
            Update(changed: changed, records: cache.records(), received: records, interface: interface))
    }

    /// The name of the interface of this index: a joined one's, else the system's list's (the
    /// default route's interface is not among those joined over IPv4), read again only for an
    /// index not seen before, not for every packet.
    private func interfaceName(_ index: Int) -> String? {
        if let device = (joined + joined6).first(where: { $0.interfaceIndex == index }) { return device.name }
        if let name = otherInterfaces[index] { return name }
        for device in (try? System.enumerateDevices()) ?? [] { otherInterfaces[device.interfaceIndex] = device.name }
        return otherInterfaces[index]
    }

    // MARK: asking

    private func housekeeping() {
        let t = now
        if cache.expire(now: t) {
            updatesContinuation.yield(Update(changed: true, records: cache.records(), received: []))
        }
        var questions = cache.dueRefreshes(now: t)
        let missing = cache.missing()
        missingBackoff = missingBackoff.filter { missing.contains($0.key) }
        for q in missing {
            let state = missingBackoff[q] ?? (next: t, interval: 1)
            guard t >= state.next else { continue }
            questions.append(q)
            missingBackoff[q] = (t + state.interval, min(state.interval * 2, Self.maximumQueryInterval))
        }
        if t >= nextQuery {
            questions.append(DNSMessage.Question(name: service, type: DNSMessage.RecordType.ptr))
            nextQuery = t + queryInterval
            queryInterval = min(queryInterval * 2, Self.maximumQueryInterval)
        }
        guard !questions.isEmpty else { return }
        let unique = Array(Set(questions)).sorted { ($0.name, $0.type) < ($1.name, $1.type) }
        let known = unique.flatMap { cache.knownAnswers(for: $0, now: t) }
        send(DNSMessage(isResponse: false, questions: unique, records: known))
    }

    /// Sends on the default route, then on each interface joined. The socket's outgoing
    /// interface is set before each copy and set back after; the event loop runs the option
    /// changes and writes in the order they are asked for, and a UDP write leaves at once.
    private func send(_ message: DNSMessage) {
        guard let channel else { return }
        let bytes = message.encoded()
        var buffer = channel.allocator.buffer(capacity: bytes.count)
        buffer.writeBytes(bytes)
        let envelope = AddressedEnvelope(remoteAddress: Self.group, data: buffer)
        sendIPv6(bytes)
        // Without IPv4 multicast (said once, `sayWhatIsFollowed`) every IPv4 send would fail:
        // a second warning that queries cannot be sent would be wrong over IPv6.
        guard ipv4Problem == nil else { return }
        channel.writeAndFlush(envelope).whenFailure { error in self.sendFailed(error) }
        guard !joined.isEmpty, let options = channel as? any SocketOptionProvider else { return }
        for device in joined {
            guard case .v4(let v4)? = device.address else { continue }
            options.setIPMulticastIF(v4.address.sin_addr).whenFailure { error in self.sendFailed(error) }
            channel.writeAndFlush(envelope).whenFailure { error in self.sendFailed(error) }
        }
        options.setIPMulticastIF(in_addr(s_addr: INADDR_ANY)).whenFailure { error in self.sendFailed(error) }
    }

    nonisolated func sendFailed(_ error: any Error) {
        // Said once at warning level: a network without multicast would repeat it forever.
        if sendFailures.wrappingAdd(1, ordering: .relaxed).newValue == 1 {
            logger.warning("mDNS: cannot send a query (no multicast route?): \(error)")
        } else {
            logger.debug("mDNS: cannot send a query: \(error)")
        }
    }
}

extension SocketAddress {
    /// 224.0.0.251:5353, where mDNS is spoken.
    static let mDNSGroup: SocketAddress = {
        do { return try SocketAddress(ipAddress: "224.0.0.251", port: 5353) } catch {
            preconditionFailure("224.0.0.251 is a valid address")
        }
    }()
}

/// A datagram's bytes, and the interface it came in on where the socket asks for packet info
/// (the browser's IPv6 socket).
struct Datagram: Sendable {
    var bytes: [UInt8]
    var interfaceIndex: Int?
}

/// Hands each datagram to a stream, which ends with the channel: the continuous browser's
/// sockets and a one-shot query's alike.
final class DatagramReceiver: ChannelInboundHandler, Sendable {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    let continuation: AsyncStream<Datagram>.Continuation
    init(_ c: AsyncStream<Datagram>.Continuation) { continuation = c }
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var envelope = unwrapInboundIn(data)
        if let bytes = envelope.data.readBytes(length: envelope.data.readableBytes) {
            continuation.yield(Datagram(bytes: bytes, interfaceIndex: envelope.metadata?.packetInfo?.interfaceIndex))
        }
    }
    func channelInactive(context: ChannelHandlerContext) {
        continuation.finish()
        context.fireChannelInactive()
    }
}

/// The interfaces mDNS is spoken on besides the default route's, by name (`eth0`, `wlan0`):
/// all multicast-capable ones unless `allow` lists some; never those `deny` lists.
public struct MDNSInterfaces: Sendable, Hashable {
    public var allow: [String]?
    public var deny: [String]

    public static let all = MDNSInterfaces(allow: nil, deny: [])

    public init(allow: [String]?, deny: [String]) {
        self.allow = allow
        self.deny = deny
    }

    public func admits(_ name: String) -> Bool {
        !deny.contains(name) && (allow?.contains(name) ?? true)
    }
}
