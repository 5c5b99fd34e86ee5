import Yams

/// Reads a YAML mapping strictly: every key must be consumed, so a misspelt key is an error
/// that names it instead of a setting silently ignored.
struct YAMLMapping {
    let file: String
    let path: String
    private var entries: [(key: String, node: Node)]
    private var used: Set<String> = []

    init(node: Node?, file: String, path: String) throws(ConfigError) {
        self.file = file
        self.path = path
        guard let node else {
            entries = []
            return
        }
        guard case .mapping(let mapping) = node else {
            throw ConfigError(file: file, key: path.isEmpty ? nil : path, message: "expected a mapping of keys to values")
        }
        var seen = Set<String>()
        var entries: [(String, Node)] = []
        for (k, v) in mapping {
            guard let key = k.string else {
                throw ConfigError(file: file, key: path.isEmpty ? nil : path, message: "keys must be strings")
            }
            if !seen.insert(key).inserted {
                throw ConfigError(file: file, key: Self.join(path, key), message: "duplicate key")
            }
            entries.append((key, v))
        }
        self.entries = entries
    }

    static func join(_ path: String, _ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    func keyPath(_ key: String) -> String { Self.join(path, key) }

    func error(_ key: String, _ message: String) -> ConfigError {
        ConfigError(file: file, key: keyPath(key), message: message)
    }

    mutating func node(_ key: String) -> Node? {
        guard let entry = entries.first(where: { $0.key == key }) else { return nil }
        used.insert(key)
        if case .scalar(let scalar) = entry.node, scalar.tag == .implicit, ["~", "null", ""].contains(scalar.string) {
            return nil
        }
        return entry.node
    }

    mutating func string(_ key: String) throws(ConfigError) -> String? {
        guard let node = node(key) else { return nil }
        guard case .scalar(let scalar) = node else { throw error(key, "expected a text value") }
        return scalar.string
    }

    mutating func double(_ key: String) throws(ConfigError) -> Double? {
        guard let text = try string(key) else { return nil }
        guard let value = Double(text), value.isFinite else { throw error(key, "expected a number, got '\(text)'") }
        return value
    }

    mutating func int(_ key: String) throws(ConfigError) -> Int? {
        guard let text = try string(key) else { return nil }
        guard let value = Int(text) else { throw error(key, "expected a whole number, got '\(text)'") }
        return value
    }

    mutating func bool(_ key: String) throws(ConfigError) -> Bool? {
        guard let text = try string(key) else { return nil }
        switch text.lowercased() {
        case "true", "yes", "on": return true
        case "false", "no", "off": return false
        default: throw error(key, "expected true or false, got '\(text)'")
        }
    }

    mutating func strings(_ key: String) throws(ConfigError) -> [String]? {
        guard let node = node(key) else { return nil }
        switch node {
        case .scalar(let scalar): return [scalar.string]
        case .sequence(let sequence):
            var out: [String] = []
            for (index, item) in sequence.enumerated() {
                guard case .scalar(let scalar) = item else {
                    throw ConfigError(file: file, key: "\(keyPath(key))[\(index)]", message: "expected a text value")
                }
                out.append(scalar.string)
            }
            return out
        default: throw error(key, "expected a list of text values")
        }
    }

    mutating func mapping(_ key: String) throws(ConfigError) -> YAMLMapping? {
        guard let node = node(key) else { return nil }
        return try YAMLMapping(node: node, file: file, path: keyPath(key))
    }

    mutating func sequence(_ key: String) throws(ConfigError) -> [Node]? {
        guard let node = node(key) else { return nil }
        guard case .sequence(let sequence) = node else { throw error(key, "expected a list") }
        return Array(sequence)
    }

    /// Throws for the first key nobody asked for.
    func finish(allowed extra: [String] = []) throws(ConfigError) {
        for entry in entries where !used.contains(entry.key) && !extra.contains(entry.key) {
            throw ConfigError(file: file, key: keyPath(entry.key), message: "unknown key", code: .unknownKey)
        }
    }
}
