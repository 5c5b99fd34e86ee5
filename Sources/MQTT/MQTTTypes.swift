import Foundation

// The MQTT client's public value types: QoS, protocol version, will, TLS, configuration (with URL
// parsing), publish properties, messages and connection states.

public enum MQTTQoS: Int, Sendable, Hashable, Comparable, CaseIterable {
    case atMostOnce = 0, atLeastOnce = 1, exactlyOnce = 2

    public static func < (lhs: MQTTQoS, rhs: MQTTQoS) -> Bool { lhs.rawValue < rhs.rawValue }
}

public enum MQTTProtocolVersion: Sendable, Hashable {
    case v311, v5
}

/// The last will: published by the broker when the client vanishes without a clean DISCONNECT.
public struct MQTTWill: Sendable, Hashable {
    public var topic: String
    public var payload: [UInt8]
    public var qos: MQTTQoS
    public var retain: Bool

    public init(topic: String, payload: [UInt8], qos: MQTTQoS = .atLeastOnce, retain: Bool = false) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
    }
}

/// TLS settings. Without `caFile`/`caDirectory` the operating system's trust store is used.
/// The server certificate and its hostname are always verified unless `insecure` is set.
public struct MQTTTLS: Sendable, Hashable {
    public var caFile: String?
    public var caDirectory: String?
    public var certificateFile: String?
    public var keyFile: String?
    /// Skips verification of the server certificate chain and hostname. For tests and lab setups only.
    public var insecure: Bool

    public init(
        caFile: String? = nil, caDirectory: String? = nil, certificateFile: String? = nil, keyFile: String? = nil,
        insecure: Bool = false
    ) {
        self.caFile = caFile
        self.caDirectory = caDirectory
        self.certificateFile = certificateFile
        self.keyFile = keyFile
        self.insecure = insecure
    }
}

public struct MQTTConfiguration: Sendable {
    public var host: String
    public var port: Int
    public var clientID: String
    public var protocolVersion: MQTTProtocolVersion = .v5
    /// Seconds; libmosquitto requires at least 5.
    public var keepAlive: Int = 30
    /// `false` asks for a persistent session (the broker keeps subscriptions and queues QoS>0 messages while
    /// the client is away). Needs a non-empty `clientID`.
    public var cleanStart: Bool = true
    /// MQTT 5 session expiry in seconds. When `cleanStart` is false and this is nil, the session never
    /// expires (`UInt32.max`), which is what MQTT 3.1.1 persistent sessions do. Ignored for 3.1.1.
    public var sessionExpiry: UInt32?
    public var username: String?
    public var password: String?
    public var tls: MQTTTLS?
    public var will: MQTTWill?
    /// Reconnect backoff: first delay, doubled per failed attempt up to `reconnectDelayMax` (seconds).
    public var reconnectDelayMin: Double = 0.5
    public var reconnectDelayMax: Double = 30
    /// Seconds to wait for the TCP/TLS connection and the CONNACK.
    public var connectTimeout: Double = 10
    /// Backpressure: the most publishes accepted by libmosquitto but not yet written (QoS 0) or acknowledged
    /// (QoS 1/2). `publish` suspends while this many are outstanding.
    public var maxQueuedPublishes: Int = 1000
    /// Backpressure by size: the most bytes of such packets (libmosquitto keeps a copy of each
    /// until then). `publish` suspends while this many are outstanding, unless none are: a larger
    /// packet still goes, alone. A thousand notifications (~60–250 bytes each) fit under it, so
    /// for them `maxQueuedPublishes` is the bound; larger documents (`meta`, `$state`) go a few
    /// hundred at a time, discovery configs a few dozen, and a tree page (256 KB at most by
    /// default) alone. 256 KB rather than 1 MB: the copies held here were ~1 MB of a
    /// 1,000-accessory start-up's peak, and on a LAN a window of 256 KB keeps the socket full.
    public var maxQueuedBytes: Int = 1 << 18

    /// MQTT 5 subscription option for every subscription of this client: the broker does not
    /// send this client's own publications back to it. Ignored for 3.1.1.
    public var noLocal: Bool = false

    /// The longest the network thread waits for its socket while it hosts a guest
    /// (`MQTTNetworkThreadGuest`), in seconds: work handed to the guest or a publish from
    /// another thread wakes it at once, so this only bounds how late libmosquitto's own timers
    /// (keep-alive, retries) run. A test sets it long to tell a wake from the wait's end.
    public var guestWaitLimit: Double = 0.1

    /// MQTT 5 subscription option for every subscription of this client: messages forwarded
    /// live keep the retain flag they were published with, so that a retained request can be
    /// told from a plain one. Ignored for 3.1.1.
    public var retainAsPublished: Bool = false

    /// The largest packet the broker accepts, in bytes (its `max_packet_size`). An MQTT 5 broker
    /// may say so in its CONNACK (then the smaller of the two holds); an MQTT 3.1.1 broker
    /// cannot, and drops the connection of a client that sends more. A publish that would
    /// exceed it fails with `packet-too-large` and nothing is sent. Nil: no limit is known.
    public var maximumPacketSize: Int? = nil

    /// The most levels a topic this client publishes to may have (`a/b/c` has 3). mosquitto
    /// drops the connection of a client that publishes to a topic of more than 201 levels (200
    /// separators, its `TOPIC_HIERARCHY_LIMIT`), and no broker announces such a limit: EMQX's
    /// `max_topic_levels` is 128, AWS IoT's 7. A publish to a deeper topic fails with
    /// `invalid-topic` and nothing is sent.
    public var maximumTopicLevels: Int = MQTTConfiguration.mosquittoTopicLevels

    /// What mosquitto takes: 200 separators.
    public static let mosquittoTopicLevels = 201

    /// When the broker refuses an MQTT 5 CONNECT as a protocol it does not speak (a
    /// "unsupported protocol version" CONNACK, or a connection closed before any CONNACK, as
    /// RabbitMQ 3.x does), the first `connect()` tries MQTT 3.1.1 once and, if that is
    /// accepted, stays with it (`MQTTClient.protocolVersion`). Without it, such a refusal fails
    /// `connect()` with `unsupported-protocol`. Ignored for 3.1.1.
    public var fallBackToMQTT311: Bool = false

    public init(host: String = "127.0.0.1", port: Int = 1883) {
        self.host = host
        self.port = port
        self.clientID = MQTTConfiguration.randomClientID()
    }

    /// `mqtt://[user[:password]@]host[:port]` or `mqtts://…` (TLS, default port 8883, system trust store).
    /// User and password are percent-decoded.
    public init(url: String) throws(MQTTError) {
        guard let components = URLComponents(string: url) else {
            throw .badURL("'\(url)' is not a URL")
        }
        let scheme = components.scheme?.lowercased()
        let secure: Bool
        switch scheme {
        case "mqtt", "tcp": secure = false
        case "mqtts", "ssl", "tls": secure = true
        case nil: throw .badURL("'\(url)' has no scheme (expected mqtt:// or mqtts://)")
        case let other?: throw .badURL("unsupported scheme '\(other)' in '\(url)' (expected mqtt or mqtts)")
        }
        guard let host = components.host, !host.isEmpty else {
            throw .badURL("'\(url)' has no host")
        }
        // URLComponents accepts ports it cannot represent as nil; check the raw text for a bad port.
        var port = secure ? 8883 : 1883
        if let explicit = components.port {
            guard (1...65535).contains(explicit) else { throw .badURL("port \(explicit) in '\(url)' is out of range") }
            port = explicit
        }
        if !components.path.isEmpty && components.path != "/" {
            throw .badURL("'\(url)' has a path ('\(components.path)'); an MQTT URL names only host and port")
        }
        self.init(host: host, port: port)
        if let user = components.percentEncodedUser {
            guard let decoded = user.removingPercentEncoding else { throw .badURL("bad percent-encoding in user name") }
            username = decoded
        }
        if let pass = components.percentEncodedPassword {
            guard let decoded = pass.removingPercentEncoding else { throw .badURL("bad percent-encoding in password") }
            password = decoded
        }
        if secure { tls = MQTTTLS() }
    }

    static func randomClientID() -> String {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789")
        return "homemqtt-" + String((0..<12).map { _ in alphabet.randomElement()! })
    }
}

public struct MQTTUserProperty: Sendable, Hashable {
    public var name: String
    public var value: String
    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

/// MQTT 5 publish properties. Ignored (not sent) on MQTT 3.1.1 connections.
public struct MQTTPublishProperties: Sendable, Hashable {
    /// Seconds after which the broker discards the message if it has not been delivered.
    public var messageExpiry: UInt32? = nil
    public var userProperties: [MQTTUserProperty] = []
    /// The payload's MIME type (`application/json`).
    public var contentType: String? = nil
    /// The Payload Format Indicator: true says the payload is UTF-8 text.
    public var isUTF8Text: Bool = false
    /// Request/response: where the answer to this message goes.
    public var responseTopic: String? = nil
    /// Request/response: opaque bytes a requester sets and the answer echoes.
    public var correlationData: [UInt8]? = nil

    public init(
        messageExpiry: UInt32? = nil, userProperties: [MQTTUserProperty] = [], contentType: String? = nil,
        isUTF8Text: Bool = false, responseTopic: String? = nil, correlationData: [UInt8]? = nil
    ) {
        self.messageExpiry = messageExpiry
        self.userProperties = userProperties
        self.contentType = contentType
        self.isUTF8Text = isUTF8Text
        self.responseTopic = responseTopic
        self.correlationData = correlationData
    }
}

/// A received message, copied out of libmosquitto's callback.
public struct MQTTMessage: Sendable, Hashable {
    public var topic: String
    public var payload: [UInt8]
    public var qos: MQTTQoS
    /// True when the broker delivered this as a retained message (e.g. to a new subscriber).
    public var retain: Bool
    public var properties: MQTTPublishProperties

    public init(
        topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool, properties: MQTTPublishProperties = .init()
    ) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.properties = properties
    }

    /// The payload as UTF-8 text; invalid sequences become U+FFFD.
    public var string: String { String(decoding: payload, as: UTF8.self) }
}

public enum MQTTConnectionState: Sendable, Hashable {
    /// Never connected (or `connect()` not yet called).
    case idle
    /// First connection attempt in progress.
    case connecting
    case connected
    /// The connection was lost (the error says why); the client is retrying with backoff.
    case reconnecting(MQTTError?)
    /// Not connected and not retrying: after `disconnect()` (nil) or a failed `connect()` (its error).
    case disconnected(MQTTError?)

    public var isConnected: Bool {
        if case .connected = self { return true }
        return false
    }
}
