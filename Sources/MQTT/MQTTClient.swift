/// An MQTT 5 / 3.1.1 client over libmosquitto 2.0.
///
/// ## Threading model
/// Each successful `connect()` creates one libmosquitto handle and one dedicated network thread
/// ("mqtt-network") that owns the handle for its whole life: it connects, runs `mosquitto_loop`, reconnects
/// with bounded exponential backoff, and finally disconnects and calls `mosquitto_destroy` itself. We run the
/// loop on our own thread (the same thing `mosquitto_loop_start` does, with `mosquitto_threaded_set(true)`)
/// rather than `mosquitto_loop_start`, because libmosquitto's built-in loop stops for good on TLS/DNS errors,
/// only knows whole-second reconnect delays and gives no hook to observe reconnect attempts.
///
/// All libmosquitto callbacks run on the network thread. They reach Swift through an `Unmanaged` box (the
/// `Connection`) given as userdata; every message is copied (topic, payload, properties) into Swift values
/// before the callback returns. Shared state lives behind `Synchronization.Mutex`es that are never held
/// while calling into libmosquitto (libmosquitto takes its own locks around callbacks).
///
/// While connected, the network thread can also run another part's work between its reads and writes
/// (`host(_:)`, `MQTTNetworkThreadGuest`): it then waits in `poll` for its socket or a wake-up pipe and runs
/// `mosquitto_loop` without waiting.
///
/// `publish`, `subscribe` and `unsubscribe` are called from any task: they hand the packet to libmosquitto
/// (which is thread-safe in threaded mode and wakes the network thread through its socket pair), so
/// callers never wait for the network thread's loop. A use count keeps the handle alive while such a call is
/// inside libmosquitto; the network thread destroys the handle only when that count is zero.
///
/// ## When `publish` returns
/// `publish` returns once libmosquitto accepted the message into its queue; it does not wait for the
/// PUBACK/PUBCOMP. Errors are reported for bad input (topic, payload size) and when the client is not connected.
/// - QoS 1/2 while reconnecting: queued by libmosquitto and sent after the reconnect.
/// - QoS 0 while reconnecting: dropped (returns normally; at-most-once semantics).
/// - Before `connect()` / after `disconnect()`: throws `no-connection` / `closed`.
///
/// ## Backpressure
/// The client counts publishes that libmosquitto accepted but has not finished: a QoS 0 message until
/// libmosquitto wrote it to the socket (its `on_publish` fires then), a QoS 1/2 message until the broker
/// acknowledged it (`on_publish` after PUBACK/PUBCOMP), and the bytes of their packets. When
/// `maxQueuedPublishes` are outstanding, or `maxQueuedBytes`, `publish` suspends until a quarter of
/// them have completed (so a fast publisher wakes once per batch); a packet larger than
/// `maxQueuedBytes` waits until nothing is outstanding and goes alone. Queued QoS 0 messages are
/// discarded by libmosquitto when the connection drops, so they are forgotten then. Memory for
/// queued publishes is therefore bounded by `maxQueuedBytes` plus one packet, however fast the
/// caller publishes.
///
/// ## Reconnecting
/// Only after a first successful CONNACK: a failed first `connect()` throws and leaves nothing running. Later
/// losses are retried forever with `reconnectDelayMin` doubling up to `reconnectDelayMax`, including refusals
/// (e.g. credentials revoked while running); each attempt is visible as `.reconnecting(error)`.
///
/// ## Subscriptions
/// Subscriptions are remembered. After a reconnect they are sent again unless the broker reports a present
/// session (persistent session: the broker kept them). `subscribe` while not connected records the filter and
/// returns at once; it is sent on the next (re)connect.
///
/// ## Shutdown
/// `disconnect()` stops reconnecting, lets outstanding publishes drain briefly (≤ 2 s), sends DISCONNECT (so no
/// will is published), stops the network thread without forcing it, destroys the handle and finishes the
/// streams returned by `messages()` and `connectionStates()`. It is idempotent and safe from any state.
internal import CMosquitto
import Foundation
public import Logging
import ServiceLifecycle
import Synchronization

/// `mosquitto_lib_init` once per process; Swift initialises globals exactly once, thread-safely.
private let libraryInitialization: Int32 = mosquitto_lib_init()

public final class MQTTClient: MQTTTransport {
    public let configuration: MQTTConfiguration
    let logger: Logger
    let core: ClientCore

    public init(configuration: MQTTConfiguration, logger: Logger = Logger(label: "homemqtt.mqtt")) {
        _ = libraryInitialization
        self.configuration = configuration
        self.logger = logger
        self.core = ClientCore()
    }

    deinit {
        // A client dropped without disconnect(): stop its thread (which destroys the handle itself) and end
        // the streams so that no consumer waits forever.
        core.state.withLock { $0.connection }?.requestStop(clean: true)
        core.finishStreams()
    }

    public var connectionState: MQTTConnectionState { core.state.withLock { $0.connectionState } }

    /// Publishes accepted by libmosquitto and not yet written (QoS 0) or acknowledged (QoS 1/2).
    public var queuedPublishCount: Int {
        core.state.withLock { $0.connection }?.control.withLock { $0.outstanding.count } ?? 0
    }

    /// The highest `queuedPublishCount` seen by the current connection, a publish acknowledged
    /// before its sender had recorded it counted too (for tests and diagnostics).
    var queuedPublishHighWater: Int {
        core.state.withLock { $0.connection }?.control.withLock { $0.highWater } ?? 0
    }

    // MARK: Connecting

    /// Connects and returns after a successful CONNACK. Throws on refusal, unreachable host, TLS failure or
    /// timeout (`connectTimeout`). After success the client reconnects by itself whenever the connection drops.
    /// With `fallBackToMQTT311`, an MQTT 5 CONNECT the broker refuses as a protocol is tried again as 3.1.1.
    public func connect() async throws(MQTTError) {
        if let existing = core.state.withLock({ $0.connection }) {
            // Already running (connected or reconnecting): wait for it rather than opening a second session.
            try await existing.awaitConnected(timeout: configuration.connectTimeout).get()
            return
        }
        var chosen = configuration
        if core.state.withLock({ $0.fellBackToMQTT311 }) { chosen.protocolVersion = .v311 }
        do throws(MQTTError) {
            try await open(chosen)
        } catch  where BrokerTLSProbe.mayBeTLS(error, configuration) && Self.mayRefuseMQTT5(error) {
            // A TLS listener closes a plain connection as a broker without MQTT 5 does: asked
            // once, in TLS, before blaming MQTT 5.
            if await speaksTLS() { throw Self.explainTLS(error, configuration) }
            guard chosen.protocolVersion == .v5 else { throw error }
            try await fallBack(after: error, chosen)
        } catch  where chosen.protocolVersion == .v5 && Self.mayRefuseMQTT5(error) {
            try await fallBack(after: error, chosen)
        }
    }

    /// Whether the broker's address answers in TLS, asked once per client.
    private func speaksTLS() async -> Bool {
        if let known = core.state.withLock({ $0.answersInTLS }) { return known }
        let answers = await BrokerTLSProbe.answersInTLS(host: configuration.host, port: configuration.port)
        core.state.withLock { $0.answersInTLS = answers }
        return answers
    }

    /// A plain connection to an address that answers in TLS.
    static func explainTLS(_ error: MQTTError, _ configuration: MQTTConfiguration) -> MQTTError {
        var explained = error
        explained.message += "; " + BrokerTLSProbe.hint(host: configuration.host, port: configuration.port)
        return explained
    }

    /// An MQTT 5 CONNECT refused as a protocol: MQTT 3.1.1 once, if the configuration allows.
    private func fallBack(after error: MQTTError, _ tried: MQTTConfiguration) async throws(MQTTError) {
        var chosen = tried
        guard configuration.fallBackToMQTT311 else { throw Self.explainMQTT5Refusal(error, chosen) }
        let refusal = error
        chosen.protocolVersion = .v311
        do throws(MQTTError) {
            try await open(chosen)
        } catch {
            // Not a broker that speaks only 3.1.1 either: the MQTT 5 failure says what went wrong.
            throw Self.explainMQTT5Refusal(refusal, configuration)
        }
        core.state.withLock { $0.fellBackToMQTT311 = true }
        logger.warning(
            "the broker refused MQTT 5 and accepted MQTT 3.1.1: using 3.1.1; set `protocol: 3.1.1` in the config to connect with it at once",
            metadata: ["broker": "\(configuration.host):\(configuration.port)", "mqtt5-error": "\(refusal)"])
    }

    /// How a broker that does not speak MQTT 5 answers its CONNECT: a 3.1.1 CONNACK "unacceptable
    /// protocol version" (libmosquitto reports it as MQTT 5's reason 132), a packet it cannot
    /// parse, or the TCP connection closed with no CONNACK at all (RabbitMQ 3.x).
    static func mayRefuseMQTT5(_ error: MQTTError) -> Bool {
        [.unsupportedProtocol, .connectionLost, .protocolError].contains(error.code)
    }

    /// The failure of an MQTT 5 CONNECT, saying that the broker may not speak MQTT 5 and what fixes it.
    static func explainMQTT5Refusal(_ error: MQTTError, _ configuration: MQTTConfiguration) -> MQTTError {
        var explained = error
        explained.message +=
            "; the broker at \(configuration.host):\(configuration.port) may not speak MQTT 5 "
            + "(RabbitMQ 3.x closes the connection): set `protocol: 3.1.1`, or leave `protocol` out to fall back by itself"
        return explained
    }

    private func open(_ configuration: MQTTConfiguration) async throws(MQTTError) {
        let handle = try Connection.makeHandle(configuration)
        let connection = Connection(handle: handle, core: core, configuration: configuration, logger: logger)
        let installed = core.state.withLock { state -> Bool in
            guard state.connection == nil else { return false }
            state.connection = connection
            return true
        }
        guard installed else {
            connection.discardUnstarted()
            try await connect()
            return
        }
        core.setState(.connecting, from: connection)
        connection.start()
        let result = await connection.awaitConnected(timeout: configuration.connectTimeout)
        if case .failure(let error) = result {
            connection.requestStop(clean: false)
            core.detach(connection, finalState: .disconnected(error))
            throw error
        }
    }

    /// The protocol the client speaks: the configured one, or 3.1.1 after a fallback.
    public var protocolVersion: MQTTProtocolVersion {
        if let connection = core.state.withLock({ $0.connection }) { return connection.configuration.protocolVersion }
        return core.state.withLock { $0.fellBackToMQTT311 } ? .v311 : configuration.protocolVersion
    }

    /// What the broker accepts (its last CONNACK and the configured maximum packet size).
    public var brokerLimits: MQTTBrokerLimits {
        core.state.withLock { $0.connection }?.control.withLock { $0.limits }
            ?? MQTTBrokerLimits(
                configuredMaximumPacketSize: configuration.maximumPacketSize,
                maximumTopicLevels: configuration.maximumTopicLevels)
    }

    /// Clean DISCONNECT (the broker discards the will), stops the network thread, destroys the handle and
    /// finishes all message and state streams. Idempotent; safe from any state.
    public func disconnect() async {
        let connection = core.state.withLock { $0.connection }
        if let connection {
            let connected = connection.requestStop(clean: true)
            // A connected session is waited for, even by a cancelled caller (the wait has no
            // cancellation handler, `awaitFinishedEvenIfCancelled`): a process that exits before its DISCONNECT is sent makes
            // the broker publish the will. A thread that is not connected has nothing to send; it may
            // be stuck in a blocking TCP connect to a host that drops packets, or waiting for a
            // CONNACK, and finishes (and destroys its handle) on its own, so it holds nobody up.
            let timeout = connected ? configuration.connectTimeout + 5 : 0.5
            await connection.awaitFinishedEvenIfCancelled(timeout: timeout)
            core.detach(connection, finalState: .disconnected(nil))
        } else {
            core.setState(.disconnected(nil), from: nil, onlyIfNotIdle: true)
        }
        core.finishStreams()
    }

    /// Service entry point: connects (retrying transient failures with backoff), stays until graceful shutdown
    /// or cancellation, then disconnects. Graceful shutdown or cancellation also ends the retries at once.
    /// Throws when the broker refuses (credentials, TLS, configuration): that will not fix itself.
    public func run() async throws {
        logger.info(
            "connecting to the broker",
            metadata: [
                "broker": "\(configuration.host):\(configuration.port)", "client-id": "\(configuration.clientID)",
                "protocol": "\(configuration.protocolVersion)", "tls": "\(configuration.tls != nil)",
                "session": "\(configuration.cleanStart ? "clean" : "persistent")",
            ])
        let connected: Bool
        do {
            connected = try await cancelWhenGracefulShutdown { try await self.connectRetrying() }
        } catch {
            await disconnect()
            throw error
        }
        if connected {
            logger.info("connected to the broker", metadata: ["broker": "\(configuration.host):\(configuration.port)"])
            try? await gracefulShutdown()
        }
        await disconnect()
    }

    /// True once connected; false when cancelled first.
    private func connectRetrying() async throws(MQTTError) -> Bool {
        var delay = configuration.reconnectDelayMin
        while !Task.isCancelled {
            do {
                try await connect()
                return true
            } catch {
                if Task.isCancelled { return false }
                guard error.isTransient else { throw error }
                // A broker that closes the connection after the CONNECT was reached: it refused.
                let reached = Self.mayRefuseMQTT5(error)
                logger.warning(
                    reached
                        ? "the broker closed the connection before accepting it, retrying"
                        : "cannot reach the broker, retrying",
                    metadata: [
                        "broker": "\(configuration.host):\(configuration.port)", "error": "\(error)",
                        "retry-in": "\(delay)s",
                    ])
            }
            do {
                try await Task.sleep(for: .seconds(delay))
            } catch {
                return false
            }
            delay = min(delay * 2, configuration.reconnectDelayMax)
        }
        return false
    }

    // MARK: Publishing

    public func publish(
        _ topic: String, payload: [UInt8], qos: MQTTQoS = .atMostOnce, retain: Bool = false,
        properties: MQTTPublishProperties = .init()
    ) async throws(MQTTError) {
        let connection = try connection(publishingTo: topic)
        try await connection.publish(topic, payload: payload, qos: qos, retain: retain, properties: properties).get()
    }

    private func connection(publishingTo topic: String) throws(MQTTError) -> Connection {
        try Connection.validatePublishTopic(topic)
        guard let connection = core.state.withLock({ $0.connection }) else { throw .notConnected }
        return connection
    }

    /// Publishes at once if that needs no waiting, as `publish` does; false (and nothing sent)
    /// when `publish` would have to wait for room among the outstanding messages.
    public func publishWithoutWaiting(
        _ topic: String, payload: [UInt8], qos: MQTTQoS = .atMostOnce, retain: Bool = false,
        properties: MQTTPublishProperties = .init()
    ) throws(MQTTError) -> Bool {
        guard
            let outcome = try connection(publishingTo: topic).publishWithoutWaiting(
                topic, payload: payload, qos: qos, retain: retain, properties: properties)
        else { return false }
        try outcome.get()
        return true
    }

    public func publish(_ topic: String, _ text: String, qos: MQTTQoS = .atMostOnce, retain: Bool = false)
        async throws(MQTTError)
    {
        try await publish(topic, payload: Array(text.utf8), qos: qos, retain: retain)
    }

    // MARK: Subscriptions

    /// Subscribes and waits for the SUBACK; the filters are remembered and restored after
    /// reconnects. `ownMessages` receives this client's own publications on these filters even where the
    /// configuration asks for No Local (MQTT 5): a client that publishes a marker to learn that
    /// the retained messages before it have all arrived needs its marker back.
    public func subscribe(_ filters: [(String, MQTTQoS)], ownMessages: Bool = false) async throws(MQTTError) {
        guard !filters.isEmpty else { return }
        for (filter, _) in filters { try Connection.validateFilter(filter) }
        let connection = core.remember(filters)
        guard let connection else { return }
        let result = await connection.subscribe(filters, ownMessages: ownMessages)
        if case .failure(let error) = result {
            if error.code == .subscriptionRefused { core.forget(filters.map(\.0)) }
            throw error
        }
    }

    public func unsubscribe(_ filter: String) async throws(MQTTError) {
        try Connection.validateFilter(filter)
        core.forget([filter])
        guard let connection = core.state.withLock({ $0.connection }) else { return }
        try await connection.unsubscribe(filter).get()
    }

    // MARK: Hosting

    /// Has the network thread run `guest`'s work between its reads and writes while its
    /// connection to the broker is open (nil: stop). Taken up at the thread's next turn; while
    /// not connected (connecting, waiting to reconnect, stopped) the thread detaches and the
    /// guest runs its work itself.
    public func host(_ guest: (any MQTTNetworkThreadGuest)?) {
        let connection = core.state.withLock { state in
            state.guest = guest
            return state.connection
        }
        connection?.waker?.wake()
    }

    // MARK: Streams

    /// A new stream of every message received from now on. Unbounded buffer: nothing acknowledged is lost.
    /// Finishes on `disconnect()`.
    public func messages() -> AsyncStream<MQTTMessage> { stream(\.messageContinuations) }

    /// A new unbounded stream whose continuation is kept in the core's table `table` until the
    /// stream ends.
    private func stream<Element>(
        _ table: WritableKeyPath<ClientCore.State, [UInt64: AsyncStream<Element>.Continuation]> & Sendable,
        first: ((inout ClientCore.State, AsyncStream<Element>.Continuation) -> Void)? = nil
    ) -> AsyncStream<Element> {
        let (stream, continuation) = AsyncStream.makeStream(of: Element.self, bufferingPolicy: .unbounded)
        let id = core.state.withLock { state -> UInt64 in
            state.nextID += 1
            state[keyPath: table][state.nextID] = continuation
            first?(&state, continuation)
            return state.nextID
        }
        continuation.onTermination = { [core] _ in
            _ = core.state.withLock { $0[keyPath: table].removeValue(forKey: id) }
        }
        return stream
    }

    /// Every packet limit the client learns from the broker's refusals from now on
    /// (`MQTTLearnedLimit`): the new limits are in `brokerLimits` already when it comes.
    /// Finishes on `disconnect()`.
    public func learnedLimits() -> AsyncStream<MQTTLearnedLimit> { stream(\.learnedContinuations) }

    /// Publishes the broker refused (a PUBACK's reason, or a connection dropped for one).
    public var refusedPublishCount: Int {
        core.state.withLock { $0.connection }?.control.withLock { $0.refusedCount } ?? 0
    }

    /// Yields the current state first, then every change. Finishes on `disconnect()` (after `.disconnected`).
    public func connectionStates() -> AsyncStream<MQTTConnectionState> {
        stream(\.stateContinuations) { state, continuation in continuation.yield(state.connectionState) }
    }
}
