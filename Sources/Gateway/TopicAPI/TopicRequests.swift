import Foundation
public import HomeModel
import MQTT

/// The MQTT topic dialect — `set`, `get`, `$toggle`, `$identify`, `$gateway/request/<op>` and
/// their answers — as an output of the gateway: registered last in its list, it subscribes the
/// dialect's request topics (`requestFilters`) and takes every message no other output took,
/// making it a typed `GatewayCommand` whose outcome it publishes as the README's topic contract
/// says (`TopicCommands`), or reporting a topic the gateway does not serve. Its work runs on the
/// gateway (`extension Gateway` below), through the typed API (`submit`).
final class TopicRequests: GatewayOutput {
    func requestFilters(_ gateway: isolated Gateway) -> [String] { gateway.topicRequestFilters }

    func handle(_ message: IncomingMessage, _ gateway: isolated Gateway) -> Bool {
        gateway.handleTopicRequest(message)
        return true
    }
}

extension Gateway {
    /// Topic levels the gateway publishes itself; a message on one is never a request.
    static let outputKinds: Set<String> = ["state", "meta", "result", "$info", "$availability", "$result"]

    /// The request topics of the dialect, at the depths it serves them.
    var topicRequestFilters: [String] {
        [
            "\(base)/+/+/+/+/set", "\(base)/+/+/+/+/get", "\(base)/+/+/+/$toggle", "\(base)/+/+/$identify",
            "\(base)/$gateway/request/#",
        ]
    }

    /// A message no other output took (the dialect is the last output).
    func handleTopicRequest(_ message: IncomingMessage) {
        guard message.topic.hasPrefix(base + "/") else {
            refuseLocal(message, code: .unknownTopic, "'\(message.topic)' is not under \(base)/")
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
        if outputs.publishedKinds.contains(kind) {
            // Only an in-process request names one: the gateway subscribes to requests alone.
            refuseLocal(message, code: .unknownTopic, "'\(kind)' is published by the gateway, not a request")
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
        path.hasPrefix(base + "/") && MQTTTopicShape.levels(path) - MQTTTopicShape.levels(base) == levels
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
                result.topic, json: Payloads.error(id: Self.requestID(message.payload), op: result.op, failure),
                reply: Reply(message))
        } else if case .mqtt? = message.reply?.target {
            let json = Payloads.error(
                id: Self.requestID(message.payload), op: nil, GatewayFailure(code: .unknownTopic, message: text))
            answerReply(Reply(message), json: json, payload: json.encodedUTF8())
        } else {
            refuseLocal(message, code: .unknownTopic, text)
        }
        activity.unknownTopic(message.topic, text)
        enqueue(
            "\(base)/$gateway/error",
            json: .object([
                "topic": .string(message.topic),
                "code": .string(ErrorCode.unknownTopic.rawValue),
                "message": .string(text),
            ]))
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

    /// The `id` of a JSON request payload, or null.
    static func requestID(_ payload: [UInt8]) -> JSONValue {
        guard payload.first == UInt8(ascii: "{"), let json = try? JSONValue(parsing: payload),
            case .object(let object) = json
        else { return .null }
        return object["id"] ?? .null
    }

    /// Validates a `set` payload: a plain value in the codec's words, or `{"value": …, "id": …}`.
    /// Static (it reads nothing of the gateway), so that a test can ask what `set` would answer,
    /// and Homie reads its `set` payloads (the same text) alike.
    public static func parseSet(_ payload: [UInt8], node: TopicTree.CharacteristicNode) -> Result<
        (CharacteristicValue, JSONValue), GatewayFailure
    > {
        let metadata = ValueCodec.withStandardBounds(node.characteristic.metadata, type: node.characteristic.type)
        let label = node.typeName
        var id: JSONValue = .null
        do throws(ModelError) {
            if node.isReadOnlyScope {
                return .failure(
                    GatewayFailure(
                        code: .readOnlyScope,
                        message: "\(label) of this accessory is read-only by the gateway's scope configuration"))
            }
            try ValueCodec.checkWritable(metadata, label: label)
            guard let text = String(validating: payload, as: UTF8.self) else {
                return .failure(GatewayFailure(code: .invalidPayload, message: "the payload is not UTF-8 text"))
            }
            let trimmed = text.trimmingWhitespace()
            if trimmed.isEmpty {
                return .failure(
                    GatewayFailure(
                        code: .empty,
                        message: "an empty payload sets nothing; send a value such as \(Self.example(metadata))"))
            }
            if trimmed.hasPrefix("{") {
                let json = try JSONValue(parsing: Array(trimmed.utf8))
                guard case .object(let object) = json else {
                    return .failure(
                        GatewayFailure(code: .invalidJSON, message: "expected a JSON object with \"value\""))
                }
                id = object["id"] ?? .null
                // `value: null` is a value (refused by the codec), not a missing one.
                guard let raw = object["value"] else {
                    return .failure(GatewayFailure(code: .missingValue, message: "the JSON object has no \"value\""))
                }
                do throws(GatewayFailure) {
                    let fields = try RequestReader.request(object)
                    _ = fields.node("value")
                    try fields.finish()
                } catch {
                    return .failure(error)
                }
                return .success((try ValueCodec.parse(json: raw, metadata: metadata, label: label), id))
            }
            return .success((try ValueCodec.parse(text: trimmed, metadata: metadata, label: label), id))
        } catch {
            return .failure(GatewayFailure(error))
        }
    }

    static func example(_ metadata: CharacteristicMetadata) -> String {
        if let first = metadata.validValues.sorted(by: { $0.key < $1.key }).first { return "'\(first.value)'" }
        switch metadata.format {
        case .bool: return "'true'"
        case .string: return "some text"
        case .tlv8, .data: return "base64 data"
        default: return "'\(Int(metadata.minValue ?? 0))'"
        }
    }
}
