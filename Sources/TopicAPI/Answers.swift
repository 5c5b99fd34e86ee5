public import Gateway
public import HomeModel

/// The answers of the README's topic contract, made from typed outcomes: `result` and `$result`
/// (`{"id", "op", "status", "value"}`, with `results` for a `$set`), errors (`code`, `message`,
/// `hap`), and `response/<op>` (`{"id", "status", "data"}`).
enum Answers {
    static func result(id: JSONValue, op: String, value: CharacteristicValue?) -> JSONValue {
        // Every `set` and `get` answers here. Room for the fourth key from the start: a literal
        // of three grew its table for `value` (the encoder sorts the keys: the text is the same).
        var object = [String: JSONValue](minimumCapacity: 4)
        object["id"] = id
        object["op"] = .string(op)
        object["status"] = .string("ok")
        if let value { object["value"] = ValueCodec.json(value) }
        return .object(object)
    }

    static func error(id: JSONValue, op: String?, _ failure: GatewayFailure) -> JSONValue {
        var object: [String: JSONValue] = [
            "id": id, "status": .string("error"),
            "code": .string(failure.code.rawValue), "message": .string(failure.message),
        ]
        if let op { object["op"] = .string(op) }
        if let hap = failure.hapStatus { object["hap"] = .int(Int64(hap)) }
        return .object(object)
    }

    /// An outcome in the words of `result` and `$result`.
    static func answer(id: JSONValue, op: String, _ outcome: GatewayOutcome) -> JSONValue {
        switch outcome {
        case .success(.value(let value)): return Self.result(id: id, op: op, value: value)
        case .success(.parts(let parts)):
            var results: [String: [String: JSONValue]] = [:]
            var allOK = true
            for part in parts {
                let entry: JSONValue
                switch part.outcome {
                case .success(let value): entry = Self.result(id: .null, op: op, value: value)
                case .failure(let failure):
                    allOK = false
                    entry = Self.error(id: .null, op: op, failure)
                }
                var fields = entry.objectValue ?? [:]
                fields["id"] = nil
                fields["op"] = nil
                results[part.service, default: [:]][part.characteristic] = .object(fields)
            }
            return .object([
                "id": id, "op": .string(op), "status": allOK ? "ok" : "error",
                "results": .object(results.mapValues { .object($0) }),
            ])
        case .success(.data(let data)): return response(id: id, .success(data))
        case .failure(let failure): return Self.error(id: id, op: op, failure)
        }
    }

    /// An operation's answer on `response/<op>`: `data`, or the failure's code and message.
    static func response(id: JSONValue, _ outcome: Result<JSONValue, GatewayFailure>) -> JSONValue {
        switch outcome {
        case .success(let data): .object(["id": id, "status": .string("ok"), "data": data])
        case .failure(let failure):
            .object([
                "id": id, "status": .string("error"), "code": .string(failure.code.rawValue),
                "message": .string(failure.message),
            ])
        }
    }
}
