import Foundation
import HomeModel
import MQTT

/// `<base>/$gateway/request/<op>` → `<base>/$gateway/response/<op>`: managing the home over MQTT.
extension Gateway {
    static let gatewayOutputs: Set<String> = ["status", "tree", "event", "error"]

    /// The op of a message on `<base>/$gateway/<rest>`, if it is a request; anything else is
    /// answered or reported here.
    func gatewayRequest(_ rest: String, _ message: IncomingMessage) -> String? {
        if Self.gatewayOutputs.contains(rest) || rest.hasPrefix("response/") {
            refuseLocal(message, code: .unknownTopic, "'\(rest)' is published by the gateway, not a request")
            return nil
        }
        guard rest.hasPrefix("request/") else {
            reportUnknown(
                message,
                "'\(base)/$gateway/\(rest)' is not a gateway topic; requests go to \(base)/$gateway/request/<op>")
            return nil
        }
        let op = String(rest.dropFirst("request/".count))
        guard Self.hasOperationShape(op) else {
            // Its answer topic would be made from it, and may be one the broker refuses.
            reportUnknown(
                message,
                "'\(MQTTTopicShape.describe(op))' is not an operation: an operation is 1 to 3 levels of "
                    + "lowercase letters, digits and '-' (see \(base)/$gateway/request/<op> in the documentation)")
            return nil
        }
        return op
    }

    /// What an operation's name looks like (`tree`, `room/add`, a source's `hap/pair`): 1 to 3
    /// levels of lowercase letters, digits and `-`, 64 bytes at most. An unknown name of that
    /// shape is answered `unknown-op` on its response topic; any other is no request.
    static func hasOperationShape(_ op: String) -> Bool {
        guard !op.isEmpty, op.utf8.count <= 64 else { return false }
        let levels = op.split(separator: "/", omittingEmptySubsequences: false)
        return levels.count <= 3
            && levels.allSatisfy { level in
                !level.isEmpty
                    && level.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D }
            }
    }

    /// A gateway request's fields, read, then queued for the request loop: a `pair` takes
    /// seconds, and `set`/`get` must not wait behind it.
    func manage(op: String, _ message: IncomingMessage) {
        let responseTopic = "\(base)/$gateway/response/\(op)"
        if message.retain {
            if !message.payload.isEmpty {
                sendResponse(
                    responseTopic, id: Self.requestID(message.payload),
                    .failure(
                        GatewayFailure(
                            code: .retained,
                            message:
                                "a retained request is not run; publish it without the retain flag, and clear this one (an empty retained message)"
                        )))
            }
            return
        }
        let fields: [String: JSONValue]
        if message.payload.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) {
            fields = [:]
        } else {
            do throws(ModelError) {
                guard case .object(let object) = try JSONValue(parsing: message.payload) else {
                    sendResponse(
                        responseTopic, id: .null,
                        .failure(GatewayFailure(code: .invalidJSON, message: "a request is a JSON object")),
                        reply: Reply(message))
                    return
                }
                fields = object
            } catch {
                sendResponse(
                    responseTopic, id: .null, .failure(GatewayFailure(code: .invalidJSON, message: error.message)),
                    reply: Reply(message))
                return
            }
        }
        work.requestQueue.yield(
            GatewayRequest(
                op: op, fields: fields, responseTopic: responseTopic, id: fields["id"] ?? .null, reply: Reply(message)))
    }

    func sendResponse(
        _ topic: String, id: JSONValue, _ outcome: Result<JSONValue, GatewayFailure>, reply: Reply? = nil
    ) {
        activity.answered(topic, op: nil, outcome)
        switch outcome {
        case .success(let data):
            answer(topic, json: .object(["id": id, "status": .string("ok"), "data": data]), reply: reply)
        case .failure(let failure):
            activity.failed()
            answer(
                topic,
                json: .object([
                    "id": id, "status": .string("error"), "code": .string(failure.code.rawValue),
                    "message": .string(failure.message),
                ]), reply: reply)
        }
    }

    /// Performs the request through the gateway's list of operations.
    func performRequest(op: String, fields: [String: JSONValue]) async -> Result<JSONValue, GatewayFailure> {
        do throws(GatewayFailure) {
            return .success(
                try await ManagementOperations.perform(op, fields: fields, among: operations, on: Editor(gateway: self))
            )
        } catch {
            return .failure(error)
        }
    }
}

/// A gateway request waiting for its turn.
struct GatewayRequest: Sendable {
    var op: String
    var fields: [String: JSONValue]
    var responseTopic: String
    var id: JSONValue
    var reply: Gateway.Reply?
}
