/// A problem in a configuration file: names the file and the key, for people and scripts.
public struct ConfigError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of problem, for scripts and tests; the message says it in words.
    public enum Code: String, Sendable, Hashable {
        /// No file at the path (or a directory on the way is missing).
        case notFound = "not-found"
        case permissionDenied = "permission-denied"
        case isDirectory = "is-a-directory"
        /// Nothing but white space in it (`/dev/null`, a file truncated by accident).
        case empty
        /// Cannot be read for another reason (an I/O error, not UTF-8 text).
        case unreadable
        case invalidYAML = "invalid-yaml"
        case unknownKey = "unknown-key"
        /// A key whose value is wrong: its type, its range, a name that does not resolve.
        case invalidValue = "invalid-value"
    }

    public var code: Code
    public var file: String
    /// Dotted path of the offending key (`scope.manufacturers.allow[2]`), or nil for the file itself.
    public var key: String?
    public var message: String

    public init(file: String, key: String?, message: String, code: Code = .invalidValue) {
        self.code = code
        self.file = file
        self.key = key
        // A URL quoted in any message shows no password (`broker.url`, a value echoed back).
        self.message = MaskedURL.maskingPasswords(in: message)
    }

    public var description: String {
        if let key { return "\(file): \(key): \(message)" }
        return "\(file): \(message)"
    }
}
