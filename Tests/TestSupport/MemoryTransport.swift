public import MQTT
import ServiceLifecycle
import Synchronization

/// A client of a `MemoryBroker`: an `MQTTTransport` for tests that run a gateway in one process,
/// with no broker, socket or thread of its own. Publishing waits only while `hold()` says the
/// broker is behind; a message reaches every subscriber's stream before `publish` returns.
///
/// Run as a service, it connects at once and disconnects at graceful shutdown, as `MQTTClient`
/// does; `connect()`/`disconnect()` do the same outside a `ServiceGroup`. `loseConnection` and
/// `connect()` make a broker outage as a client sees it: `reconnecting`, the will published,
/// QoS 0 publishes dropped and QoS 1/2 ones sent when the connection is back.
///
/// A limit the broker never told (`MemoryBroker.Taken`) is learned as `MQTTClient` learns it
/// (`MQTTBrokerLimits.learn`, the same rule): a publish refused is counted, and either its
/// PUBACK said "packet too large" or the broker closed the connection at it; then the connection
/// is lost (`reconnecting`, the will), the limit told on `learnedLimits()` and the connection
/// made again, as the client's network thread does after its reconnect delay.
public final class MemoryTransport: MQTTTransport {
    public let broker: MemoryBroker
    /// Read as `MQTTClient` reads it: protocol version, No Local, Retain As Published, the
    /// maximum packet size and the will.
    public let configuration: MQTTConfiguration
    let id: UInt64
    private let room = Room()
    private let ledger = Mutex(Ledger())

    /// What the client knows of the broker's refusals, as `Connection` keeps it.
    struct Ledger {
        /// The largest publish packet the broker is known to have kept: a QoS 1/2 one
        /// acknowledged, and, under MQTT 3.1.1, a QoS 0 one written before it (the broker reads
        /// in order, and 3.1.1's only refusal is a lost connection).
        var largestKept = 0
        /// QoS 0 packets written since the last acknowledgement, larger than any kept.
        var unconfirmed: [Int] = []
        var learnedMaximumPacketSize: Int?
        var refusedCount = 0
        var learnedStreams: [UInt64: AsyncStream<MQTTLearnedLimit>.Continuation] = [:]
        var nextStream: UInt64 = 0

        mutating func kept(size: Int, qos: MQTTQoS, protocolVersion: MQTTProtocolVersion) {
            guard qos != .atMostOnce else {
                if size > largestKept { unconfirmed.append(size) }
                return
            }
            largestKept = max(largestKept, size)
            if protocolVersion == .v311 { largestKept = max(largestKept, unconfirmed.max() ?? 0) }
            unconfirmed = []
        }
    }

    public init(broker: MemoryBroker, configuration: MQTTConfiguration = MQTTConfiguration()) {
        self.broker = broker
        self.configuration = configuration
        self.id = broker.register(configuration)
    }

    deinit {
        broker.disconnect(id, forget: true)
        finishLearnedStreams()
    }

    public var connectionState: MQTTConnectionState { broker.client(id) { $0.connectionState } }

    public var protocolVersion: MQTTProtocolVersion { configuration.protocolVersion }

    /// The broker's limits; an MQTT 3.1.1 CONNACK carries none, so then only the configured
    /// maximum packet size.
    public var brokerLimits: MQTTBrokerLimits { ledger.withLock { limits(learned: $0) } }

    /// The limits with what `ledger` learned.
    private func limits(learned ledger: Ledger) -> MQTTBrokerLimits {
        var limits = protocolVersion == .v5 ? broker.limits : MQTTBrokerLimits()
        limits.configuredMaximumPacketSize = configuration.maximumPacketSize
        limits.maximumTopicLevels = configuration.maximumTopicLevels
        limits.learnedMaximumPacketSize = ledger.learnedMaximumPacketSize
        return limits
    }

    public var refusedPublishCount: Int { ledger.withLock { $0.refusedCount } }

    public func learnedLimits() -> AsyncStream<MQTTLearnedLimit> {
        let (stream, continuation) = AsyncStream.makeStream(of: MQTTLearnedLimit.self, bufferingPolicy: .unbounded)
        let key = ledger.withLock { ledger in
            ledger.nextStream += 1
            ledger.learnedStreams[ledger.nextStream] = continuation
            return ledger.nextStream
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.ledger.withLock { $0.learnedStreams.removeValue(forKey: key) }
        }
        return stream
    }

    /// Finishing runs the termination handlers, which take the lock: so finish outside it.
    private func finishLearnedStreams() {
        let streams = ledger.withLock { ledger in
            defer { ledger.learnedStreams = [:] }
            return Array(ledger.learnedStreams.values)
        }
        for stream in streams { stream.finish() }
    }

    // MARK: The connection

    public func connect() { broker.connect(id) }

    /// A clean DISCONNECT: no will; the streams finish.
    public func disconnect() {
        broker.disconnect(id)
        finishLearnedStreams()
    }

    /// The connection dropped: `reconnecting(error)` until `connect()`, and the will goes out.
    public func loseConnection(
        _ error: MQTTError = MQTTError(code: .connectionLost, message: "the memory broker dropped the connection")
    ) {
        broker.lose(id, error: error)
    }

    public func run() async throws {
        connect()
        try? await gracefulShutdown()
        disconnect()
    }

    // MARK: Publishing

    public func publish(
        _ topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool, properties: MQTTPublishProperties
    ) async throws(MQTTError) {
        await room.wait()
        _ = try send(topic, payload: payload, qos: qos, retain: retain, properties: properties)
    }

    public func publishWithoutWaiting(
        _ topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool, properties: MQTTPublishProperties
    ) throws(MQTTError) -> Bool {
        guard room.isOpen else { return false }
        return try send(topic, payload: payload, qos: qos, retain: retain, properties: properties)
    }

    /// From now until `release()` the connection has no room, as when the broker is behind:
    /// `publishWithoutWaiting` declines and `publish` waits.
    public func hold() { room.close() }

    /// Publishing goes on; what waited is sent in order.
    public func release() { room.open() }

    private func send(
        _ topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool, properties: MQTTPublishProperties
    ) throws(MQTTError) -> Bool {
        guard !topic.isEmpty, !topic.contains(where: { $0 == "+" || $0 == "#" || $0 == "\0" }) else {
            throw MQTTError(code: .invalidTopic, message: "'\(topic)' is not a valid topic to publish to")
        }
        // As MQTTClient: no deeper topic than the broker takes (mosquitto drops the client).
        let levels = MQTTTopicShape.levels(topic)
        guard levels <= configuration.maximumTopicLevels else {
            throw MQTTError(
                code: .invalidTopic,
                message: "a publish to '\(MQTTTopicShape.describe(topic))' has \(levels) levels, more than the "
                    + "broker takes (\(configuration.maximumTopicLevels), broker.max-topic-levels); not sent")
        }
        let limits = brokerLimits
        let sent = limits.qos(for: qos)
        let size = MQTTBrokerLimits.publishPacketSize(
            topic: topic, payloadCount: payload.count, qos: sent, properties: properties,
            protocolVersion: protocolVersion)
        guard limits.allows(packetSize: size) else {
            throw MQTTError(
                code: .packetTooLarge,
                message: "a publish to '\(topic)' would be a packet of \(size) bytes, "
                    + "more than the maximum packet size (\(limits.maximumPacketSize ?? 0)); not sent")
        }
        let message = MQTTMessage(
            topic: topic, payload: payload, qos: sent, retain: retain && limits.retainAvailable,
            properties: protocolVersion == .v5 ? properties : MQTTPublishProperties())
        switch try broker.publish(message, packetSize: size, from: id) {
        case .accepted:
            ledger.withLock { $0.kept(size: size, qos: sent, protocolVersion: protocolVersion) }
        case .refusedInAcknowledgement:
            tell(refused(size, fromLostConnection: false))
        case .closesConnection:
            // As `Connection.dropCulprit`: learned before the loss is known, told after it.
            let learned = refused(size, fromLostConnection: true)
            loseConnection(
                MQTTError(
                    code: .connectionLost,
                    message: "the memory broker closed the connection at a packet of \(size) bytes"))
            tell(learned)
            connect()
        }
        return true
    }

    /// Counts a publish of `size` bytes the broker refused and learns from it
    /// (`MQTTBrokerLimits.learn`); what was learned, if anything.
    private func refused(_ size: Int, fromLostConnection: Bool) -> MQTTLearnedLimit? {
        ledger.withLock { ledger in
            ledger.refusedCount += 1
            if fromLostConnection { ledger.unconfirmed = [] }
            var limits = limits(learned: ledger)
            let learned = limits.learn(
                refusedPacketSize: size, kept: ledger.largestKept, fromLostConnection: fromLostConnection)
            ledger.learnedMaximumPacketSize = limits.learnedMaximumPacketSize
            return learned
        }
    }

    private func tell(_ learned: MQTTLearnedLimit?) {
        guard let learned else { return }
        let streams = ledger.withLock { Array($0.learnedStreams.values) }
        for stream in streams { stream.yield(learned) }
    }

    // MARK: Subscriptions

    public func subscribe(_ filters: [(String, MQTTQoS)], ownMessages: Bool) async throws(MQTTError) {
        for (filter, _) in filters { try Self.validate(filter: filter) }
        broker.subscribe(id, filters, ownMessages: ownMessages)
    }

    public func unsubscribe(_ filter: String) async throws(MQTTError) {
        try Self.validate(filter: filter)
        broker.client(id) { $0.subscriptions.removeAll { $0.filter == filter } }
    }

    /// A filter's wildcards stand alone in their level, and `#` only last.
    static func validate(filter: String) throws(MQTTError) {
        let levels = filter.split(separator: "/", omittingEmptySubsequences: false)
        let valid =
            !filter.isEmpty && !filter.contains("\0")
            && levels.enumerated().allSatisfy { index, level in
                if level.contains("#") { return level == "#" && index == levels.count - 1 }
                return !level.contains("+") || level == "+"
            }
        guard valid else { throw MQTTError(code: .invalidTopic, message: "'\(filter)' is not a valid topic filter") }
    }

    // MARK: Streams

    public func messages() -> AsyncStream<MQTTMessage> {
        let (stream, continuation) = AsyncStream.makeStream(of: MQTTMessage.self, bufferingPolicy: .unbounded)
        let key = broker.observe(id) { $0.messageStreams[$1] = continuation }
        continuation.onTermination = { [broker, id] _ in
            broker.stopObserving(id) { $0.messageStreams[key] = nil }
        }
        return stream
    }

    public func connectionStates() -> AsyncStream<MQTTConnectionState> {
        let (stream, continuation) = AsyncStream.makeStream(of: MQTTConnectionState.self, bufferingPolicy: .unbounded)
        let key = broker.observe(id) { client, key in
            client.stateStreams[key] = continuation
            continuation.yield(client.connectionState)
        }
        continuation.onTermination = { [broker, id] _ in
            broker.stopObserving(id) { $0.stateStreams[key] = nil }
        }
        return stream
    }
}

/// Whether a `MemoryTransport` has room to publish, and who waits for it.
private final class Room: Sendable {
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((true, []))

    var isOpen: Bool { state.withLock { $0.open } }

    func close() { state.withLock { $0.open = false } }

    func open() {
        let waiters = state.withLock { state in
            state.open = true
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    func wait() async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state in
                if state.open { return true }
                state.waiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }
}
