// What a JSON value is: its cases, accessors, Codable conformance and literals. Parsing is in
// JSONValue+Parsing.swift, writing JSON text in JSONValue+Encoding.swift.

/// A JSON value that keeps what JSON text says: `true` is a bool, `1` an integer, `1.0` a double.
/// Used for MQTT payloads, where a characteristic's format decides what a number means.
public enum JSONValue: Sendable, Hashable, Codable {
    case null
    case bool(Bool)
    case int(Int64)
    /// Only for integers above `Int64.max`; smaller non-negative integers are `.int`.
    case uint(UInt64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public subscript(key: String) -> JSONValue? {
        if case .object(let o) = self { return o[key] }
        return nil
    }

    public subscript(index: Int) -> JSONValue? {
        if case .array(let a) = self, a.indices.contains(index) { return a[index] }
        return nil
    }

    public var isNull: Bool { self == .null }

    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    /// The value as a signed integer, if it is an integer (or an integral double) that fits.
    public var int64Value: Int64? {
        switch self {
        case .int(let i): i
        case .uint(let u): Int64(exactly: u)
        case .double(let d): Int64(exactly: d)
        default: nil
        }
    }

    public var intValue: Int? { int64Value.flatMap { Int(exactly: $0) } }

    public var uint64Value: UInt64? {
        switch self {
        case .int(let i): UInt64(exactly: i)
        case .uint(let u): u
        case .double(let d): UInt64(exactly: d)
        default: nil
        }
    }

    /// Any number as a double.
    public var doubleValue: Double? {
        switch self {
        case .int(let i): Double(i)
        case .uint(let u): Double(u)
        case .double(let d): d
        default: nil
        }
    }

    public var arrayValue: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }

    public var objectValue: [String: JSONValue]? {
        if case .object(let o) = self { return o }
        return nil
    }

    /// A short name of the kind of value, for error messages.
    public var kindName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .int, .uint: "an integer"
        case .double: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }

    // MARK: Codable

    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null; return }
        // Bool first: Foundation's decoder refuses numbers as Bool and `true` as a number.
        if let b = try? c.decode(Bool.self) { self = .bool(b); return }
        if let s = try? c.decode(String.self) { self = .string(s); return }
        if let a = try? c.decode([JSONValue].self) { self = .array(a); return }
        if let o = try? c.decode([String: JSONValue].self) { self = .object(o); return }
        // Numbers: a double that is integral and fits is taken as an integer, since the decoder
        // does not tell `1` from `1.0` reliably across platforms.
        if let i = try? c.decode(Int64.self) { self = .int(i); return }
        if let u = try? c.decode(UInt64.self) { self = .uint(u); return }
        if let d = try? c.decode(Double.self) { self = .double(d); return }
        throw DecodingError.dataCorruptedError(in: c, debugDescription: "not a JSON value")
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case .bool(let b): try c.encode(b)
        case .int(let i): try c.encode(i)
        case .uint(let u): try c.encode(u)
        case .double(let d): if d.isFinite { try c.encode(d) } else { try c.encodeNil() }
        case .string(let s): try c.encode(s)
        case .array(let a): try c.encode(a)
        case .object(let o): try c.encode(o)
        }
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByFloatLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}
