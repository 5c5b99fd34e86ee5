// The fields of MQTT requests and JSON `set` payloads, read with HomeModel's one strict reader:
// a missing, ill-typed or unknown field is answered with its code and the field's name.
public import HomeModel

/// A request's JSON object, read strictly (`id` is always allowed: it is echoed back).
public typealias RequestReader = StrictReader<JSONValue, GatewayFailure>

extension GatewayFailure {
    /// The reader's complaints as request failures: `missing-field`, `unknown-field`, `invalid-field`.
    public static let requestField: RequestReader.MakeFailure = { code, key, message in
        let mapped: ErrorCode =
            switch code {
            case .missingKey: .missingField
            case .unknownKey: .unknownField
            default: .invalidField
            }
        return GatewayFailure(code: mapped, message: key.map { "\($0): \(message)" } ?? message)
    }
}

extension StrictReader where Node == JSONValue, Failure == GatewayFailure {
    /// Reads `fields` as a request; `id` counts as read.
    public static func request(_ fields: [String: JSONValue]) throws(GatewayFailure) -> RequestReader {
        let reader = try RequestReader(.object(fields), failure: GatewayFailure.requestField)
        _ = reader.node("id")
        return reader
    }

    /// A field that must be a string with something in it.
    public func text(_ key: String) throws(GatewayFailure) -> String {
        guard let value = try string(key) else { throw error(key, .missingKey, "the request needs \"\(key)\"") }
        guard !value.trimmingCharacters(in: .whitespaces).isEmpty else {
            throw error(key, "must be a non-empty string")
        }
        return value
    }

    /// A string field that may be left out; null or empty reads as nil.
    public func optionalText(_ key: String) throws(GatewayFailure) -> String? {
        guard let value = try string(key), !value.isEmpty else { return nil }
        return value
    }

    public func int(_ key: String, in range: ClosedRange<Int>) throws(GatewayFailure) -> Int {
        guard let value = try int(key) else { throw error(key, .missingKey, "the request needs \"\(key)\"") }
        guard range.contains(value) else {
            throw error(key, "must be a whole number in \(range.lowerBound)…\(range.upperBound), got \(value)")
        }
        return value
    }

    public func optionalDouble(_ key: String, in range: ClosedRange<Double>) throws(GatewayFailure) -> Double? {
        guard let value = try double(key) else { return nil }
        guard range.contains(value) else {
            throw error(key, "must be a number in \(range.lowerBound)…\(range.upperBound), got \(value)")
        }
        return value
    }
}
