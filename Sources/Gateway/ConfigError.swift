/// A problem in a configuration file: names the file and the key, for people and scripts.
public struct ConfigError: Error, Sendable, Hashable, CustomStringConvertible {
    public var file: String
    /// Dotted path of the offending key (`scope.manufacturers.allow[2]`), or nil for the file itself.
    public var key: String?
    public var message: String

    public init(file: String, key: String?, message: String) {
        self.file = file
        self.key = key
        self.message = message
    }

    public var description: String {
        if let key { return "\(file): \(key): \(message)" }
        return "\(file): \(message)"
    }
}
