public import HomeModel
import MQTT

// Answers to requests, whoever made them: an answer goes on its own topic and to whoever waits
// besides (`Reply`: an MQTT 5 Response Topic, or a caller in this process). The front ends (the
// topic dialect, an output serving requests of its own) make the answer; the core publishes it,
// keeps it under the broker's packet limit, and keeps in-process callers' waits and deadlines.
extension Gateway {
    /// A request from inside the process on `topic` (`set`, `get`, `$toggle`, `$identify`,
    /// `$set`, `$gateway/request/<op>`), handled as an MQTT message there: offered to the
    /// outputs as one, it gets the same validation, the same workers, the same answer on the
    /// same topics, returned here as well.
    public func request(topic: String, payload: [UInt8]) async -> JSONValue {
        guard isStarted else {
            return LocalRequests.error(.unavailable, "the gateway is not online", id: payload)
        }
        let number = local.add(payload: payload)
        // Every request is answered by the path that takes it, or by its deadline; this is the
        // last resort for one that none answers, kept by the deadline watchdog.
        work.deadlines.startLocal(number, timeout: LocalRequests.timeout(config), now: clock.now)
        let message = IncomingMessage(topic: topic, payload: payload, reply: Reply(.local(number)))
        if !outputs.deliver(message, self) {
            refuseInProcess(message, code: .unknownTopic, "no output of the gateway serves '\(topic)'")
        }
        if let answer = local.takeEarlyAnswer(number) { return answer }
        return await withCheckedContinuation { continuation in local.wait(number, continuation) }
    }

    /// Answers in-process requests with an error: those past `LocalRequests.timeout` (from the
    /// deadline watchdog), and at the end of `stop` those still waiting (the watchdog has ended,
    /// so they are answered here rather than never).
    func answerLocally(_ numbers: [Int], _ code: ErrorCode, _ message: String) {
        for number in numbers {
            guard let json = local.error(number, code, message) else { continue }
            answerLocally(number, json)
        }
    }

    func answerLocally(_ number: Int, _ json: JSONValue) {
        guard local.isUnanswered(number) else { return }
        work.deadlines.finishLocal(number)
        local.answer(number, json)?.resume(returning: json)
    }

    /// Answers an in-process request that no topic takes (`{"id", "status": "error", "code",
    /// "message"}`); an MQTT request gets nothing here: it is reported on its topics or not at all.
    public func refuseInProcess(_ message: IncomingMessage, code: ErrorCode, _ text: String) {
        guard case .local(let number)? = message.reply?.target else { return }
        answerLocally(number, LocalRequests.error(code, text, id: message.payload))
    }

    /// An answer on its own topic (`result`, `$result`, `response/<op>`), not retained, and to
    /// whoever waits besides (`answer(reply:json:)`). One that does not fit the broker's maximum
    /// packet size becomes a `too-large` error (`Outbox.fitting`).
    public func answer(_ topic: String, json: JSONValue, reply: Reply?) {
        let payload = json.encodedUTF8()
        enqueue(topic, outbox.fitting(topic, payload, json: json, properties: Outbox.json), retain: false)
        answer(reply: reply, json: json, payload: payload)
    }

    /// An answer to where its request came from alone: its MQTT 5 Response Topic (with its
    /// Correlation Data), or the caller in this process.
    public func answer(reply: Reply?, json: JSONValue) {
        answer(reply: reply, json: json, payload: json.encodedUTF8())
    }

    private func answer(reply: Reply?, json: JSONValue, payload: [UInt8]) {
        switch reply?.target {
        case .mqtt(let replyTopic, _)? where isServedTopic(replyTopic):
            // A response topic among the homes' or the gateway's own topics would let a client
            // publish, through the gateway, where the broker lets it not: answered on its topic only.
            logger.debug(
                "a response topic among the gateway's topics was not used", metadata: ["topic": "\(replyTopic)"])
        case .mqtt(let replyTopic, let correlationData)?:
            var properties = Outbox.json
            properties.correlationData = correlationData
            enqueue(
                replyTopic, outbox.fitting(replyTopic, payload, json: json, properties: properties), retain: false,
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
}
