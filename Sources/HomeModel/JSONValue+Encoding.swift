// A JSONValue as JSON text: sorted keys, unescaped slashes, compact or pretty, and the string
// escaping that writers streaming a large document share.

extension JSONValue {
    /// JSON text with sorted keys and unescaped slashes. Non-finite doubles, which JSON cannot
    /// hold, are written as `null`.
    public func encoded(pretty: Bool = false) -> String {
        String(decoding: encodedUTF8(pretty: pretty), as: UTF8.self)
    }

    /// The bytes of `encoded(pretty:)`, written straight into the payload an MQTT message
    /// carries (no String in between).
    public func encodedUTF8(pretty: Bool = false) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64)
        write(to: &out, pretty: pretty, indent: 0, wholeDoublesAsIntegers: false)
        return out
    }

    /// Compact JSON like `encoded()`, but with a whole-number double written without its
    /// fraction (`21`, not `21.0`; `-0`), the way Foundation's `JSONEncoder` writes it. HAP
    /// request bodies use this, the form Foundation-based controllers send (`21`);
    /// MQTT payloads keep `encoded()`, where `21.0` tells a float from an integer.
    public func encoded(wholeDoublesAsIntegers: Bool) -> String {
        var out: [UInt8] = []
        write(to: &out, pretty: false, indent: 0, wholeDoublesAsIntegers: wholeDoublesAsIntegers)
        return String(decoding: out, as: UTF8.self)
    }

    // MARK: Writing

    private func write(to out: inout [UInt8], pretty: Bool, indent: Int, wholeDoublesAsIntegers: Bool) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: b ? "true".utf8 : "false".utf8)
        case .int(let i): Self.appendDecimal(i.magnitude, negative: i < 0, to: &out)
        case .uint(let u): Self.appendDecimal(u, negative: false, to: &out)
        case .double(let d):
            guard d.isFinite else { out.append(contentsOf: "null".utf8); return }
            let text = "\(d)"
            if wholeDoublesAsIntegers && text.hasSuffix(".0") {
                out.append(contentsOf: text.utf8.dropLast(2))
            } else {
                out.append(contentsOf: text.utf8)
            }
        case .string(let s): Self.appendString(s, to: &out)
        case .array(let a):
            if a.isEmpty { out.append(contentsOf: "[]".utf8); return }
            out.append(UInt8(ascii: "["))
            for (n, element) in a.enumerated() {
                if n > 0 { out.append(UInt8(ascii: ",")) }
                if pretty { Self.newline(&out, indent + 1) }
                element.write(
                    to: &out, pretty: pretty, indent: indent + 1, wholeDoublesAsIntegers: wholeDoublesAsIntegers)
            }
            if pretty { Self.newline(&out, indent) }
            out.append(UInt8(ascii: "]"))
        case .object(let o):
            if o.isEmpty { out.append(contentsOf: "{}".utf8); return }
            out.append(UInt8(ascii: "{"))
            for (n, key) in o.keys.sorted().enumerated() {
                if n > 0 { out.append(UInt8(ascii: ",")) }
                if pretty { Self.newline(&out, indent + 1) }
                Self.appendString(key, to: &out)
                out.append(contentsOf: pretty ? ": ".utf8 : ":".utf8)
                o[key]?.write(
                    to: &out, pretty: pretty, indent: indent + 1, wholeDoublesAsIntegers: wholeDoublesAsIntegers)
            }
            if pretty { Self.newline(&out, indent) }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// An integer's decimal digits, without the String that `String(i)` would make.
    private static func appendDecimal(_ magnitude: UInt64, negative: Bool, to out: inout [UInt8]) {
        if negative { out.append(UInt8(ascii: "-")) }
        if magnitude < 10 {
            out.append(UInt8(ascii: "0") + UInt8(magnitude))
            return
        }
        let start = out.count
        var rest = magnitude
        while rest > 0 {
            out.append(UInt8(ascii: "0") + UInt8(rest % 10))
            rest /= 10
        }
        out[start...].reverse()
    }

    private static func newline(_ out: inout [UInt8], _ indent: Int) {
        out.append(UInt8(ascii: "\n"))
        out.append(contentsOf: repeatElement(UInt8(ascii: " "), count: 2 * indent))
    }

    /// The letter of a byte's two-character escape (`\n`), if JSON writes it that way; other
    /// controls are written `\u00XX` (`escapesAsUnicode`), and every other byte as it is.
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

    /// Whether `byte` starts what is written `\u00XX`: a C0 control, DEL, or the lead byte 0xC2
    /// of a C1 control (U+0080–U+009F, `0xC2 0x80…0x9F`) when `next` continues one. JSON allows
    /// DEL and C1 raw, but a terminal takes C1's CSI (U+009B) for a command: a payload such as
    /// `discover`'s answer carries a peer's text to `mosquitto_sub`.
    private static func escapesAsUnicode(_ byte: UInt8, next: UInt8?) -> Bool {
        byte < 0x20 || byte == 0x7F || (byte == 0xC2 && next.map { (0x80...0x9F).contains($0) } == true)
    }

    /// The length in UTF-8 bytes of `s` as `appendString` writes it, quotes included.
    public static func escapedLength(_ s: String) -> Int {
        // As in `appendString`: a string that needs no escape is its own length, counted on its
        // own bytes (byte by byte through `String.UTF8View`, each was a protocol witness call).
        let plain = s.utf8.withContiguousStorageIfAvailable { bytes in
            bytes.contains(where: needsEscape) ? nil : bytes.count + 2
        }
        if let plain, let length = plain { return length }
        var length = 2
        var utf8 = s.utf8.makeIterator()
        var current = utf8.next()
        while let byte = current {
            let next = utf8.next()
            if shortEscape(byte) != nil {
                length += 2
            } else if escapesAsUnicode(byte, next: next) {
                length += 6
                // A C1 control's two bytes are one escape.
                if byte == 0xC2 {
                    current = utf8.next()
                    continue
                }
            } else {
                length += 1
            }
            current = next
        }
        return length
    }

    /// A byte that a string literal cannot hold as it is: a control, DEL, the lead byte of a C1
    /// control (and of the Latin-1 letters beside them, which the slow path tells apart), `"`, `\`.
    static func needsEscape(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == 0x7F || byte == 0xC2 || shortEscape(byte) != nil
    }

    /// Appends `s` as a JSON string literal to UTF-8 bytes, escaped as `encoded()` escapes it:
    /// for writers that stream a large document instead of building a `JSONValue` first.
    public static func appendString(_ s: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        // Most strings (topics, names, types) need no escape: appended whole, from the string's
        // own bytes (through `String.UTF8View` as a sequence, each byte was a protocol witness
        // call: a tenth of Home Assistant's discovery at start-up, perf).
        let appended = s.utf8.withContiguousStorageIfAvailable { bytes -> Bool in
            guard !bytes.contains(where: needsEscape) else {
                return false
            }
            out.append(contentsOf: bytes)
            return true
        }
        if appended == true {
            out.append(UInt8(ascii: "\""))
            return
        }
        if appended == nil, !s.utf8.contains(where: needsEscape) {
            out.append(contentsOf: s.utf8)
            out.append(UInt8(ascii: "\""))
            return
        }
        func hex(_ digit: UInt8) -> UInt8 { digit < 10 ? UInt8(ascii: "0") + digit : UInt8(ascii: "a") + digit - 10 }
        var utf8 = s.utf8.makeIterator()
        var current = utf8.next()
        while let byte = current {
            let next = utf8.next()
            if let letter = shortEscape(byte) {
                out.append(UInt8(ascii: "\\"))
                out.append(letter)
            } else if escapesAsUnicode(byte, next: next) {
                // The code point: the byte itself, or a C1 control's second byte (U+0080 + low bits).
                let point = byte == 0xC2 ? next ?? 0 : byte
                out.append(contentsOf: [
                    UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                    hex(point >> 4), hex(point & 0xF),
                ])
                if byte == 0xC2 {
                    current = utf8.next()
                    continue
                }
            } else {
                out.append(byte)
            }
            current = next
        }
        out.append(UInt8(ascii: "\""))
    }
}
