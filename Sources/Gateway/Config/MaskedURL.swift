import Foundation

/// URLs as they may be shown in logs and errors: the password of `mqtt://user:password@host`
/// replaced by `***`. Works on text, not on a parsed URL, because a URL is shown most often when
/// it does not parse.
public enum MaskedURL {
    public static let mask = "***"

    /// `url` with its password masked. The user information is what comes before the last `@`
    /// (after `scheme://`, when there is one): a password may hold an unencoded `@`, `/` or `:`,
    /// and a malformed URL must be masked as surely as a good one.
    public static func masked(_ url: String) -> String {
        guard let password = passwordRange(in: url) else { return url }
        return url.replacingCharacters(in: password, with: mask)
    }

    /// The password of `url` as written (not percent-decoded), or nil when it has none.
    public static func password(in url: String) -> String? {
        passwordRange(in: url).map { String(url[$0]) }
    }

    /// `text` with the password of every `scheme://user:password@…` in it masked; a URL ends at
    /// white space or a quote.
    public static func maskingPasswords(in text: String) -> String {
        guard text.contains("://") && text.contains("@") else { return text }
        var out = ""
        var rest = text[...]
        while let separator = rest.range(of: "://") {
            // Back to the start of the scheme, forward to the end of the URL.
            var start = separator.lowerBound
            while start > rest.startIndex, isURLCharacter(rest[rest.index(before: start)]) {
                start = rest.index(before: start)
            }
            var end = separator.upperBound
            while end < rest.endIndex, isURLCharacter(rest[end]) { end = rest.index(after: end) }
            out += rest[rest.startIndex..<start]
            out += masked(String(rest[start..<end]))
            rest = rest[end...]
        }
        return out + rest
    }

    /// `text` with every occurrence of the password of `url` masked, percent-decoded or not: for
    /// messages from elsewhere that may quote the URL in a form `maskingPasswords` cannot find.
    public static func scrubbing(_ text: String, passwordOf url: String) -> String {
        var out = maskingPasswords(in: text)
        guard let raw = password(in: url), !raw.isEmpty else { return out }
        for form in Set([raw, raw.removingPercentEncoding ?? raw]) where !form.isEmpty {
            out = out.replacingOccurrences(of: form, with: mask)
        }
        return out
    }

    private static func isURLCharacter(_ c: Character) -> Bool {
        !c.isWhitespace && c != "'" && c != "\"" && c != "`"
    }

    private static func passwordRange(in url: String) -> Range<String.Index>? {
        let afterScheme = url.range(of: "://")?.upperBound ?? url.startIndex
        guard let at = url[afterScheme...].lastIndex(of: "@"),
            let colon = url[afterScheme..<at].firstIndex(of: ":")
        else { return nil }
        let password = url.index(after: colon)..<at
        return password.isEmpty ? nil : password
    }
}
