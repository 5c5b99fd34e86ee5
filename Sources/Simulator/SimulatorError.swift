public import HomeModel

/// An error in an accessory file: which file, where in it, and what is wrong.
///
/// Loading is all-or-nothing, so the first error stops the whole load and nothing starts
/// half-loaded; the description points at the file and key to fix.
public struct SimulatorError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The file as it was given (relative paths stay relative so messages match what people typed).
    public var file: String
    /// A key path inside the file (`services[0].characteristics.brightness`), nil for whole-file
    /// problems such as a YAML syntax error.
    public var key: String?
    /// A machine code: `yaml-syntax`, `unknown-key`, `missing-key`, `unknown-type`, `invalid-value`,
    /// `out-of-range`, `duplicate-uuid`, `duplicate-name`, `duplicate-id`, `invalid-dump`, `io`, ….
    public var code: ErrorCode
    public var message: String

    public init(file: String, key: String? = nil, code: ErrorCode, message: String) {
        self.file = file
        self.key = key
        self.code = code
        self.message = message
    }

    public var description: String {
        if let key { return "\(file): \(key): \(message)" }
        return "\(file): \(message)"
    }
}
