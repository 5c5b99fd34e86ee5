public import Gateway
import HomeModel
import MQTT

/// The MQTT topic dialect — `set`, `get`, `$toggle`, `$identify`, `$gateway/request/<op>` and
/// their answers — as an output of the gateway: registered last in its list, it subscribes the
/// dialect's request topics (`requestFilters`) and takes every message no other output took,
/// making it a typed `GatewayCommand` whose outcome it publishes as the README's topic contract
/// says (`TopicCommands`), or reporting a topic the gateway does not serve. Its work runs on the
/// gateway (`extension Gateway` below, in this module: the compiler holds it to the gateway's
/// public API), through the typed API (`submit`) and the core's answers (`answer`).
///
/// Listed last among the outputs (`TopicRequestsFeature`, last of `HomeMQTTApp.extensions`): it
/// takes every message, so an output after it would be offered none.
public final class TopicRequests: GatewayOutput {
    public init() {}

    public func requestFilters(_ gateway: isolated Gateway) -> [String] { gateway.topicRequestFilters }

    public func handle(_ message: IncomingMessage, _ gateway: isolated Gateway) -> Bool {
        gateway.handleTopicRequest(message)
        return true
    }
}

extension Gateway {
    /// The request topics of the dialect, at the depths it serves them.
    var topicRequestFilters: [String] {
        let base = baseTopic
        return [
            "\(base)/+/+/+/+/set", "\(base)/+/+/+/+/get", "\(base)/+/+/+/$toggle", "\(base)/+/+/$identify",
            "\(base)/$gateway/request/#",
        ]
    }

    /// A message no other output took (the dialect is the last output).
    func handleTopicRequest(_ message: IncomingMessage) {
        let base = baseTopic
        guard message.topic.hasPrefix(base + "/") else {
            refuseInProcess(message, code: .unknownTopic, "'\(message.topic)' is not under \(base)/")
            return
        }
        let rest = message.topic.dropFirst(base.count + 1)
        if rest.hasPrefix("$gateway/") {
            guard let op = gatewayRequest(String(rest.dropFirst("$gateway/".count)), message) else { return }
            manage(op: op, message)
            return
        }
        guard let slash = message.topic.lastIndex(of: "/") else { return }
        let kind = String(message.topic[message.topic.index(after: slash)...])
        let path = String(message.topic[..<slash])
        if publishedLevels.contains(kind) {
            // Only an in-process request names one: the gateway subscribes to requests alone.
            refuseInProcess(message, code: .unknownTopic, "'\(kind)' is published by the gateway, not a request")
            return
        }
        switch kind {
        case "set", "get":
            guard let node = tree.characteristic(topic: path) else {
                reportUnknown(
                    message, "no characteristic at '\(path)' (see \(base)/$gateway/tree)",
                    result: servedDepth(path, 4) ? (path + "/result", kind) : nil)
                return
            }
            kind == "set" ? write(node, message) : read(node, message)
        case "$toggle":
            guard let (accessory, service) = tree.service(topic: path) else {
                reportUnknown(
                    message, "no service at '\(path)'",
                    result: servedDepth(path, 3) ? (path + "/$result", "toggle") : nil)
                return
            }
            submit(
                .toggle(accessoryID: accessory.id, serviceIID: service.service.iid), answering: message,
                on: service.topic + "/$result", op: "toggle")
        case "$identify":
            guard let accessory = tree.accessories.first(where: { $0.topic == path }) else {
                reportUnknown(
                    message, "no accessory at '\(path)'",
                    result: servedDepth(path, 2) ? (path + "/$result", "identify") : nil)
                return
            }
            submit(
                .identify(accessoryID: accessory.id), answering: message, on: accessory.topic + "/$result",
                op: "identify")
        default:
            reportUnknown(
                message, "'\(kind)' is not a topic the gateway serves; requests are set, get, $toggle and $identify")
        }
    }

    /// Whether `path` has the levels below the base that a request's path has: 4 for a
    /// characteristic, 3 for a service, 2 for an accessory. A request of another shape (which
    /// only a front end in this process can send: the gateway subscribes to these shapes
    /// alone) is answered where it came from, never on a topic made from it: such a topic may
    /// be one the broker refuses (mosquitto drops a client that publishes to more than 201
    /// levels).
    func servedDepth(_ path: String, _ levels: Int) -> Bool {
        path.hasPrefix(baseTopic + "/") && MQTTTopicShape.levels(path) - MQTTTopicShape.levels(baseTopic) == levels
    }

    /// Reports a message on a topic the gateway does not serve on `$gateway/error`. `result` is
    /// the topic a request of that kind is answered on, and its op: a client that waits there
    /// (one still using a topic from before a rename) gets the error there too, with the
    /// request's `id`, and on its Response Topic. Without one (a topic of no served shape)
    /// the error goes to where the request came from alone.
    func reportUnknown(_ message: IncomingMessage, _ text: String, result: (topic: String, op: String)? = nil) {
        guard !message.retain || !message.payload.isEmpty else { return }
        if let result {
            let failure = GatewayFailure(code: .unknownTopic, message: text)
            answer(
                result.topic, json: Answers.error(id: Self.requestID(message.payload), op: result.op, failure),
                reply: message.reply)
        } else if let reply = message.reply, !reply.isInProcess {
            let json = Answers.error(
                id: Self.requestID(message.payload), op: nil, GatewayFailure(code: .unknownTopic, message: text))
            answer(reply: reply, json: json)
        } else {
            refuseInProcess(message, code: .unknownTopic, text)
        }
        activity.unknownTopic(message.topic, text)
        let error: JSONValue = .object([
            "topic": .string(message.topic),
            "code": .string(ErrorCode.unknownTopic.rawValue),
            "message": .string(text),
        ])
        publish("\(baseTopic)/$gateway/error", error.encodedUTF8(), retain: false)
    }

    /// A request left retained on the broker would run again at every reconnect: it is refused
    /// each time, and left where it is — another client published it, and only that client (or
    /// its user) may clear it.
    /// Returns whether the message was a retained request (and so is done with).
    func refuseRetained(_ message: IncomingMessage, resultTopic: String, op: String, id: JSONValue) -> Bool {
        guard message.retain else { return false }
        if !message.payload.isEmpty {
            refuse(
                resultTopic, op: op, id: id,
                GatewayFailure(
                    code: .retained,
                    message:
                        "a retained \(op) request is not applied; publish it without the retain flag, and clear this one (an empty retained message)"
                ), reply: nil)
        }
        return true
    }
}
