import HomeModel
import Yams

/// A YAML mapping with the path it was found at, so every complaint can name its key.
struct YAMLMap {
    let pairs: [(key: String, value: Node)]
    let path: String
    let file: String

    init(_ node: Node, path: String, file: String) throws(SimulatorError) {
        self.path = path
        self.file = file
        guard let mapping = node.mapping else {
            throw SimulatorError(file: file, key: path.isEmpty ? nil : path, code: .invalidValue,
                                 message: "expected a mapping (key: value lines), got \(YAMLMap.kind(node))")
        }
        var pairs: [(key: String, value: Node)] = []
        var seen = Set<String>()
        for (k, v) in mapping {
            guard let key = k.scalar?.string else {
                throw SimulatorError(file: file, key: path.isEmpty ? nil : path, code: .invalidValue, message: "keys must be plain words")
            }
            guard seen.insert(key).inserted else {
                throw SimulatorError(file: file, key: YAMLMap.join(path, key), code: .duplicateKey, message: "'\(key)' appears twice")
            }
            pairs.append((key, v))
        }
        self.pairs = pairs
    }

    static func join(_ path: String, _ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }
    static func kind(_ node: Node) -> String {
        switch node {
        case .scalar(let s): "'\(s.string)'"
        case .mapping: "a mapping"
        case .sequence: "a list"
        }
    }

    func keyPath(_ key: String) -> String { Self.join(path, key) }

    func error(_ key: String?, _ code: ErrorCode, _ message: String) -> SimulatorError {
        SimulatorError(file: file, key: key.map(keyPath) ?? (path.isEmpty ? nil : path), code: code, message: message)
    }

    /// Rejects keys nobody reads: a misspelt `manufactuer:` must not pass silently.
    func allowOnly(_ allowed: [String]) throws(SimulatorError) {
        for (key, _) in pairs where !allowed.contains(key) {
            throw error(key, .unknownKey, "unknown key '\(key)'; allowed here: \(allowed.joined(separator: ", "))")
        }
    }

    func node(_ key: String) -> Node? {
        guard let node = pairs.first(where: { $0.key == key })?.value else { return nil }
        // `key:` with nothing after it, `~` or `null`: as if the key were absent.
        if case .scalar(let s) = node, s.style == .plain || s.style == .any, node.null != nil { return nil }
        return node
    }

    func has(_ key: String) -> Bool { node(key) != nil }

    func string(_ key: String) throws(SimulatorError) -> String? {
        guard let node = node(key) else { return nil }
        guard let s = node.scalar?.string else {
            throw error(key, .invalidValue, "expected a single value, got \(Self.kind(node))")
        }
        return s
    }

    func requiredString(_ key: String) throws(SimulatorError) -> String {
        guard let s = try string(key), !s.trimmingCharacters(in: .whitespaces).isEmpty else {
            throw error(key, .missingKey, "'\(key)' is required")
        }
        return s
    }

    func double(_ key: String) throws(SimulatorError) -> Double? {
        guard let s = try string(key) else { return nil }
        guard let d = Double(s.trimmingCharacters(in: .whitespaces)), d.isFinite else {
            throw error(key, .invalidValue, "expected a number, got '\(s)'")
        }
        return d
    }

    func nonNegative(_ key: String) throws(SimulatorError) -> Double? {
        guard let d = try double(key) else { return nil }
        guard d >= 0 else { throw error(key, .outOfRange, "must not be negative, got \(d)") }
        return d
    }

    func positive(_ key: String) throws(SimulatorError) -> Double? {
        guard let d = try double(key) else { return nil }
        guard d > 0 else { throw error(key, .outOfRange, "must be greater than 0, got \(d)") }
        return d
    }

    func int(_ key: String) throws(SimulatorError) -> Int? {
        guard let s = try string(key) else { return nil }
        guard let i = Int(s.trimmingCharacters(in: .whitespaces)) else {
            throw error(key, .invalidValue, "expected an integer, got '\(s)'")
        }
        return i
    }

    func bool(_ key: String) throws(SimulatorError) -> Bool? {
        guard let s = try string(key) else { return nil }
        switch s.lowercased() {
        case "true", "yes", "on": return true
        case "false", "no", "off": return false
        default: throw error(key, .invalidValue, "expected true or false, got '\(s)'")
        }
    }

    func map(_ key: String) throws(SimulatorError) -> YAMLMap? {
        guard let node = node(key) else { return nil }
        return try YAMLMap(node, path: keyPath(key), file: file)
    }

    /// A list; each element comes with its own path (`services[2]`).
    func list(_ key: String) throws(SimulatorError) -> [(path: String, node: Node)]? {
        guard let node = node(key) else { return nil }
        guard let sequence = node.sequence else {
            throw error(key, .invalidValue, "expected a list (lines starting with '-'), got \(Self.kind(node))")
        }
        return sequence.enumerated().map { ("\(keyPath(key))[\($0.offset)]", $0.element) }
    }

    func stringList(_ key: String) throws(SimulatorError) -> [String]? {
        guard let items = try list(key) else { return nil }
        var result: [String] = []
        for (path, node) in items {
            guard let s = node.scalar?.string else {
                throw SimulatorError(file: file, key: path, code: .invalidValue, message: "expected a single value, got \(Self.kind(node))")
            }
            result.append(s)
        }
        return result
    }
}
