import Gateway
import HomeModel

/// A page's write or gateway request, `{"id": …, "topic": "<base>/…/set", "payload": "80"}`,
/// handed to the gateway exactly as an MQTT message on that topic would be: one path, one
/// validation, one answer (`Gateway.request(topic:payload:)`). What is not such a request is
/// answered in the same shape, with the code that says why.
struct PageRequests: Sendable {
    let gateway: Gateway
    let base: String

    /// The answer to one request's text: the gateway's, or why it never reached the gateway.
    func answer(_ bytes: [UInt8], grant: WebAccess.Grant) async -> (id: JSONValue, answer: JSONValue) {
        let parsed: (id: JSONValue, topic: String, payload: String)
        do throws(GatewayFailure) {
            parsed = try read(bytes)
            // The role's rule (AccessPolicy), the same one the broker's ACL file says.
            guard grant.mayPublish(parsed.topic, base: base) else {
                throw GatewayFailure(
                    code: .insufficientPrivileges,
                    message: "a \(grant.role.rawValue) may not send '\(parsed.topic)'")
            }
        } catch {
            return (Self.id(in: bytes), Self.error(error))
        }
        return (parsed.id, await gateway.request(topic: parsed.topic, payload: Array(parsed.payload.utf8)))
    }

    /// `id` (any JSON, echoed back), `topic` (under the base, no wildcards), `payload` (a
    /// string; empty when left out, as `mosquitto_pub -n` sends); nothing else.
    func read(_ bytes: [UInt8]) throws(GatewayFailure) -> (id: JSONValue, topic: String, payload: String) {
        let json: JSONValue
        do throws(ModelError) {
            json = try JSONValue(parsing: bytes)
        } catch {
            throw GatewayFailure(code: .invalidJSON, message: error.message)
        }
        guard case .object(let fields) = json else {
            throw GatewayFailure(
                code: .invalidJSON, message: "a request is a JSON object: {\"topic\": …, \"payload\": …}")
        }
        let reader = try RequestReader.request(fields)
        let topic = try reader.text("topic")
        let payload = try reader.string("payload") ?? ""
        try reader.finish()
        try check(topic: topic)
        return (fields["id"] ?? .null, topic, payload)
    }

    /// Only the topics the gateway serves under its base: a page cannot publish elsewhere.
    func check(topic: String) throws(GatewayFailure) {
        let levels = topic.split(separator: "/", omittingEmptySubsequences: false)
        guard topic.hasPrefix(base + "/"), !levels.contains(where: \.isEmpty),
            !topic.contains(where: { $0 == "+" || $0 == "#" })
        else {
            throw GatewayFailure(
                code: .invalidTopic,
                message: "'\(topic)' is not a request topic: it must be under \(base)/, without + or # or empty levels")
        }
    }

    /// The `id` of a request that could not be read, if it has one, so the page can match it.
    static func id(in bytes: [UInt8]) -> JSONValue {
        guard let json = try? JSONValue(parsing: bytes), case .object(let fields) = json else { return .null }
        return fields["id"] ?? .null
    }

    static func error(_ failure: GatewayFailure) -> JSONValue {
        .object(["status": "error", "code": .string(failure.code.rawValue), "message": .string(failure.message)])
    }
}
