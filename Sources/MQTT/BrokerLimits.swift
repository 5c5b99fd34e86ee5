// What the broker accepts from this client: the limits of its CONNACK (MQTT 5) and the
// configured maximum packet size (the only source of one under MQTT 3.1.1), and the exact
// size of a PUBLISH packet to hold against them.

/// The limits a connection publishes under. Before the first CONNACK, and under MQTT 3.1.1
/// (whose CONNACK carries no properties), only the configured maximum packet size is known and
/// everything else is the protocol's default.
public struct MQTTBrokerLimits: Sendable, Hashable, CustomStringConvertible {
    /// The broker's Maximum Packet Size (MQTT 5 CONNACK), nil when it gave none.
    public var brokerMaximumPacketSize: Int?
    /// `MQTTConfiguration.maximumPacketSize`: a broker that says nothing (MQTT 3.1.1) drops the
    /// connection of a client that exceeds its limit, so the limit must be told.
    public var configuredMaximumPacketSize: Int?
    /// The broker's Maximum QoS: a publish asking for more is sent at this QoS.
    public var maximumQoS: MQTTQoS = .exactlyOnce
    /// The broker's Retain Available: without it, publishes are sent without the retain flag.
    public var retainAvailable = true
    /// The broker's Receive Maximum: QoS 1/2 publishes it takes unacknowledged at once.
    /// libmosquitto enforces it itself (handle_connack.c reads it into
    /// `msgs_out.inflight_maximum`, and messages beyond it wait in its queue), so the client
    /// only reports it.
    public var receiveMaximum = 65535
    /// The broker's Topic Alias Maximum. The client never sends topic aliases.
    public var topicAliasMaximum = 0

    /// A limit the client learned from the broker without being told: it refused a packet
    /// (dropped the connection right after it, or answered "packet too large") and kept smaller
    /// ones (`learn(refusedPacketSize:kept:fromLostConnection:)`). Kept across reconnects of the same client.
    public var learnedMaximumPacketSize: Int?
    /// `MQTTConfiguration.maximumTopicLevels`: no broker announces it.
    public var maximumTopicLevels = MQTTConfiguration.mosquittoTopicLevels

    public init(
        configuredMaximumPacketSize: Int? = nil, maximumTopicLevels: Int = MQTTConfiguration.mosquittoTopicLevels
    ) {
        self.configuredMaximumPacketSize = configuredMaximumPacketSize
        self.maximumTopicLevels = maximumTopicLevels
    }

    /// The largest packet the client sends: the smallest of the broker's, the configured and
    /// the learned limits; nil when none is known (then only the protocol's 256 MB bounds it).
    /// Every publish asks (a few times): without an array, which cost two allocations a call.
    public var maximumPacketSize: Int? {
        func smaller(_ a: Int?, _ b: Int?) -> Int? {
            guard let a else { return b }
            guard let b else { return a }
            return min(a, b)
        }
        return smaller(smaller(brokerMaximumPacketSize, configuredMaximumPacketSize), learnedMaximumPacketSize)
    }

    /// Whether the packet limit in force was learned rather than told.
    public var packetLimitIsLearned: Bool {
        guard let learned = learnedMaximumPacketSize else { return false }
        return learned == maximumPacketSize
    }

    /// True when a PUBLISH of `size` bytes (`publishPacketSize`) is within the limit.
    public func allows(packetSize size: Int) -> Bool {
        guard let limit = maximumPacketSize else { return size <= Self.protocolMaximumPacketSize }
        return size <= limit
    }

    /// Learns a packet limit from a refusal of a `size`-byte packet while the broker had kept
    /// every one up to `kept` bytes (`LearnedPacketLimit.limit`), and returns what to tell the
    /// client's observers; nil when the refusal was no larger than a packet kept, or the limit
    /// in force is already at or below it. A lost connection is weaker evidence than a PUBACK
    /// that says "packet too large" (a broker restarting right after a large publish looks the
    /// same): from one, no limit below 4096 bytes is learned. The one rule for `MQTTClient` and
    /// for a transport that models it (the tests' memory transport), so the two cannot drift.
    public mutating func learn(refusedPacketSize size: Int, kept: Int, fromLostConnection: Bool) -> MQTTLearnedLimit? {
        guard var limit = LearnedPacketLimit.limit(refused: size, kept: kept) else { return nil }
        if fromLostConnection {
            guard size > LearnedPacketLimit.floor else { return nil }
            limit = max(limit, LearnedPacketLimit.floor)
        }
        if let current = maximumPacketSize, current <= limit { return nil }
        learnedMaximumPacketSize = limit
        return MQTTLearnedLimit(limits: self, refusedPacketSize: size, largestKeptPacketSize: kept)
    }

    /// The QoS a publish asking for `qos` is sent at.
    public func qos(for qos: MQTTQoS) -> MQTTQoS { min(qos, maximumQoS) }

    /// What this connection does differently from what a publisher asks, for the start-up log:
    /// empty when nothing is downgraded.
    public func downgrades(requestedQoS: MQTTQoS) -> [String] {
        var out: [String] = []
        if maximumQoS < requestedQoS {
            out.append("qos \(requestedQoS.rawValue) sent as \(maximumQoS.rawValue) (the broker's maximum QoS)")
        }
        if !retainAvailable { out.append("retain flag dropped (the broker has no retained messages)") }
        return out
    }

    public var description: String {
        var parts = ["max-packet-size=\(maximumPacketSize.map(String.init) ?? "none")"]
        if let broker = brokerMaximumPacketSize { parts.append("broker-max-packet-size=\(broker)") }
        if let configured = configuredMaximumPacketSize { parts.append("configured-max-packet-size=\(configured)") }
        if let learned = learnedMaximumPacketSize { parts.append("learned-max-packet-size=\(learned)") }
        parts.append("max-topic-levels=\(maximumTopicLevels)")
        parts += [
            "max-qos=\(maximumQoS.rawValue)", "retain=\(retainAvailable ? "yes" : "no")",
            "receive-maximum=\(receiveMaximum)", "topic-alias-maximum=\(topicAliasMaximum) (unused)",
        ]
        return parts.joined(separator: " ")
    }

    /// MQTT's own bound: a remaining length of at most 268,435,455 bytes, plus the fixed header.
    public static let protocolMaximumPacketSize = 268_435_455 + 5

    /// The exact size in bytes of the PUBLISH packet for these parts: fixed header (1 byte),
    /// remaining-length varint, topic (2 + length), packet identifier (QoS 1/2), the
    /// properties with their length varint (MQTT 5 only; 3.1.1 sends none) and the payload.
    public static func publishPacketSize(
        topic: String, payloadCount: Int, qos: MQTTQoS, properties: MQTTPublishProperties,
        protocolVersion: MQTTProtocolVersion
    ) -> Int {
        var remaining = 2 + topic.utf8.count + (qos == .atMostOnce ? 0 : 2) + payloadCount
        if protocolVersion == .v5 {
            let length = propertiesLength(properties)
            remaining += varintSize(length) + length
        }
        return 1 + varintSize(remaining) + remaining
    }

    /// The byte length of the property list `Connection.send` writes for `properties`.
    static func propertiesLength(_ properties: MQTTPublishProperties) -> Int {
        var length = 0
        if properties.messageExpiry != nil { length += 1 + 4 }
        for property in properties.userProperties {
            length += 1 + 2 + property.name.utf8.count + 2 + property.value.utf8.count
        }
        if properties.isUTF8Text { length += 1 + 1 }
        if let type = properties.contentType { length += 1 + 2 + type.utf8.count }
        if let topic = properties.responseTopic { length += 1 + 2 + topic.utf8.count }
        if let data = properties.correlationData { length += 1 + 2 + min(data.count, Int(UInt16.max)) }
        return length
    }

    /// Bytes of MQTT's variable byte integer for `value`.
    static func varintSize(_ value: Int) -> Int {
        switch value {
        case ..<128: 1
        case ..<16_384: 2
        case ..<2_097_152: 3
        default: 4
        }
    }
}
