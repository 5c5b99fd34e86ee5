public import HomeModel
import MQTT

// Who waits for a request's answer besides its topic: an MQTT 5 requester's Response Topic,
// or a caller in this process (the web view's page and `/ws`) awaiting
// `request(topic:payload:)`, which takes a topic and payload as an MQTT client would send them.

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

/// In-process requests waiting for their answer, by number.
struct LocalRequests {
    /// One request: its payload, for the `id` of an error answered here; the answer if it came
    /// before the caller began to wait, or the caller.
    struct Waiting {
        var payload: [UInt8]
        var answer: JSONValue?
        var continuation: CheckedContinuation<JSONValue, Never>?
    }

    private(set) var waiting: [Int: Waiting] = [:]
    private var next = 0

    /// A new request's number.
    mutating func add(payload: [UInt8]) -> Int {
        next += 1
        waiting[next] = Waiting(payload: payload)
        return next
    }

    /// The answer that came before the caller began to wait, taken.
    mutating func takeEarlyAnswer(_ number: Int) -> JSONValue? {
        guard let answer = waiting[number]?.answer else { return nil }
        waiting[number] = nil
        return answer
    }

    mutating func wait(_ number: Int, _ continuation: CheckedContinuation<JSONValue, Never>) {
        waiting[number]?.continuation = continuation
    }

    /// Gives `number` its answer: the caller waiting for it is returned, to be resumed; else
    /// the answer is kept for it. Nil as well when it was answered already.
    mutating func answer(_ number: Int, _ json: JSONValue) -> CheckedContinuation<JSONValue, Never>? {
        guard var request = waiting[number], request.answer == nil else { return nil }
        guard let continuation = request.continuation else {
            request.answer = json
            waiting[number] = request
            return nil
        }
        waiting[number] = nil
        return continuation
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

        /// The reply a request asked for.
        init?(_ message: IncomingMessage) {
            guard let reply = message.reply else { return nil }
            self = reply
        }
    }

    /// A request from inside the process on `topic` (`set`, `get`, `$toggle`, `$identify`,
    /// `$set`, `$gateway/request/<op>`), handled as an MQTT message there: the same validation,
    /// the same workers, the same answer on the same topics, returned here as well.
    public func request(topic: String, payload: [UInt8]) async -> JSONValue {
        await local(payload: payload) { reply in
            deliver(IncomingMessage(topic: topic, payload: payload, reply: reply))
        }
    }

    /// Runs `body` with a reply to this caller, and waits for the answer.
    private func local(payload: [UInt8], _ body: (Reply) -> Void) async -> JSONValue {
        guard isStarted else {
            return .object(Self.localError(.unavailable, "the gateway is not online", id: payload))
        }
        let number = local.add(payload: payload)
        // Every request is answered by the path that takes it, or by its deadline; this is the
        // last resort for one that none answers, kept by the deadline watchdog.
        work.deadlines.startLocal(number, timeout: Self.localRequestTimeout(config), now: clock.now)
        body(Reply(.local(number)))
        if let answer = local.takeEarlyAnswer(number) { return answer }
        return await withCheckedContinuation { continuation in local.wait(number, continuation) }
    }

    /// How long an in-process request waits at most: longer than any worker's deadline, so a
    /// request to an accessory is answered by its own `timeout` first.
    static func localRequestTimeout(_ config: GatewayConfig) -> Double { config.requestTimeout + 2 }

    /// The in-process requests past `localRequestTimeout`, from the deadline watchdog.
    func expired(_ numbers: [Int]) {
        let timeout = Self.localRequestTimeout(config)
        for number in numbers {
            guard let payload = local.waiting[number]?.payload else { continue }
            answerLocally(number, .object(Self.localError(.timeout, "no answer within \(timeout) s", id: payload)))
        }
    }

    /// At the end of `stop`: the watchdog has ended, so what is still waiting is answered here
    /// rather than never.
    func answerLocalRequestsAtStop() {
        for number in local.waiting.keys.sorted() {
            guard let payload = local.waiting[number]?.payload else { continue }
            answerLocally(number, .object(Self.localError(.unavailable, "the gateway stopped", id: payload)))
        }
    }

    func answerLocally(_ number: Int, _ json: JSONValue) {
        guard let request = local.waiting[number], request.answer == nil else { return }
        work.deadlines.finishLocal(number)
        local.answer(number, json)?.resume(returning: json)
    }

    /// An in-process request on a topic that takes none is answered here; an MQTT one has its
    /// `$gateway/error` (or nothing, for the gateway's own output).
    func refuseLocal(_ message: IncomingMessage, code: ErrorCode, _ text: String) {
        guard case .local(let number)? = message.reply?.target else { return }
        answerLocally(number, .object(Self.localError(code, text, id: message.payload)))
    }

    private static func localError(_ code: ErrorCode, _ text: String, id payload: [UInt8]) -> [String: JSONValue] {
        ["id": requestID(payload), "status": "error", "code": .string(code.rawValue), "message": .string(text)]
    }

    /// An answer on its own topic (`result`, `$result`, `response/<op>`) and, for an MQTT 5
    /// request that named a response topic, there too with its correlation data.
    /// One that does not fit the broker's maximum packet size becomes a `too-large` error.
    func answer(_ topic: String, json: JSONValue, reply: Reply?) {
        let payload = json.encodedUTF8()
        enqueue(topic, fitting(topic, payload, json: json, properties: Outbox.json), retain: false)
        answerReply(reply, json: json, payload: payload)
    }

    /// An answer to where its request came from alone: its MQTT 5 Response Topic, or the
    /// caller in this process.
    func answerReply(_ reply: Reply?, json: JSONValue, payload: [UInt8]) {
        switch reply?.target {
        case .mqtt(let replyTopic, _)? where isServedTopic(replyTopic):
            // A response topic among the homes' or the gateway's own topics would let a client
            // publish, through the gateway, where the broker lets it not: answered on `result` only.
            logger.debug(
                "a response topic among the gateway's topics was not used", metadata: ["topic": "\(replyTopic)"])
        case .mqtt(let replyTopic, let correlationData)?:
            var properties = Outbox.json
            properties.correlationData = correlationData
            enqueue(
                replyTopic, fitting(replyTopic, payload, json: json, properties: properties), retain: false,
                properties: properties)
        case .local(let number)?:
            answerLocally(number, json)
        case nil:
            break
        }
    }

    /// Whether `topic` is under a home's base topic or a prefix the gateway publishes under.
    func isServedTopic(_ topic: String) -> Bool {
        let prefixes =
            database.homesNow.map { $0.baseTopic ?? config.gatewayBase } + [base] + config.reservedTopicPrefixes
        return prefixes.contains { topic == $0 || topic.hasPrefix($0 + "/") }
    }

    /// `payload` for an answer on `topic`, or, when its packet would exceed the broker's
    /// maximum, a `too-large` error answer in its place (with the request's `id` and `op`).
    func fitting(_ topic: String, _ payload: [UInt8], json: JSONValue, properties: MQTTPublishProperties) -> [UInt8] {
        let limits = mqtt.brokerLimits
        guard let limit = limits.maximumPacketSize else { return payload }
        let size = MQTTBrokerLimits.publishPacketSize(
            topic: topic, payloadCount: payload.count, qos: limits.qos(for: config.qos), properties: properties,
            protocolVersion: mqtt.protocolVersion)
        guard size > limit else { return payload }
        outbox.refused(topic, size: size, limit: limit)
        var object: [String: JSONValue] = [
            "id": json["id"] ?? .null, "status": .string("error"), "code": .string(ErrorCode.tooLarge.rawValue),
            "message": .string(
                "the answer is a packet of \(size) bytes, more than the broker's maximum packet size (\(packetLimitText))"
            ),
        ]
        if let op = json["op"] { object["op"] = op }
        return JSONValue.object(object).encodedUTF8()
    }
}
