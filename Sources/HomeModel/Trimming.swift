import Foundation

extension String {
    /// The text without leading and trailing whitespace and newlines, as
    /// `trimmingCharacters(in: .whitespacesAndNewlines)` gives it; text that starts and ends
    /// with a visible ASCII character (every payload of a well-behaved client) is returned
    /// without asking Foundation, which builds a character set and an NSString each time.
    public func trimmingWhitespace() -> String {
        let utf8 = self.utf8
        if let first = utf8.first, let last = utf8.last, Self.isVisibleASCII(first), Self.isVisibleASCII(last) {
            return self
        }
        return trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private static func isVisibleASCII(_ byte: UInt8) -> Bool { byte > 0x20 && byte < 0x7F }
}
