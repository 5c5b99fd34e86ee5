// A JSONValue as JSON text: sorted keys, unescaped slashes, compact or pretty, and the string
// escaping that writers streaming a large document share.

extension JSONValue {
    /// JSON text with sorted keys and unescaped slashes. Non-finite doubles, which JSON cannot
    /// hold, are written as `null`.
    public func encoded(pretty: Bool = false) -> String {
        var out = ""
        write(to: &out, pretty: pretty, indent: 0, wholeDoublesAsIntegers: false)
        return out
    }

    /// Compact JSON like `encoded()`, but with a whole-number double written without its
    /// fraction (`21`, not `21.0`; `-0`), the way Foundation's `JSONEncoder` writes it. HAP
    /// request bodies use this, the form Foundation-based controllers send (`21`);
    /// MQTT payloads keep `encoded()`, where `21.0` tells a float from an integer.
    public func encoded(wholeDoublesAsIntegers: Bool) -> String {
        var out = ""
        write(to: &out, pretty: false, indent: 0, wholeDoublesAsIntegers: wholeDoublesAsIntegers)
        return out
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
                element.write(
                    to: &out, pretty: pretty, indent: indent + 1, wholeDoublesAsIntegers: wholeDoublesAsIntegers)
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
                o[key]?.write(
                    to: &out, pretty: pretty, indent: indent + 1, wholeDoublesAsIntegers: wholeDoublesAsIntegers)
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
                out.append(contentsOf: [
                    UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                    hex[Int(byte >> 4)], hex[Int(byte & 0xF)],
                ])
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
