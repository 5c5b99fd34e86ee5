import Foundation
import HomeModel
public import Logging
import NIOCore
import NIOPosix

// A continuous `_hap._tcp.local` browser, embedded (no mDNS daemon needed): a UDP socket on
// 224.0.0.251:5353 that asks with known-answer suppression on RFC 6762's schedule, keeps what
// accessories answer and announce for as long as their TTLs say, and tells its subscribers
// when an accessory appears, moves, changes its `c#`/`sf`, or leaves.

/// Follows every HAP accessory on the local network by its pairing id.
public actor HAPBrowser {
    /// What the browser tells its subscribers.
    public enum Event: Sendable, Hashable {
        /// An accessory was found, or its address, port, `c#`, `sf` or name changed.
        case updated(HAPDiscoveredAccessory)
        /// Its records were withdrawn (goodbye) or expired.
        case removed(id: String)
    }

    static let group = SocketAddress.mDNSGroup
    /// RFC 6762 §5.2: the interval between queries doubles up to at least an hour.
    static let maximumQueryInterval: Double = 3600
    /// How often the browser looks at its cache for expired records and due refreshes.
    static let tick: Double = 0.25

    let logger: Logger
    private let hub = EventHub<Event>()
    private var cache = MDNSCache()
    /// The accessories last published, by upper-cased pairing id.
    private var published: [String: HAPDiscoveredAccessory] = [:]
    private var instances: [String: String] = [:]
    private var channel: (any Channel)?
    private var tasks: [Task<Void, Never>] = []
    private var queryInterval: Double = 1
    private var nextQuery: Double = 0
    /// Questions for what is missing to resolve an instance, each with its own backoff, so an
    /// accessory that never answers one is not asked every second forever.
    private var missingBackoff: [DNSMessage.Question: (next: Double, interval: Double)] = [:]
    /// `lookup(id:)` callers waiting for a fresh answer, with when they asked.
    private var lookups: [UUID: (id: String, since: Double, continuation: CheckedContinuation<Void, Never>)] = [:]
    private var sendFailures = 0
    private let start = ContinuousClock.now

    public init(logger: Logger = Logger(label: "homemqtt.mdns")) { self.logger = logger }

    /// Events from now on; subscribe before `start()` to miss nothing.
    public nonisolated func events() -> AsyncStream<Event> { hub.subscribe() }

    /// The accessories known now.
    public func accessories() -> [HAPDiscoveredAccessory] { published.values.sorted { $0.id < $1.id } }

    /// The accessory with this pairing id, as known now.
    public func accessory(id: String) -> HAPDiscoveredAccessory? { published[id.uppercased()] }

    /// Opens the socket and starts browsing. Port 5353 is shared with any other responder or
    /// browser on the machine (SO_REUSEADDR/SO_REUSEPORT); when it cannot be had, the browser
    /// asks from another port and gets unicast answers (RFC 6762 §6.7), without announcements.
    public func start() async throws(HAPError) {
        guard channel == nil else { return }
        let (inbound, continuation) = AsyncStream.makeStream(of: [UInt8].self, bufferingPolicy: .bufferingNewest(256))
        var lastError: (any Error)?
        for port in [5353, 0] {
            do {
                let ch = try await DatagramBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                    .channelOption(.socketOption(.so_reuseaddr), value: 1)
                    .channelOption(.socketOption(NIOBSDSocket.Option(rawValue: SO_REUSEPORT)), value: 1)
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
                        // No multicast route (a machine with only loopback): queries fail
                        // too, and the browser stays quiet rather than failing the gateway.
                        logger.warning("mDNS: cannot join 224.0.0.251 (\(error)); accessories are not followed")
                    }
                }
                channel = ch
                logger.debug("mDNS browser listening on port \(ch.localAddress?.port ?? 0)")
                break
            } catch {
                lastError = error
            }
        }
        guard channel != nil else {
            throw HAPError(code: .io, message: "cannot open a UDP socket for mDNS: \(String(describing: lastError))")
        }
        // A first query after 20–120 ms (RFC 6762 §5.2), then 1 s, 2 s, 4 s, …
        nextQuery = now + Double.random(in: 0.02...0.12)
        tasks.append(
            Task { [weak self] in
                for await packet in inbound { await self?.received(packet) }
            })
        tasks.append(
            Task { [weak self] in
                while !Task.isCancelled {
                    await self?.housekeeping()
                    try? await Task.sleep(nanoseconds: UInt64(Self.tick * 1_000_000_000))
                }
            })
    }

    /// Closes the socket, ends the events and releases waiting lookups.
    public func stop() async {
        for t in tasks { t.cancel() }
        tasks = []
        if let channel { try? await channel.close().get() }
        channel = nil
        for (_, l) in lookups { l.continuation.resume() }
        lookups = [:]
        hub.finish()
    }

    /// Asks the network for this accessory afresh and waits (up to `timeout` seconds) for an
    /// answer; returns what is known then. For a connection that failed: the accessory may
    /// have moved while its old records still looked valid.
    public func lookup(id: String, timeout: Double) async -> HAPDiscoveredAccessory? {
        guard channel != nil else { return nil }
        let key = id.uppercased()
        let asked = now
        var questions = [DNSMessage.Question(name: MDNSCache.service, type: DNSMessage.RecordType.ptr)]
        if let instance = instances[key] {
            questions.append(DNSMessage.Question(name: instance, type: DNSMessage.RecordType.srv))
            questions.append(DNSMessage.Question(name: instance, type: DNSMessage.RecordType.txt))
        }
        // No known answers: every accessory, this one included, answers in full.
        send(DNSMessage(isResponse: false, questions: questions))
        let token = UUID()
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            lookups[token] = (key, asked, c)
            Task { [weak self] in
                try? await Task.sleep(nanoseconds: UInt64(max(0, timeout) * 1_000_000_000))
                await self?.endLookup(token)
            }
        }
        return published[key]
    }

    private func endLookup(_ token: UUID) {
        lookups.removeValue(forKey: token)?.continuation.resume()
    }

    // MARK: receiving

    private var now: Double {
        let d = ContinuousClock.now - start
        return Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }

    private func received(_ packet: [UInt8]) {
        // Anyone on the network can send anything: a packet that does not parse is dropped.
        guard let message = try? DNSMessage.parse(packet), message.isResponse else { return }
        let t = now
        guard cache.insert(message.records, now: t) || !lookups.isEmpty else { return }
        publish()
        // A lookup is answered by any fresh SRV of its accessory (the answer may repeat what
        // was known: then it is confirmed).
        let answered = Set(
            message.records.compactMap { r -> String? in
                guard case .srv = r.data else { return nil }
                return instances.first { $0.value.lowercased() == r.name.lowercased() }?.key
            })
        for (token, l) in lookups where answered.contains(l.id) && t >= l.since {
            endLookup(token)
        }
    }

    /// Publishes the differences between what the cache describes and what was published.
    private func publish() {
        let current = cache.accessories()
        for (id, entry) in current.sorted(by: { $0.key < $1.key }) {
            instances[id] = entry.instance
            if published[id] != entry.accessory {
                published[id] = entry.accessory
                hub.yield(.updated(entry.accessory))
            }
        }
        for id in published.keys.sorted() where current[id] == nil {
            published[id] = nil
            instances[id] = nil
            hub.yield(.removed(id: id))
        }
    }

    // MARK: asking

    private func housekeeping() {
        let t = now
        if cache.expire(now: t) { publish() }
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
            questions.append(DNSMessage.Question(name: MDNSCache.service, type: DNSMessage.RecordType.ptr))
            nextQuery = t + queryInterval
            queryInterval = min(queryInterval * 2, Self.maximumQueryInterval)
        }
        guard !questions.isEmpty else { return }
        let unique = Array(Set(questions)).sorted { ($0.name, $0.type) < ($1.name, $1.type) }
        let known = unique.flatMap { cache.knownAnswers(for: $0, now: t) }
        send(DNSMessage(isResponse: false, questions: unique, records: known))
    }

    private func send(_ message: DNSMessage) {
        guard let channel else { return }
        let bytes = message.encoded()
        var buffer = channel.allocator.buffer(capacity: bytes.count)
        buffer.writeBytes(bytes)
        let envelope = AddressedEnvelope(remoteAddress: Self.group, data: buffer)
        channel.writeAndFlush(envelope).whenFailure { [weak self] error in
            Task { await self?.sendFailed(error) }
        }
    }

    private func sendFailed(_ error: any Error) {
        // Said once at warning level: a network without multicast would repeat it forever.
        sendFailures += 1
        if sendFailures == 1 {
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

/// Hands each datagram's bytes to a stream, which ends with the channel: the continuous
/// browser's and the one-shot `discover`'s socket alike.
final class DatagramReceiver: ChannelInboundHandler, Sendable {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    let continuation: AsyncStream<[UInt8]>.Continuation
    init(_ c: AsyncStream<[UInt8]>.Continuation) { continuation = c }
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var envelope = unwrapInboundIn(data)
        if let bytes = envelope.data.readBytes(length: envelope.data.readableBytes) { continuation.yield(bytes) }
    }
    func channelInactive(context: ChannelHandlerContext) {
        continuation.finish()
        context.fireChannelInactive()
    }
}
