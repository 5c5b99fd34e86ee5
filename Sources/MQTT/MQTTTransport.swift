public import ServiceLifecycle

/// What a publisher and subscriber of the gateway needs of an MQTT connection: publishing
/// (awaiting room, or only when there is room), subscriptions, the received messages, the
/// connection's states and what the broker accepts.
///
/// `MQTTClient` is the real one (libmosquitto and a broker); tests in one process may use one
/// held in memory. A transport is a `Service`: the `ServiceGroup` that runs the gateway runs its
/// transport too, which connects in `run()` and disconnects at graceful shutdown.
///
/// What holds for every implementation, as `MQTTClient` does it:
/// - `connectionStates()` yields the current state first, then every change, and finishes when
///   the transport disconnects; `messages()` yields every message received from its call on,
///   in the order the broker sent them, and finishes then too.
/// - A publish on a topic with a wildcard, or larger than `brokerLimits` allow, throws and sends
///   nothing.
/// - Subscriptions made with the configuration's No Local still deliver the transport's own
///   publications on the filters subscribed with `ownMessages`.
public protocol MQTTTransport: Service {
    /// Where the connection stands now.
    var connectionState: MQTTConnectionState { get }

    /// The protocol spoken (after any fallback to 3.1.1).
    var protocolVersion: MQTTProtocolVersion { get }

    /// What the broker accepts: its CONNACK's limits and the configured maximum packet size.
    var brokerLimits: MQTTBrokerLimits { get }

    /// Publishes, waiting while the transport's queue of unfinished publishes is full.
    func publish(
        _ topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool, properties: MQTTPublishProperties
    ) async throws(MQTTError)

    /// Publishes at once if that needs no waiting; false (and nothing sent) when `publish`
    /// would have to wait.
    func publishWithoutWaiting(
        _ topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool, properties: MQTTPublishProperties
    ) throws(MQTTError) -> Bool

    /// Subscribes and waits for the broker's answer; `ownMessages` receives this transport's own
    /// publications on these filters even under No Local.
    func subscribe(_ filters: [(String, MQTTQoS)], ownMessages: Bool) async throws(MQTTError)

    func unsubscribe(_ filter: String) async throws(MQTTError)

    /// A new stream of every message received from now on.
    func messages() -> AsyncStream<MQTTMessage>

    /// The current state first, then every change.
    func connectionStates() -> AsyncStream<MQTTConnectionState>

    /// Every packet limit learned from the broker's refusals from now on (a broker that drops
    /// the connection for a packet over a limit it never announced). A transport that learns
    /// none finishes the stream at once.
    func learnedLimits() -> AsyncStream<MQTTLearnedLimit>

    /// Publishes the broker refused after they were sent (a PUBACK's reason, or the
    /// connection dropped for one); 0 for a transport that cannot tell.
    var refusedPublishCount: Int { get }

    /// Runs `guest`'s work on the thread that reads and writes the connection, where there is
    /// one (`MQTTNetworkThreadGuest`); nil stops. A transport without such a thread ignores it.
    func host(_ guest: (any MQTTNetworkThreadGuest)?)
}

extension MQTTTransport {
    public func host(_ guest: (any MQTTNetworkThreadGuest)?) {}

    public func learnedLimits() -> AsyncStream<MQTTLearnedLimit> { AsyncStream { $0.finish() } }

    public var refusedPublishCount: Int { 0 }

    public func publish(
        _ topic: String, payload: [UInt8], qos: MQTTQoS = .atMostOnce, retain: Bool = false
    ) async throws(MQTTError) {
        try await publish(topic, payload: payload, qos: qos, retain: retain, properties: MQTTPublishProperties())
    }

    public func subscribe(_ filters: [(String, MQTTQoS)]) async throws(MQTTError) {
        try await subscribe(filters, ownMessages: false)
    }

    public func subscribe(_ filter: String, qos: MQTTQoS = .atLeastOnce) async throws(MQTTError) {
        try await subscribe([(filter, qos)], ownMessages: false)
    }

    /// The size of the packet that publishing these would send, to hold against `brokerLimits`.
    public func packetSize(
        topic: String, payloadCount: Int, qos: MQTTQoS, properties: MQTTPublishProperties = .init()
    ) -> Int {
        MQTTBrokerLimits.publishPacketSize(
            topic: topic, payloadCount: payloadCount, qos: brokerLimits.qos(for: qos), properties: properties,
            protocolVersion: protocolVersion)
    }
}
