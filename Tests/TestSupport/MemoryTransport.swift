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
public final class MemoryTransport: MQTTTransport {
    public let broker: MemoryBroker
    /// Read as `MQTTClient` reads it: protocol version, No Local, Retain As Published, the
    /// maximum packet size and the will.
    public let configuration: MQTTConfiguration
    let id: UInt64
    private let room = Room()

    public init(broker: MemoryBroker, configuration: MQTTConfiguration = MQTTConfiguration()) {
        self.broker = broker
        self.configuration = configuration
        self.id = broker.register(configuration)
    }

    deinit { broker.disconnect(id, forget: true) }

    public var connectionState: MQTTConnectionState { broker.client(id) { $0.connectionState } }

    public var protocolVersion: MQTTProtocolVersion { configuration.protocolVersion }

    /// The broker's limits; an MQTT 3.1.1 CONNACK carries none, so then only the configured
    /// maximum packet size.
    public var brokerLimits: MQTTBrokerLimits {
        var limits = protocolVersion == .v5 ? broker.limits : MQTTBrokerLimits()
        limits.configuredMaximumPacketSize = configuration.maximumPacketSize
        limits.maximumTopicLevels = configuration.maximumTopicLevels
        return limits
    }

    // MARK: The connection

    public func connect() { broker.connect(id) }

    /// A clean DISCONNECT: no will; the streams finish.
    public func disconnect() { broker.disconnect(id) }

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
        try broker.publish(message, from: id)
        return true
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
