/// Spaces and tabs at the ends of a value, as `CharacterSet.whitespaces` names them (a tab, a
/// space separator of Unicode's Zs, or U+200B, which Foundation still counts as one), without
/// Foundation: `trimmingCharacters(in:)` goes through an `NSString` each time, and the strict
/// reader trims every number, flag and required text of every accessory file.
public enum Whitespace {
    @inlinable public static func contains(_ scalar: Unicode.Scalar) -> Bool {
        scalar == " " || scalar == "\t"
            || (scalar.value >= 0x80
                && (scalar.properties.generalCategory == .spaceSeparator || scalar.value == 0x200B))
    }

    /// `text` without the whitespace at either end.
    @inlinable public static func trimmed(_ text: String) -> Substring {
        let scalars = text.unicodeScalars
        guard let first = scalars.firstIndex(where: { !contains($0) }),
            let last = scalars.lastIndex(where: { !contains($0) })
        else { return text[text.endIndex...] }
        return Substring(scalars[first...last])
    }

    /// Whether `text` is empty or only whitespace.
    @inlinable public static func isBlank(_ text: String) -> Bool { text.unicodeScalars.allSatisfy(contains) }
}
