public import HomeModel
import MQTT

// What an output's `handle` is given: a request message, and who waits for its answer besides
// its topic — an MQTT 5 requester's Response Topic, or a caller in this process (the web view's
// page and `/ws`) awaiting `Gateway.request(topic:payload:)`. The core answers either through
// `Gateway.answer(_:json:reply:)`, whoever made the answer.

/// A request as the gateway takes it: its topic, payload and retain flag, and who waits for
/// its answer besides its topic.
public struct IncomingMessage: Sendable {
    public var topic: String
    public var payload: [UInt8]
    public var retain: Bool
    public var reply: Gateway.Reply?

    init(_ message: MQTTMessage) {
        (topic, payload, retain) = (message.topic, message.payload, message.retain)
        reply = message.properties.responseTopic.flatMap { topic in
            topic.isEmpty
                ? nil : Gateway.Reply(.mqtt(topic: topic, correlationData: message.properties.correlationData))
        }
    }

    init(topic: String, payload: [UInt8], reply: Gateway.Reply) {
        (self.topic, self.payload, retain, self.reply) = (topic, payload, false, reply)
    }
}

extension Gateway {
    /// Who waits for an answer besides its topic.
    public struct Reply: Sendable {
        enum Target: Sendable {
            /// An MQTT 5 request's Response Topic and Correlation Data.
            case mqtt(topic: String, correlationData: [UInt8]?)
            /// A caller in this process, by its number in `local`.
            case local(Int)
        }

        let target: Target

        init(_ target: Target) { self.target = target }

        /// Whether the caller is in this process (`request(topic:payload:)`) rather than an MQTT
        /// 5 requester: it waits for its answer, so a request taken by no topic is still answered
        /// (`refuseInProcess`).
        public var isInProcess: Bool {
            if case .local = target { true } else { false }
        }
    }
}
