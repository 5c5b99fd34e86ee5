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

    /// Parses JSON text (RFC 8259; one value, surrounding whitespace allowed).
    public init(parsing bytes: [UInt8]) throws(ModelError) {
        var parser = JSONParser(bytes: bytes)
        self = try parser.parseDocument()
    }

    public init(parsing text: String) throws(ModelError) {
        try self.init(parsing: Array(text.utf8))
    }

    /// JSON text with sorted keys and unescaped slashes. Non-finite doubles, which JSON cannot
    /// hold, are written as `null`.
    public func encoded(pretty: Bool = false) -> String {
        var out = ""
        write(to: &out, pretty: pretty, indent: 0, wholeDoublesAsIntegers: false)
        return out
    }

    /// Compact JSON like `encoded()`, but with a whole-number double written without its
    /// fraction (`21`, not `21.0`; `-0`), the way Foundation's `JSONEncoder` writes it. HAP
    /// request bodies use this so accessories get the bytes they always got from the controller;
    /// MQTT payloads keep `encoded()`, where `21.0` tells a float from an integer.
    public func encoded(wholeDoublesAsIntegers: Bool) -> String {
        var out = ""
        write(to: &out, pretty: false, indent: 0, wholeDoublesAsIntegers: wholeDoublesAsIntegers)
        return out
    }

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

    // MARK: Writing

    private func write(to out: inout String, pretty: Bool, indent: Int, wholeDoublesAsIntegers: Bool) {
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .int(let i): out += String(i)
        case .uint(let u): out += String(u)
        case .double(let d):
            guard d.isFinite else { out += "null"; return }
            let text = "\(d)"
            out += wholeDoublesAsIntegers && text.hasSuffix(".0") ? String(text.dropLast(2)) : text
        case .string(let s): Self.writeString(s, to: &out)
        case .array(let a):
            if a.isEmpty { out += "[]"; return }
            out += "["
            for (n, element) in a.enumerated() {
                if n > 0 { out += "," }
                if pretty { Self.newline(&out, indent + 1) }
                element.write(to: &out, pretty: pretty, indent: indent + 1, wholeDoublesAsIntegers: wholeDoublesAsIntegers)
            }
            if pretty { Self.newline(&out, indent) }
            out += "]"
        case .object(let o):
            if o.isEmpty { out += "{}"; return }
            out += "{"
            for (n, key) in o.keys.sorted().enumerated() {
                if n > 0 { out += "," }
                if pretty { Self.newline(&out, indent + 1) }
                Self.writeString(key, to: &out)
                out += pretty ? ": " : ":"
                o[key]?.write(to: &out, pretty: pretty, indent: indent + 1, wholeDoublesAsIntegers: wholeDoublesAsIntegers)
            }
            if pretty { Self.newline(&out, indent) }
            out += "}"
        }
    }

    private static func newline(_ out: inout String, _ indent: Int) {
        out += "\n"
        out += String(repeating: "  ", count: indent)
    }

    /// The letter of a byte's two-character escape (`\n`), if JSON writes it that way; other
    /// bytes below 0x20 are written `\u00XX`, and every other byte as it is (the bytes of
    /// multi-byte UTF-8 sequences are all 0x80 or more).
    private static func shortEscape(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"): byte
        case 0x0A: UInt8(ascii: "n")
        case 0x0D: UInt8(ascii: "r")
        case 0x09: UInt8(ascii: "t")
        case 0x08: UInt8(ascii: "b")
        case 0x0C: UInt8(ascii: "f")
        default: nil
        }
    }

    /// The length in UTF-8 bytes of `s` as `appendString` writes it, quotes included.
    public static func escapedLength(_ s: String) -> Int {
        var length = 2
        for byte in s.utf8 {
            length += shortEscape(byte) != nil ? 2 : byte < 0x20 ? 6 : 1
        }
        return length
    }

    /// Appends `s` as a JSON string literal to UTF-8 bytes, escaped as `encoded()` escapes it:
    /// for writers that stream a large document instead of building a `JSONValue` first.
    public static func appendString(_ s: String, to out: inout [UInt8]) {
        let hex = Array("0123456789abcdef".utf8)
        out.append(UInt8(ascii: "\""))
        for byte in s.utf8 {
            if let letter = shortEscape(byte) {
                out.append(UInt8(ascii: "\\"))
                out.append(letter)
            } else if byte < 0x20 {
                out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                                        hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
            } else {
                out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    private static func writeString(_ s: String, to out: inout String) {
        // Most strings (topics, names, types) need no escape: append them whole.
        if !s.utf8.contains(where: { $0 < 0x20 || shortEscape($0) != nil }) {
            out += "\""
            out += s
            out += "\""
            return
        }
        var bytes: [UInt8] = []
        appendString(s, to: &bytes)
        out += String(decoding: bytes, as: UTF8.self)
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

/// A strict RFC 8259 parser. Errors name the byte offset; nesting is bounded so hostile input
/// cannot exhaust the stack.
private struct JSONParser {
    let bytes: [UInt8]
    var index = 0
    static let maxDepth = 256

    init(bytes: [UInt8]) { self.bytes = bytes }

    mutating func parseDocument() throws(ModelError) -> JSONValue {
        skipWhitespace()
        if index == bytes.count { throw ModelError(code: .invalidJSON, message: "invalid JSON: empty input") }
        let value = try parseValue(depth: 0)
        skipWhitespace()
        if index != bytes.count { throw fail("unexpected text after the value") }
        return value
    }

    func fail(_ what: String) -> ModelError {
        ModelError(code: .invalidJSON, message: "invalid JSON at byte \(index): \(what)")
    }

    mutating func skipWhitespace() {
        while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
    }

    mutating func parseValue(depth: Int) throws(ModelError) -> JSONValue {
        guard depth < Self.maxDepth else { throw fail("nested deeper than \(Self.maxDepth) levels") }
        guard index < bytes.count else { throw fail("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject(depth: depth)
        case UInt8(ascii: "["): return try parseArray(depth: depth)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw fail("unexpected character '\(Character(Unicode.Scalar(bytes[index])))'")
        }
    }

    mutating func literal(_ word: String) throws(ModelError) {
        let w = Array(word.utf8)
        guard index + w.count <= bytes.count, Array(bytes[index..<index + w.count]) == w else {
            throw fail("expected '\(word)'")
        }
        index += w.count
    }

    mutating func parseObject(depth: Int) throws(ModelError) -> JSONValue {
        index += 1
        var object: [String: JSONValue] = [:]
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") { index += 1; return .object(object) }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw fail("expected a key string") }
            let key = try parseString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw fail("expected ':'") }
            index += 1
            skipWhitespace()
            object[key] = try parseValue(depth: depth + 1)
            skipWhitespace()
            guard index < bytes.count else { throw fail("unterminated object") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "}") { index += 1; return .object(object) }
            throw fail("expected ',' or '}'")
        }
    }

    mutating func parseArray(depth: Int) throws(ModelError) -> JSONValue {
        index += 1
        var array: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") { index += 1; return .array(array) }
        while true {
            skipWhitespace()
            array.append(try parseValue(depth: depth + 1))
            skipWhitespace()
            guard index < bytes.count else { throw fail("unterminated array") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "]") { index += 1; return .array(array) }
            throw fail("expected ',' or ']'")
        }
    }

    mutating func parseHex4() throws(ModelError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw fail("short \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let b = bytes[index]
            let d: UInt8
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = b - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = b - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = b - UInt8(ascii: "A") + 10
            default: throw fail("bad hex digit in \\u escape")
            }
            v = v << 4 | UInt32(d)
            index += 1
        }
        return v
    }

    mutating func parseString() throws(ModelError) -> String {
        index += 1
        var raw: [UInt8] = []
        while true {
            guard index < bytes.count else { throw fail("unterminated string") }
            let b = bytes[index]
            switch b {
            case UInt8(ascii: "\""):
                index += 1
                guard let s = String(validating: raw, as: UTF8.self) else { throw fail("string is not valid UTF-8") }
                return s
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.count else { throw fail("unterminated escape") }
                let e = bytes[index]
                index += 1
                switch e {
                case UInt8(ascii: "\""): raw.append(0x22)
                case UInt8(ascii: "\\"): raw.append(0x5C)
                case UInt8(ascii: "/"): raw.append(0x2F)
                case UInt8(ascii: "b"): raw.append(0x08)
                case UInt8(ascii: "f"): raw.append(0x0C)
                case UInt8(ascii: "n"): raw.append(0x0A)
                case UInt8(ascii: "r"): raw.append(0x0D)
                case UInt8(ascii: "t"): raw.append(0x09)
                case UInt8(ascii: "u"):
                    var code = try parseHex4()
                    if (0xD800...0xDBFF).contains(code) {
                        guard index + 2 <= bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                            throw fail("lone high surrogate")
                        }
                        index += 2
                        let low = try parseHex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw fail("bad low surrogate") }
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(code) {
                        throw fail("lone low surrogate")
                    }
                    guard let scalar = Unicode.Scalar(code) else { throw fail("bad \\u escape") }
                    raw.append(contentsOf: Array(String(Character(scalar)).utf8))
                default: throw fail("unknown escape '\\\(Character(Unicode.Scalar(e)))'")
                }
            default:
                if b < 0x20 { throw fail("control character in string") }
                raw.append(b)
                index += 1
            }
        }
    }

    mutating func parseNumber() throws(ModelError) -> JSONValue {
        let start = index
        var isInteger = true
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        func digits(_ p: inout JSONParser) -> Int {
            let s = p.index
            while p.index < p.bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(p.bytes[p.index]) { p.index += 1 }
            return p.index - s
        }
        let intStart = index
        let intDigits = digits(&self)
        guard intDigits > 0 else { throw fail("expected digits") }
        if intDigits > 1, bytes[intStart] == UInt8(ascii: "0") { throw fail("leading zero in number") }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            guard digits(&self) > 0 else { throw fail("expected digits after '.'") }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard digits(&self) > 0 else { throw fail("expected digits in exponent") }
        }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        if isInteger {
            if let i = Int64(text) { return .int(i) }
            if let u = UInt64(text) { return .uint(u) }
        }
        guard let d = Double(text), d.isFinite else { throw fail("number out of range: \(text)") }
        return .double(d)
    }
}
