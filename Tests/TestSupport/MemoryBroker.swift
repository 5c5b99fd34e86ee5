public import MQTT
import Synchronization

/// A broker held in memory, for tests that run a gateway in one process without a network:
/// the `MemoryTransport`s made on it are its clients.
///
/// It does what mosquitto does for what the gateway relies on:
/// - retained messages: kept by topic (an empty payload removes one), sent to a new
///   subscription at once, in topic order and flagged retained, before `subscribe` returns;
/// - filters with `+` (one level) and `#` (the rest); a message matching several subscriptions
///   of one client goes to it once for each (mosquitto 2 sends duplicates);
/// - MQTT 5's No Local (`MQTTConfiguration.noLocal`) except on filters subscribed with
///   `ownMessages`, and Retain As Published (`retainAsPublished`): without it a message
///   forwarded live has its retain flag cleared;
/// - MQTT 3.1.1 clients neither send nor receive properties, and No Local and Retain As
///   Published do not apply to them;
/// - `limits` as a CONNACK would say them: QoS is capped at `maximumQoS`, the retain flag
///   dropped without `retainAvailable`, and a publish beyond the maximum packet size refused
///   (unsent, by the transport, as `MQTTClient` refuses it when mosquitto's `max_packet_size`
///   is announced; `MemoryTransportParityTests` holds both to the same);
/// - limits it never told (`Taken`): the maximum packet size to an MQTT 3.1.1 client, which
///   cannot be told it (mosquitto's `max_packet_size` closes the connection at a larger packet),
///   and `messageSizeLimit`, mosquitto's `message_size_limit`, told to no one (a larger payload
///   is dropped; a QoS 1/2 one answered "packet too large" to an MQTT 5 client). The transport
///   learns from them as `MQTTClient` does (`MemoryTransportUntoldParityTests`);
/// - the connections made, by client id, as mosquitto's log lists them, and each connect of a
///   client id whose earlier connection was still open (mosquitto logs "closing old
///   connection" and drops the old one; here both stay, and `takeovers` lists it).
///
/// QoS decides nothing else: every message is delivered, in order, at once.
public final class MemoryBroker: Sendable {
    struct Subscription {
        var filter: String
        var qos: MQTTQoS
        var ownMessages: Bool
    }

    struct Client {
        var configuration: MQTTConfiguration
        var connectionState: MQTTConnectionState = .idle
        var subscriptions: [Subscription] = []
        /// Filters subscribed while not connected: their retained messages come at the connect.
        var unconfirmed: [(String, MQTTQoS)] = []
        /// QoS 1/2 publishes made while the connection is lost, sent when it is back.
        var pending: [MQTTMessage] = []
        var messageStreams: [UInt64: AsyncStream<MQTTMessage>.Continuation] = [:]
        var stateStreams: [UInt64: AsyncStream<MQTTConnectionState>.Continuation] = [:]

        /// Sets the state and tells every observer of a change.
        mutating func set(_ new: MQTTConnectionState) {
            guard connectionState != new else { return }
            connectionState = new
            for stream in stateStreams.values { stream.yield(new) }
        }
    }

    struct State {
        var retained: [String: MQTTMessage] = [:]
        var clients: [UInt64: Client] = [:]
        var nextID: UInt64 = 0
        /// Keys of the streams, unique across clients.
        var nextStream: UInt64 = 0
        /// Connects by client id, as mosquitto logs "New client connected … as <id>".
        var connections: [String: Int] = [:]
        /// The clients whose connections were lost, by id, in order.
        var dropped: [String] = []
        /// The client ids that connected while a connection under the same id was open, in order.
        var takeovers: [String] = []
    }

    /// What the broker's CONNACK would say to an MQTT 5 client. Its maximum packet size holds
    /// for MQTT 3.1.1 clients too, untold, as mosquitto's `max_packet_size` does.
    public let limits: MQTTBrokerLimits
    /// mosquitto's `message_size_limit`: the largest payload taken, announced to no client.
    public let messageSizeLimit: Int?
    let state = Mutex(State())

    public init(limits: MQTTBrokerLimits = MQTTBrokerLimits(), messageSizeLimit: Int? = nil) {
        self.limits = limits
        self.messageSizeLimit = messageSizeLimit
    }

    /// What became of a publish the broker read, as its client can tell.
    enum Taken: Equatable {
        /// Routed, queued for the reconnect, or dropped without a word (mosquitto's
        /// `message_size_limit` at QoS 0, or answered with a plain PUBACK under MQTT 3.1.1): the
        /// client takes it for kept.
        case accepted
        /// Answered with reason 0x95 "packet too large" (MQTT 5, QoS 1/2, `message_size_limit`).
        case refusedInAcknowledgement
        /// A packet over the maximum packet size from a client that was not told it (MQTT 3.1.1):
        /// mosquitto closes the connection at it. Nothing is routed; the transport loses the
        /// connection (`MemoryTransport.loseConnection`).
        case closesConnection
    }

    /// A new client of this broker (not yet connected).
    public func transport(configuration: MQTTConfiguration = MQTTConfiguration()) -> MemoryTransport {
        MemoryTransport(broker: self, configuration: configuration)
    }

    /// How many times a client with `clientID` connected.
    public func connections(of clientID: String) -> Int { state.withLock { $0.connections[clientID, default: 0] } }

    /// A line for each connection lost without a DISCONNECT (`MemoryTransport.loseConnection`).
    public var dropped: [String] { state.withLock { $0.dropped.map { "client \($0) lost its connection" } } }

    /// A line for each connect of a client id whose earlier connection was still open, as
    /// mosquitto logs it when it takes the old one over.
    public var takeovers: [String] {
        state.withLock { $0.takeovers.map { "client \($0) already connected, closing old connection" } }
    }

    /// Every retained message the broker holds now, by topic.
    public var retained: [String: MQTTMessage] { state.withLock { $0.retained } }

    /// The retained payloads under `filter`, as text, by topic.
    public func retainedText(under filter: String = "#") -> [String: String] {
        var out: [String: String] = [:]
        for (topic, message) in retained where Self.topic(topic, matches: filter) { out[topic] = message.string }
        return out
    }

    /// Sets a retained message as another client would have published it before.
    public func setRetained(_ topic: String, _ payload: [UInt8], properties: MQTTPublishProperties = .init()) {
        state.withLock { state in
            if payload.isEmpty {
                state.retained[topic] = nil
            } else {
                state.retained[topic] = MQTTMessage(
                    topic: topic, payload: payload, qos: .atLeastOnce, retain: true, properties: properties)
            }
        }
    }

    // MARK: Clients

    func register(_ configuration: MQTTConfiguration) -> UInt64 {
        state.withLock { state in
            state.nextID += 1
            state.clients[state.nextID] = Client(configuration: configuration)
            return state.nextID
        }
    }

    func client<T>(_ id: UInt64, _ body: (inout Client) -> T) -> T {
        state.withLock { body(&$0.clients[id]!) }
    }

    /// Adds a stream to client `id` (`body` stores it under the key given); returns the key.
    func observe(_ id: UInt64, _ body: (inout Client, UInt64) -> Void) -> UInt64 {
        state.withLock { state in
            state.nextStream += 1
            body(&state.clients[id]!, state.nextStream)
            return state.nextStream
        }
    }

    /// Removes a stream of client `id`, if the client is still there.
    func stopObserving(_ id: UInt64, _ body: (inout Client) -> Void) {
        state.withLock { state in
            guard var client = state.clients[id] else { return }
            body(&client)
            state.clients[id] = client
        }
    }

    /// Client `id` publishes a packet of `packetSize` bytes: connected, the message is routed
    /// unless a limit the client was not told refuses it (`Taken`); while the connection is lost
    /// a QoS 0 message is dropped and a QoS 1/2 one kept for the reconnect; never connected or
    /// disconnected, it fails as `MQTTClient` does.
    func publish(_ message: MQTTMessage, packetSize: Int, from id: UInt64) throws(MQTTError) -> Taken {
        let taken = state.withLock { state -> Result<Taken, MQTTError> in
            let client = state.clients[id]!
            switch client.connectionState {
            case .connected:
                // mosquitto reads the packet's header first: one over `max_packet_size` is not read.
                if let maximum = limits.brokerMaximumPacketSize, packetSize > maximum {
                    return .success(.closesConnection)
                }
                if let limit = messageSizeLimit, message.payload.count > limit {
                    let says = message.qos != .atMostOnce && client.configuration.protocolVersion == .v5
                    return .success(says ? .refusedInAcknowledgement : .accepted)
                }
                Self.route(message, from: id, in: &state)
            case .reconnecting:
                if message.qos != .atMostOnce { state.clients[id]!.pending.append(message) }
            case .idle, .connecting:
                return .failure(MQTTError(code: .noConnection, message: "the memory transport is not connected"))
            case .disconnected:
                return .failure(MQTTError(code: .closed, message: "the memory transport was disconnected"))
            }
            return .success(.accepted)
        }
        return try taken.get()
    }

    /// Routes a publish of client `id`: stores or removes it as retained, and delivers it to
    /// every matching subscription. Under the lock, so every client sees one order.

    private static func route(_ message: MQTTMessage, from id: UInt64, in state: inout State) {
        if message.retain {
            state.retained[message.topic] = message.payload.isEmpty ? nil : message
        }
        for (receiver, client) in state.clients where client.connectionState.isConnected {
            let v5 = client.configuration.protocolVersion == .v5
            for subscription in client.subscriptions where topic(message.topic, matches: subscription.filter) {
                if v5, receiver == id, client.configuration.noLocal, !subscription.ownMessages { continue }
                var copy = message
                copy.qos = min(message.qos, subscription.qos)
                copy.retain = v5 && client.configuration.retainAsPublished && message.retain
                if !v5 { copy.properties = MQTTPublishProperties() }
                for stream in client.messageStreams.values { stream.yield(copy) }
            }
        }
    }

    /// Adds (or replaces) client `id`'s subscriptions and sends it the retained messages they
    /// match, as mosquitto does before anything published later.
    func subscribe(_ id: UInt64, _ filters: [(String, MQTTQoS)], ownMessages: Bool) {
        state.withLock { state in
            var client = state.clients[id]!
            for (filter, qos) in filters {
                client.subscriptions.removeAll { $0.filter == filter }
                client.subscriptions.append(Subscription(filter: filter, qos: qos, ownMessages: ownMessages))
            }
            if !client.connectionState.isConnected { client.unconfirmed += filters }
            state.clients[id] = client
            guard client.connectionState.isConnected else { return }
            Self.sendRetained(filters, to: client, in: state)
        }
    }

    private static func sendRetained(_ filters: [(String, MQTTQoS)], to client: Client, in state: State) {
        for (filter, qos) in filters {
            for topic in state.retained.keys.sorted() where Self.topic(topic, matches: filter) {
                var copy = state.retained[topic]!
                copy.qos = min(copy.qos, qos)
                if client.configuration.protocolVersion != .v5 { copy.properties = MQTTPublishProperties() }
                for stream in client.messageStreams.values { stream.yield(copy) }
            }
        }
    }

    /// Client `id`'s connection is up: the retained messages of filters subscribed meanwhile
    /// come, then what it published while down goes out. A session kept across a loss keeps
    /// its subscriptions, so nothing else is sent again.
    func connect(_ id: UInt64) {
        state.withLock { state in
            var client = state.clients[id]!
            guard !client.connectionState.isConnected else { return }
            client.set(.connected)
            let clientID = client.configuration.clientID
            state.connections[clientID, default: 0] += 1
            let open = state.clients.contains { other in
                other.key != id && other.value.configuration.clientID == clientID
                    && other.value.connectionState.isConnected
            }
            if open && !clientID.isEmpty { state.takeovers.append(clientID) }
            let (unconfirmed, pending) = (client.unconfirmed, client.pending)
            (client.unconfirmed, client.pending) = ([], [])
            state.clients[id] = client
            Self.sendRetained(unconfirmed, to: client, in: state)
            for message in pending { Self.route(message, from: id, in: &state) }
        }
    }

    /// Client `id`'s connection is gone without a DISCONNECT: its will goes out.
    func lose(_ id: UInt64, error: MQTTError) {
        state.withLock { state in
            guard state.clients[id]!.connectionState.isConnected else { return }
            state.clients[id]!.set(.reconnecting(error))
            state.dropped.append(state.clients[id]!.configuration.clientID)
            // A clean session ends with the connection: the client subscribes again at the
            // reconnect (and gets the retained messages again); a persistent one keeps them.
            if state.clients[id]!.configuration.cleanStart {
                state.clients[id]!.unconfirmed = state.clients[id]!.subscriptions.map { ($0.filter, $0.qos) }
            }
            if let will = state.clients[id]!.configuration.will {
                let message = MQTTMessage(topic: will.topic, payload: will.payload, qos: will.qos, retain: will.retain)
                Self.route(message, from: id, in: &state)
            }
        }
    }

    /// Client `id` disconnected cleanly (no will): its streams finish. Its subscriptions are
    /// remembered, as `MQTTClient` does, and sent again at the next connect; `forget` removes
    /// the client from the broker (its transport is gone).
    func disconnect(_ id: UInt64, forget: Bool = false) {
        typealias Streams = ([AsyncStream<MQTTMessage>.Continuation], [AsyncStream<MQTTConnectionState>.Continuation])
        let streams = state.withLock { state -> Streams in
            guard var client = state.clients[id] else { return ([], []) }
            client.set(.disconnected(nil))
            client.unconfirmed = client.subscriptions.map { ($0.filter, $0.qos) }
            client.pending = []
            let streams = (Array(client.messageStreams.values), Array(client.stateStreams.values))
            client.messageStreams = [:]
            client.stateStreams = [:]
            state.clients[id] = forget ? nil : client
            return streams
        }
        // Finishing runs the streams' termination handlers, which take the lock.
        for stream in streams.0 { stream.finish() }
        for stream in streams.1 { stream.finish() }
    }

    /// MQTT's topic matching: `+` one level, `#` this level and all below (`a/#` matches `a`).
    /// Topics starting with `$` match no filter starting with a wildcard.
    public static func topic(_ topic: String, matches filter: String) -> Bool {
        if topic.hasPrefix("$"), filter.hasPrefix("+") || filter.hasPrefix("#") { return false }
        var levels = topic.split(separator: "/", omittingEmptySubsequences: false)[...]
        for part in filter.split(separator: "/", omittingEmptySubsequences: false) {
            if part == "#" { return true }
            guard let level = levels.popFirst(), part == "+" || part == level else { return false }
        }
        return levels.isEmpty
    }
}
