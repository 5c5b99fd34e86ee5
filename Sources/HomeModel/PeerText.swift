extension String {
    /// The text with every control character written as a Swift escape, `\u{1B}`: the C0
    /// characters (NUL, ESC, line breaks and tab included), DEL and the C1 characters
    /// U+0080–U+009F. For text that came from the network — an mDNS instance name or TXT value,
    /// a HAP accessory's name or pairing id — and is shown in a terminal or a log: raw, such text
    /// could move the cursor, clear the screen, set the window title (OSC) or forge a log line.
    /// Everything else is kept as it is, non-ASCII letters included. A backslash is not
    /// doubled: `\u{1B}` sent as six characters reads the same as an escaped ESC, which is
    /// harmless, and a log's paths and messages keep their backslashes.
    public var escapingControlCharacters: String {
        guard unicodeScalars.contains(where: Self.isControl) else { return self }
        var out = ""
        out.reserveCapacity(utf8.count + 8)
        for scalar in unicodeScalars {
            if Self.isControl(scalar) {
                let hex = String(scalar.value, radix: 16, uppercase: true)
                out += "\\u{\(hex.count == 1 ? "0" : "")\(hex)}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (scalar.value >= 0x7F && scalar.value <= 0x9F)
    }
}
