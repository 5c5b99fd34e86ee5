import HomeModel
import Logging
import MQTT
import Synchronization

/// Every MQTT publish of the gateway, in one order.
///
/// The gateway queues here; one drain task, off the gateway's actor, hands each message to the
/// MQTT client. So a clear can never overtake the publish it follows, the actor never waits for
/// the network, and publishing never waits for the actor's other work. A message goes straight
/// to the client when nothing is queued and the client has room: handing each one to the drain
/// costs a thread switch, most of a notification's time in the gateway. When the broker is
/// behind, the drain takes what is queued a batch at a time (`EventStream`).
final class Outbox: Sendable {
    enum Item: Sendable {
        case publish(topic: String, payload: [UInt8], retain: Bool, qos: MQTTQoS?, properties: MQTTPublishProperties?)
        /// Retained `meta`/`state` topics of many characteristics, their topic strings made as
        /// each is sent (queued whole, a large home's would all be in memory at once).
        case characteristics([CharacteristicTopics])
        /// Made by the gateway as it is sent, behind everything queued before it.
        case republication(Republication)
    }

    enum Republication: Sendable {
        /// Every retained topic, after a reconnect.
        case all
        /// One output's documents (`Gateway.republish(_:)`).
        case output(ObjectIdentifier)
    }

    private let mqtt: any MQTTTransport
    /// The QoS of a message that names none (the config's `qos`).
    private let defaultQoS: MQTTQoS
    private let logger: Logger
    /// What waits for the drain, which takes it a batch at a time (`EventStream`).
    private let items: EventStream<Item>
    private let queued: EventStream<Item>.Continuation
    /// Messages queued and not yet handed to the client (a republication counts as one). The
    /// drain lowers it after a send, releasing: a publisher that reads zero (acquiring) comes
    /// after every queued message in the client's order.
    private let waiting = Atomic(0)
    /// The payload bytes of the queued publishes (`Item.publish`; a batch of characteristics'
    /// topics and a republication make theirs as they are sent). A large home's first
    /// publication waits on it as well as on the count: its HA configs and tree pages are
    /// large, and 20,000 of them queued were most of its peak memory.
    private let waitingBytes = Atomic(0)
    /// Which failures to log and how many went unlogged.
    private let failures = Mutex(PublishFailures())
    /// Publishes not handed to the broker: refused before sending (a topic or packet it would
    /// not take), or failed. For the health report.
    private let failedCount = Atomic(0)
    var failedPublishes: Int { failedCount.load(ordering: .relaxed) }

    init(mqtt: any MQTTTransport, defaultQoS: MQTTQoS, logger: Logger) {
        self.mqtt = mqtt
        self.defaultQoS = defaultQoS
        self.logger = logger
        (items, queued) = EventStream<Item>.makeStream()
    }

    /// Messages queued and not yet handed to the client (a republication counts as one): the
    /// direct path is taken only at zero, and a producer of many waits for it to fall.
    var backlog: Int { waiting.load(ordering: .acquiring) }

    /// The payload bytes of the queued publishes (`waitingBytes`).
    var backlogBytes: Int { waitingBytes.load(ordering: .acquiring) }

    /// Under MQTT 5 every publication says what it is, all UTF-8: JSON documents
    /// `application/json`, `$availability` and the status `text/plain`, and `state` by its text
    /// (`stateProperties`).
    static let json = MQTTPublishProperties(contentType: "application/json", isUTF8Text: true)
    static let text = MQTTPublishProperties(contentType: "text/plain", isUTF8Text: true)

    /// The properties of a publication on `topic`; a clear (empty payload) carries none.
    static func typed(_ topic: String, _ payload: [UInt8]) -> MQTTPublishProperties {
        guard !payload.isEmpty else { return MQTTPublishProperties() }
        if topic.hasSuffix("/state") { return stateProperties(payload) }
        if topic.hasSuffix("/$availability") || topic.hasSuffix("/$gateway/status") { return text }
        return json
    }

    /// A `state` text that is JSON (`true`, `80`, `21.5`, and a string value that happens to
    /// read as JSON) is `application/json`; any other text `text/plain`.
    ///
    /// So a Node-RED flow gets the same value over MQTT 5 as over 3.1.1. Node-RED's mqtt-in
    /// node in its default "auto-detect" mode (`subscriptionHandler` in
    /// `@node-red/nodes/core/network/10-mqtt.js`, Node-RED 3.0 on) tries `JSON.parse` on
    /// every UTF-8 payload of 3.1.1, keeping the string when that fails; on MQTT 5 it follows
    /// the content type instead: `application/json` is parsed (a failure is an error and the
    /// message is dropped), `text/plain` stays a string. Typing by the text itself gives both
    /// protocols the same outcome: `true` and `80` parse on both, `Garage` stays a string on
    /// both. What holds: this parser is strict where `JSON.parse` is lenient in three corners
    /// (a number beyond a Double, a lone surrogate escape, nesting past 256 levels), so a
    /// string value made of such a text goes as `text/plain`: never an error, a string on 5.
    static func stateProperties(_ payload: [UInt8]) -> MQTTPublishProperties {
        isJSONText(payload) ? json : text
    }

    static func isJSONText(_ payload: [UInt8]) -> Bool {
        // Most texts are told by their first byte; only those that can start a JSON value
        // (after JSON's whitespace) are parsed.
        guard let first = payload.first(where: { $0 != 0x20 && $0 != 0x09 && $0 != 0x0A && $0 != 0x0D }) else {
            return false
        }
        // Every value change goes through here: the common texts (booleans, short decimals) are
        // told without building a JSONValue; anything else is left to the parser.
        if isPlainJSONLiteral(payload) { return true }
        switch first {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "t"), UInt8(ascii: "f"),
            UInt8(ascii: "n"), UInt8(ascii: "\""), UInt8(ascii: "["), UInt8(ascii: "{"):
            return (try? JSONValue(parsing: payload)) != nil
        default:
            return false
        }
    }

    private static let literalWords = [Array("true".utf8), Array("false".utf8), Array("null".utf8)]

    /// `true`, `false`, `null`, or a decimal of JSON's grammar short enough for any parser
    /// (`-?(0|[1-9][0-9]*)(.[0-9]+)?`, at most 15 digits, no exponent).
    static func isPlainJSONLiteral(_ p: [UInt8]) -> Bool {
        // By length first: three `elementsEqual` over `String.UTF8View` were ~300 instructions
        // a value change, most of them for payloads of another length.
        if p.count == 4 || p.count == 5, literalWords.contains(p) { return true }
        var i = 0
        if i < p.count, p[i] == UInt8(ascii: "-") { i += 1 }
        func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }
        let start = i
        while i < p.count, isDigit(p[i]) { i += 1 }
        let integer = i - start
        guard integer > 0, integer == 1 || p[start] != UInt8(ascii: "0") else { return false }
        var digits = integer
        if i < p.count, p[i] == UInt8(ascii: ".") {
            i += 1
            let fraction = i
            while i < p.count, isDigit(p[i]) { i += 1 }
            guard i > fraction else { return false }
            digits += i - fraction
        }
        return i == p.count && digits <= 15
    }

    /// Publishes now if nothing waits and the client has room, else queues. Without
    /// `properties`, they follow from the topic (`typed`).
    func publish(
        _ topic: String, _ payload: [UInt8], retain: Bool, qos: MQTTQoS? = nil, properties: MQTTPublishProperties? = nil
    ) {
        if backlog == 0 {
            do throws(MQTTError) {
                if try mqtt.publishWithoutWaiting(
                    topic, payload: payload, qos: qos ?? defaultQoS, retain: retain,
                    properties: properties ?? Self.typed(topic, payload))
                {
                    return
                }
            } catch {
                failed(topic, error)
                return
            }
        }
        waitingBytes.add(payload.count, ordering: .relaxed)
        queue(.publish(topic: topic, payload: payload, retain: retain, qos: qos, properties: properties), counting: 1)
    }

    func queue(_ list: [CharacteristicTopics]) {
        guard !list.isEmpty else { return }
        queue(.characteristics(list), counting: CharacteristicTopics.messages(in: list))
    }

    func queue(_ republication: Republication) {
        queue(.republication(republication), counting: 1)
    }

    private func queue(_ item: Item, counting messages: Int) {
        waiting.add(messages, ordering: .acquiringAndReleasing)
        queued.yield(item)
    }

    /// Nothing more will be queued; the drain ends once it has sent what is queued.
    func finish() { queued.finish() }

    private func sent(_ messages: Int) {
        waiting.subtract(messages, ordering: .acquiringAndReleasing)
    }

    /// Waits until fewer than `limit` messages wait and their payloads are below `bytes`, or
    /// until `deadline`. Polls: it is used only while the first publication of a large home is
    /// made, and at the end.
    func wait(below limit: Int, bytes: Int = .max, until deadline: ContinuousClock.Instant? = nil) async {
        while backlog >= limit || backlogBytes >= bytes {
            if let deadline, ContinuousClock.now >= deadline { return }
            // A first publication stopped (SIGTERM) while the broker takes nothing: its caller
            // checks for the cancellation next; a sleep that throws at once would spin here.
            if deadline == nil, Task.isCancelled { return }
            try? await Task.sleep(for: .milliseconds(2))
        }
    }

    /// Hands every queued item to the client, in order, until `finish`; `republish` makes and
    /// sends a republication (through `send`) when its turn comes.
    func drain(republish: @Sendable (Republication) async -> Void) async {
        for await item in items {
            switch item {
            case .publish(let topic, let payload, let retain, let qos, let properties):
                await send(topic, payload, retain: retain, qos: qos, properties: properties)
                sent(1)
                // After the count: a producer waiting on the bytes finds the count down too.
                waitingBytes.subtract(payload.count, ordering: .releasing)
            case .characteristics(let list):
                await send(list)
                sent(CharacteristicTopics.messages(in: list))
            case .republication(let republication):
                await republish(republication)
                sent(1)
            }
        }
        reportUnlogged()
    }

    func send(_ list: [CharacteristicTopics]) async {
        for item in list {
            if let meta = item.meta { await send(item.topic + "/meta", meta, retain: true) }
            if let state = item.state { await send(item.topic + "/state", state, retain: true) }
        }
    }

    func send(
        _ topic: String, _ payload: [UInt8], retain: Bool, qos: MQTTQoS? = nil, properties: MQTTPublishProperties? = nil
    ) async {
        do throws(MQTTError) {
            try await mqtt.publish(
                topic, payload: payload, qos: qos ?? defaultQoS, retain: retain,
                properties: properties ?? Self.typed(topic, payload))
        } catch {
            failed(topic, error)
        }
    }

    /// Logs a failed publish, unless one of its kind was logged within `PublishFailures.interval`
    /// (then it is counted). One too large for the broker says so, with its size and the limit.
    private func failed(_ topic: String, _ error: MQTTError) {
        failedCount.add(1, ordering: .relaxed)
        let (log, suppressed) = failures.withLock { $0.admit(error.code.rawValue, now: .now) }
        guard log else { return }
        // The topic's shape: a request's topic comes from a client, and may be 400 levels long
        // or hold what a terminal takes for a command.
        var metadata: Logger.Metadata = ["topic": "\(MQTTTopicShape.describe(topic))", "error": "\(error)"]
        if suppressed > 0 { metadata["not-logged-before"] = "\(suppressed) more like it" }
        let tooLarge = error.code == .packetTooLarge
        logger.warning(
            tooLarge ? "not published: larger than the broker's maximum packet size" : "publish failed",
            metadata: metadata)
    }

    /// An answer the gateway did not hand to the client because its packet would be too large
    /// (it sent a `too-large` error in its place): logged as a failed publish is.
    func refused(_ topic: String, size: Int, limit: Int) {
        failed(
            topic,
            MQTTError(
                code: .packetTooLarge,
                message: "an answer of \(size) bytes, more than the broker's maximum packet size (\(limit)); "
                    + "a too-large error answer went instead"))
    }

    /// The failures counted and never logged, in one line each kind (at the end of the drain).
    /// `payload` for an answer on `topic`, or, when its packet would exceed the broker's
    /// maximum, a `too-large` error answer in its place (with the request's `id` and `op`),
    /// counted as refused.
    func fitting(_ topic: String, _ payload: [UInt8], json: JSONValue, properties: MQTTPublishProperties) -> [UInt8] {
        let limits = mqtt.brokerLimits
        guard let limit = limits.maximumPacketSize else { return payload }
        let size = MQTTBrokerLimits.publishPacketSize(
            topic: topic, payloadCount: payload.count, qos: limits.qos(for: defaultQoS), properties: properties,
            protocolVersion: mqtt.protocolVersion)
        guard size > limit else { return payload }
        refused(topic, size: size, limit: limit)
        var object: [String: JSONValue] = [
            "id": json["id"] ?? .null, "status": .string("error"), "code": .string(ErrorCode.tooLarge.rawValue),
            "message": .string(
                "the answer is a packet of \(size) bytes, more than the broker's maximum packet size (\(limit))"),
        ]
        if let op = json["op"] { object["op"] = op }
        return JSONValue.object(object).encodedUTF8()
    }

    private func reportUnlogged() {
        for (kind, count) in failures.withLock({ $0.takeSuppressed() }) {
            logger.warning(
                "publishes failed and not logged one by one", metadata: ["error": "\(kind)", "count": "\(count)"])
        }
    }
}

/// A characteristic's retained topics to publish (a payload), clear (empty) or leave (nil).
struct CharacteristicTopics: Sendable {
    /// The characteristic's base topic; `/meta` and `/state` are added as each is sent.
    var topic: String
    var meta: [UInt8]?
    var state: [UInt8]?

    static func messages(in list: [CharacteristicTopics]) -> Int {
        list.reduce(0) { $0 + ($1.meta == nil ? 0 : 1) + ($1.state == nil ? 0 : 1) }
    }
}
