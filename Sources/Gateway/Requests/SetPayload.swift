public import HomeModel

// What a request's payload says, read alike by every front end that takes one: the `id` it
// names, and a `set`'s value (the topic dialect's `set`, Homie's `set`, which is the same text).
extension Gateway {
    /// The `id` of a JSON request payload, or null.
    public static func requestID(_ payload: [UInt8]) -> JSONValue {
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
