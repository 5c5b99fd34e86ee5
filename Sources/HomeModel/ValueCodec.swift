import Foundation

/// Turns MQTT payloads (text or JSON) into characteristic values and back, checking them against
/// the characteristic's metadata. Rejections are `ModelError`s whose message says what is allowed;
/// nothing is clamped or rounded silently.
///
/// Codes: `read-only`, `out-of-range`, `invalid-type`, `not-a-valid-value`, `too-long`,
/// `not-a-step`, `invalid-json`, `empty`.
///
/// State text (`text(_:format:)`): `true`/`false`; integers in decimal; floats in Swift's
/// shortest round-trip form (`21.5`, `20.0` — an integral float keeps its `.0`, so a reader can
/// tell the format from the text and parsing the text gives back the same Double); strings as
/// they are; valid-value characteristics as their number; tlv8/data as base64.
///
/// A `label` (the characteristic's name in a message) is an `@autoclosure`: it is built only
/// when a value is refused. The simulator's (`accessory.service.characteristic`) cost ~5.5 k
/// instructions, and it was built on every write and change (callgrind).
public enum ValueCodec {
    /// HAP's default maximum length of a string value when the metadata gives none.
    public static let defaultMaxLength = 64

    static let trueWords: Set<String> = ["true", "1", "on", "yes"]
    static let falseWords: Set<String> = ["false", "0", "off", "no"]

    /// Parses an MQTT text payload. Surrounding whitespace is ignored except for `string`
    /// characteristics, whose payload is taken as it is.
    public static func parse(text: String, metadata: CharacteristicMetadata, label: @autoclosure () -> String)
        throws(ModelError)
        -> CharacteristicValue
    {
        if metadata.format == .string {
            return try validate(.string(text), metadata: metadata, label: label())
        }
        let word = text.trimmingWhitespace()
        if word.isEmpty {
            throw ModelError(
                code: .empty, message: "\(label()) needs a value, got an empty payload; \(allowed(metadata))")
        }
        switch metadata.format {
        case .bool:
            let lower = word.lowercased()
            if trueWords.contains(lower) { return .bool(true) }
            if falseWords.contains(lower) { return .bool(false) }
            throw ModelError(
                code: .invalidType, message: "\(label()) must be true or false (or 1/0, on/off, yes/no), got '\(word)'")
        case .uint8, .uint16, .uint32, .uint64, .int, .float:
            if let number = validValue(named: word, metadata: metadata) {
                return try validate(.int(number), metadata: metadata, label: label())
            }
            if let i = Int64(word) { return try validate(.int(i), metadata: metadata, label: label()) }
            if let u = UInt64(word) { return try validate(.uint(u), metadata: metadata, label: label()) }
            if let d = Double(word), d.isFinite,
                word.allSatisfy({ $0.isASCII && ($0.isNumber || "+-.eE".contains($0)) })
            {
                return try validate(.float(d), metadata: metadata, label: label())
            }
            if !metadata.validValues.isEmpty {
                throw ModelError(
                    code: .notAValidValue,
                    message: "\(label()) must be one of \(validValuesList(metadata)), got '\(word)'")
            }
            throw ModelError(
                code: .invalidType,
                message: "\(label()) must be \(metadata.format.isInteger ? "an integer" : "a number"), got '\(word)'")
        case .tlv8, .data:
            guard let data = Data(base64Encoded: word) else {
                throw ModelError(
                    code: .invalidType,
                    message:
                        "\(label()) must be base64-encoded \(metadata.format.rawValue) data, got '\(word.prefix(40))'")
            }
            return try validate(.data(Array(data)), metadata: metadata, label: label())
        case .string:
            return try validate(.string(text), metadata: metadata, label: label())
        }
    }

    /// Parses a JSON value (a `set` request's `value`). Strings are read like text payloads, so
    /// `"open"` and `"on"` work as well as `0` and `true`.
    public static func parse(json: JSONValue, metadata: CharacteristicMetadata, label: @autoclosure () -> String)
        throws(ModelError)
        -> CharacteristicValue
    {
        switch json {
        case .null:
            throw ModelError(code: .empty, message: "\(label()) needs a value, got null; \(allowed(metadata))")
        case .string(let s):
            return try parse(text: s, metadata: metadata, label: label())
        case .bool(let b):
            guard metadata.format == .bool else {
                throw ModelError(code: .invalidType, message: "\(label()) must be \(kindWanted(metadata)), got \(b)")
            }
            return .bool(b)
        case .int(let i):
            return try validate(.int(i), metadata: metadata, label: label())
        case .uint(let u):
            return try validate(.uint(u), metadata: metadata, label: label())
        case .double(let d):
            return try validate(.float(d), metadata: metadata, label: label())
        case .array, .object:
            throw ModelError(
                code: .invalidType, message: "\(label()) must be \(kindWanted(metadata)), got \(json.kindName)")
        }
    }

    /// Checks a value against the metadata and returns it in the format's own case (`.bool` for
    /// bool, `.uint` for unsigned formats, `.int` for int, `.float`, `.string`, `.data`).
    public static func validate(
        _ value: CharacteristicValue, metadata: CharacteristicMetadata, label: @autoclosure () -> String
    )
        throws(ModelError) -> CharacteristicValue
    {
        switch metadata.format {
        case .bool:
            switch value {
            case .bool: return value
            case .int(0), .uint(0), .float(0): return .bool(false)
            case .int(1), .uint(1), .float(1): return .bool(true)
            default:
                throw ModelError(
                    code: .invalidType, message: "\(label()) must be true or false, got \(describe(value))")
            }
        case .uint8, .uint16, .uint32, .uint64, .int:
            return try validateInteger(value, metadata: metadata, label: label())
        case .float:
            guard case let d? = numeric(value), !isBool(value) else {
                throw ModelError(code: .invalidType, message: "\(label()) must be a number, got \(describe(value))")
            }
            guard d.isFinite else {
                throw ModelError(
                    code: .invalidType, message: "\(label()) must be a finite number, got \(describe(value))")
            }
            try checkNumber(d, metadata: metadata, label: label())
            return .float(d)
        case .string:
            guard case .string(let s) = value else {
                throw ModelError(code: .invalidType, message: "\(label()) must be a string, got \(describe(value))")
            }
            let limit = metadata.maxLength ?? defaultMaxLength
            if s.count > limit {
                throw ModelError(
                    code: .tooLong, message: "\(label()) must be at most \(limit) characters, got \(s.count)")
            }
            return value
        case .tlv8, .data:
            guard case .data(let bytes) = value else {
                throw ModelError(
                    code: .invalidType,
                    message:
                        "\(label()) must be base64-encoded \(metadata.format.rawValue) data, got \(describe(value))")
            }
            if let limit = metadata.maxDataLength, bytes.count > limit {
                throw ModelError(
                    code: .tooLong, message: "\(label()) must be at most \(limit) bytes, got \(bytes.count)")
            }
            return value
        }
    }

    /// The metadata a value is checked against: the accessory's, with the standard type's min and
    /// max where the accessory gives none (a bulb whose colour temperature has no bounds in its
    /// `/accessories` still takes only HomeKit's 140…500 mireds).
    public static func withStandardBounds(_ metadata: CharacteristicMetadata, type: String) -> CharacteristicMetadata {
        guard metadata.format.isNumeric, metadata.minValue == nil || metadata.maxValue == nil,
            let standard = Catalog.characteristicType(uuid: type)?.metadata
        else { return metadata }
        var out = metadata
        if out.minValue == nil { out.minValue = standard.minValue }
        if out.maxValue == nil { out.maxValue = standard.maxValue }
        return out
    }

    public static func checkWritable(_ metadata: CharacteristicMetadata, label: @autoclosure () -> String)
        throws(ModelError)
    {
        guard metadata.permissions.contains(.write) else {
            let perms = metadata.permissions.nameList
            throw ModelError(
                code: .readOnly,
                message:
                    "\(label()) is read-only (permissions: \(perms.isEmpty ? "none" : perms.joined(separator: ", ")))")
        }
    }

    /// The MQTT `state` payload for a value.
    public static func text(_ value: CharacteristicValue, format: CharacteristicFormat) -> String {
        switch value {
        case .bool(let b):
            return format.isNumeric ? (b ? "1" : "0") : (b ? "true" : "false")
        case .int(let i):
            return format == .bool ? (i != 0 ? "true" : "false") : String(i)
        case .uint(let u):
            return format == .bool ? (u != 0 ? "true" : "false") : String(u)
        case .float(let d):
            if format == .bool { return d != 0 ? "true" : "false" }
            if format.isInteger, let i = Int64(exactly: d) { return String(i) }
            return "\(d)"
        case .string(let s):
            return s
        case .data(let bytes):
            return Data(bytes).base64EncodedString()
        }
    }

    /// Whether two different values certainly have different `text`s, without making them: of
    /// one kind, a flag, a string, bytes, or an integer of a format other than `bool` (whose
    /// texts are only `true` and `false`). Floats round to the step, and values of two kinds
    /// can meet (`1` and `1.0`): those need their texts compared.
    public static func textsDiffer(_ a: CharacteristicValue, _ b: CharacteristicValue, format: CharacteristicFormat)
        -> Bool
    {
        guard a != b else { return false }
        switch (a, b) {
        case (.bool, .bool), (.string, .string), (.data, .data): return true
        case (.int, .int), (.uint, .uint): return format != .bool
        default: return false
        }
    }

    /// The MQTT `state` payload for a value at its characteristic's precision: a float is rounded
    /// to the characteristic's step (`120.5999984741211` with step 0.1 is `120.6`), or without a
    /// step to the 7 significant digits a float32, HAP's float, carries.
    public static func text(_ value: CharacteristicValue, metadata: CharacteristicMetadata) -> String {
        text(rounded(value, metadata: metadata), format: metadata.format)
    }

    /// The value as JSON: bools, numbers, strings; data as a base64 string.
    public static func json(_ value: CharacteristicValue) -> JSONValue {
        switch value {
        case .bool(let b): .bool(b)
        case .int(let i): .int(i)
        case .uint(let u): Int64(exactly: u).map(JSONValue.int) ?? .uint(u)
        case .float(let d): .double(d)
        case .string(let s): .string(s)
        case .data(let bytes): .string(Data(bytes).base64EncodedString())
        }
    }

    /// The `meta` topic's document: `uuid`, `type` (kebab name), `format`, `unit`, `min`, `max`,
    /// `step`, `valid-values` ([{value, name}] by value), `max-length` (strings: the effective
    /// limit), `max-data-length`, `permissions` (long names). Absent facts are left out.
    public static func metaJSON(type: String, typeName: String, metadata: CharacteristicMetadata) -> JSONValue {
        var o: [String: JSONValue] = [
            "uuid": .string(type),
            "type": .string(typeName),
            "format": .string(metadata.format.rawValue),
            "permissions": .array(metadata.permissions.nameList.map(JSONValue.string)),
        ]
        if let unit = metadata.unit { o["unit"] = .string(unit) }
        if let v = metadata.minValue { o["min"] = number(v) }
        if let v = metadata.maxValue { o["max"] = number(v) }
        if let v = metadata.minStep { o["step"] = number(v) }
        if !metadata.validValues.isEmpty {
            o["valid-values"] = .array(
                metadata.validValues.sorted { $0.key < $1.key }.map {
                    .object(["value": .int($0.key), "name": .string($0.value)])
                })
        }
        if metadata.format == .string { o["max-length"] = .int(Int64(metadata.maxLength ?? defaultMaxLength)) }
        if let v = metadata.maxDataLength { o["max-data-length"] = .int(Int64(v)) }
        return .object(o)
    }

    /// The kebab name of a value of a valid-values characteristic (`open` for 0), if it has one.
    public static func valueName(_ value: CharacteristicValue, metadata: CharacteristicMetadata) -> String? {
        guard let d = value.doubleValue, let i = Int64(exactly: d) else { return nil }
        return metadata.validValues[i]
    }

    // MARK: Helpers

    static func validValue(named word: String, metadata: CharacteristicMetadata) -> Int64? {
        let lower = word.lowercased()
        return metadata.validValues.first { $0.value == lower }?.key
    }

    static func validValuesList(_ metadata: CharacteristicMetadata) -> String {
        metadata.validValues.sorted { $0.key < $1.key }.map { "\($0.value) (\($0.key))" }.joined(separator: ", ")
    }

    static func isBool(_ value: CharacteristicValue) -> Bool {
        if case .bool = value { return true }
        return false
    }

    static func numeric(_ value: CharacteristicValue) -> Double? {
        switch value {
        case .int(let i): Double(i)
        case .uint(let u): Double(u)
        case .float(let d): d
        default: nil
        }
    }

    /// A number for messages and `meta`: integral values without `.0`.
    static func number(_ d: Double) -> JSONValue {
        if let i = Int64(exactly: d) { return .int(i) }
        return .double(d)
    }

    static func format(_ d: Double) -> String {
        if let i = Int64(exactly: d) { return String(i) }
        return "\(d)"
    }

    static func describe(_ value: CharacteristicValue) -> String {
        switch value {
        case .bool(let b): "\(b)"
        case .int(let i): String(i)
        case .uint(let u): String(u)
        case .float(let d): "\(d)"
        case .string(let s): "'\(s.count > 40 ? s.prefix(40) + "…" : s)'"
        case .data(let b): "\(b.count) bytes of data"
        }
    }

    static func kindWanted(_ metadata: CharacteristicMetadata) -> String {
        switch metadata.format {
        case .bool: "true or false"
        case .uint8, .uint16, .uint32, .uint64, .int:
            metadata.validValues.isEmpty ? "an integer" : "one of \(validValuesList(metadata))"
        case .float: "a number"
        case .string: "a string"
        case .tlv8, .data: "base64-encoded data"
        }
    }

    static func allowed(_ metadata: CharacteristicMetadata) -> String {
        "expected \(kindWanted(metadata))"
    }

}
