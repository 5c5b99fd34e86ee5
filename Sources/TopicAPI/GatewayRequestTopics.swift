public import Gateway
public import HomeModel
import MQTT

/// `<base>/$gateway/request/<op>` → `<base>/$gateway/response/<op>`: managing the home over MQTT.
extension Gateway {
    static let gatewayOutputs: Set<String> = ["status", "tree", "event", "error"]

    /// The op of a message on `<base>/$gateway/<rest>`, if it is a request; anything else is
    /// answered or reported here.
    func gatewayRequest(_ rest: String, _ message: IncomingMessage) -> String? {
        if Self.gatewayOutputs.contains(rest) || rest.hasPrefix("response/") {
            refuseInProcess(message, code: .unknownTopic, "'\(rest)' is published by the gateway, not a request")
            return nil
        }
        let base = baseTopic
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

    /// A gateway request's fields read into its operation, which is submitted (operations run
    /// one at a time: a `pair` takes seconds, and `set`/`get` must not wait behind it); its
    /// outcome is answered on `response/<op>`.
    func manage(op: String, _ message: IncomingMessage) {
        let responseTopic = "\(baseTopic)/$gateway/response/\(op)"
        func refuse(_ id: JSONValue, _ failure: GatewayFailure, reply: Reply?) {
            activity.answered(responseTopic, op: op, Result<Void, GatewayFailure>.failure(failure))
            activity.failed()
            answer(responseTopic, json: Answers.response(id: id, .failure(failure)), reply: reply)
        }
        if message.retain {
            if !message.payload.isEmpty {
                refuse(
                    Self.requestID(message.payload),
                    GatewayFailure(
                        code: .retained,
                        message:
                            "a retained request is not run; publish it without the retain flag, and clear this one (an empty retained message)"
                    ), reply: nil)
            }
            return
        }
        var fields: [String: JSONValue] = [:]
        if !message.payload.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) {
            do throws(ModelError) {
                guard case .object(let object) = try JSONValue(parsing: message.payload) else {
                    let failure = GatewayFailure(code: .invalidJSON, message: "a request is a JSON object")
                    return refuse(.null, failure, reply: message.reply)
                }
                fields = object
            } catch {
                return refuse(.null, GatewayFailure(code: .invalidJSON, message: error.message), reply: message.reply)
            }
        }
        let id = fields["id"] ?? .null
        let operation: any ManagementOperation
        do throws(GatewayFailure) {
            operation = try ManagementOperations.make(op, fields: fields, among: operations)
        } catch {
            return refuse(id, error, reply: message.reply)
        }
        let reply = message.reply
        submit(.manage(operation), label: responseTopic) { gateway, outcome in
            let json =
                switch outcome {
                case .success(.data(let data)): Answers.response(id: id, .success(data))
                case .success: Answers.response(id: id, .success(.null))
                case .failure(let failure): Answers.response(id: id, .failure(failure))
                }
            gateway.answer(responseTopic, json: json, reply: reply)
        }
    }
}
