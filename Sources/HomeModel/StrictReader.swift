// The one strict reader of keyed documents: the gateway's config file, the simulator's accessory
// files (YAML) and the fields of MQTT requests (JSON). Every complaint names the key path
// (`services[0].characteristics.brightness`), and a key nobody reads is an error that names
// what is allowed, so a misspelt setting is never silently ignored.
public import Foundation
public import Yams

/// A node of a document the reader can read: a YAML node or a JSON value. Each format says
/// what its scalars mean; the reader does the rest the same way for both.
public protocol StrictNode {
    /// A mapping's entries in document order (a key that is not text is nil); nil otherwise.
    var strictEntries: [(key: String?, value: Self)]? { get }
    var strictItems: [Self]? { get }
    /// `null`, `~` or an empty value: read as if the key were absent.
    var strictIsNull: Bool { get }
    /// A single value as text (YAML: any scalar; JSON: a string).
    var strictText: String? { get }
    var strictNumber: Double? { get }
    var strictBool: Bool? { get }
    /// What the node is, for messages: `a list`, `a mapping`, `'text'`.
    var strictKindName: String { get }
}

/// Reads one mapping of a document. Not shared across tasks: made, read and finished in one
/// place. `Failure` is the error of the caller's domain, made from a code, a key path and a
/// message by `failure`. Inlinable, so that each reader (the simulator's YAML, the config, MQTT
/// requests' JSON) gets code specialised for its node and error types: unspecialised, a tenth
/// of loading 10,000 accessory files went to looking up generic metadata.
public final class StrictReader<Node: StrictNode, Failure: Error> {
    public typealias MakeFailure = @Sendable (_ code: ErrorCode, _ keyPath: String?, _ message: String) -> Failure

    /// Where this mapping is in the document (`broker.tls`), empty at the top.
    public let path: String
    /// The mapping's entries in document order.
    public let entries: [(key: String, node: Node)]
    @usableFromInline let failure: MakeFailure
    /// Keys asked for, present or not, in the order asked: `finish` names them as the allowed ones.
    @usableFromInline var asked: [String] = []
    /// Which of `entries` were read, by position: a mapping holds a few keys, and a set of
    /// them hashed each key twice more for every file of a large home.
    @usableFromInline var used: [Bool]

    @inlinable public init(_ node: Node?, path: String = "", failure: @escaping MakeFailure) throws(Failure) {
        self.path = path
        self.failure = failure
        guard let node else {
            entries = []
            used = []
            return
        }
        guard let mapping = node.strictEntries else {
            throw failure(
                .invalidValue, path.isEmpty ? nil : path,
                "expected a mapping of keys to values, got \(node.strictKindName)")
        }
        var entries: [(key: String, node: Node)] = []
        entries.reserveCapacity(mapping.count)
        // A duplicate is looked for among the keys before, as most mappings hold a few keys
        // (a set hashed each key of every accessory file); a large one (a request's JSON) uses
        // a set, so that its cost stays linear.
        var seen: Set<String>? = mapping.count > 16 ? Set(minimumCapacity: mapping.count) : nil
        for (key, value) in mapping {
            guard let key else { throw failure(.invalidValue, path.isEmpty ? nil : path, "keys must be text") }
            let isDuplicate: Bool
            if seen != nil {
                isDuplicate = !seen!.insert(key).inserted
            } else {
                isDuplicate = entries.contains { $0.key == key }
            }
            guard !isDuplicate else {
                throw failure(.duplicateKey, Self.join(path, key), "'\(key)' appears twice")
            }
            entries.append((key, value))
        }
        self.entries = entries
        used = Array(repeating: false, count: entries.count)
    }

    @inlinable public static func join(_ path: String, _ key: String) -> String {
        path.isEmpty ? key : "\(path).\(key)"
    }

    @inlinable public func keyPath(_ key: String) -> String { Self.join(path, key) }

    /// An error about `key` (nil: this mapping itself).
    @inlinable public func error(_ key: String?, _ code: ErrorCode, _ message: String) -> Failure {
        failure(code, key.map(keyPath) ?? (path.isEmpty ? nil : path), message)
    }

    @inlinable public func error(_ key: String?, _ message: String) -> Failure { error(key, .invalidValue, message) }

    /// Whether `key` has a non-null value; does not count as reading it.
    @inlinable public func has(_ key: String) -> Bool {
        entries.first { $0.key == key }.map { !$0.node.strictIsNull } ?? false
    }

    /// The value of `key`, nil when absent or null; marks the key as read.
    @inlinable public func node(_ key: String) -> Node? {
        if !asked.contains(key) { asked.append(key) }
        guard let index = entries.firstIndex(where: { $0.key == key }) else { return nil }
        used[index] = true
        return entries[index].node.strictIsNull ? nil : entries[index].node
    }

    @inlinable public func string(_ key: String) throws(Failure) -> String? {
        guard let node = node(key) else { return nil }
        guard let text = node.strictText else {
            throw error(key, "expected a single value, got \(node.strictKindName)")
        }
        return text
    }

    /// A value that must be there and not blank.
    @inlinable public func requiredString(_ key: String) throws(Failure) -> String {
        guard let text = try string(key), !Whitespace.isBlank(text) else {
            throw error(key, .missingKey, "'\(key)' is required")
        }
        return text
    }

    @inlinable public func double(_ key: String) throws(Failure) -> Double? {
        guard let node = node(key) else { return nil }
        guard let value = node.strictNumber, value.isFinite else {
            throw error(key, "expected a number, got \(node.strictKindName)")
        }
        return value
    }

    @inlinable public func int(_ key: String) throws(Failure) -> Int? {
        guard let node = node(key) else { return nil }
        guard let value = node.strictNumber, value.rounded() == value, let whole = Int(exactly: value) else {
            throw error(key, "expected a whole number, got \(node.strictKindName)")
        }
        return whole
    }

    @inlinable public func nonNegative(_ key: String) throws(Failure) -> Double? {
        guard let value = try double(key) else { return nil }
        guard value >= 0 else { throw error(key, .outOfRange, "must not be negative, got \(value)") }
        return value
    }

    @inlinable public func positive(_ key: String) throws(Failure) -> Double? {
        guard let value = try double(key) else { return nil }
        guard value > 0 else { throw error(key, .outOfRange, "must be greater than 0, got \(value)") }
        return value
    }

    @inlinable public func bool(_ key: String) throws(Failure) -> Bool? {
        guard let node = node(key) else { return nil }
        guard let value = node.strictBool else {
            throw error(key, "expected true or false, got \(node.strictKindName)")
        }
        return value
    }

    /// The mapping under `key`, read strictly in its turn.
    @inlinable public func reader(_ key: String) throws(Failure) -> StrictReader? {
        guard let node = node(key) else { return nil }
        return try StrictReader(node, path: keyPath(key), failure: failure)
    }

    /// A mapping found elsewhere (a list element), read with this reader's errors.
    @inlinable public func reader(for node: Node, path: String) throws(Failure) -> StrictReader {
        try StrictReader(node, path: path, failure: failure)
    }

    /// A list; each element comes with its own path (`services[2]`).
    @inlinable public func list(_ key: String) throws(Failure) -> [(path: String, node: Node)]? {
        guard let node = node(key) else { return nil }
        guard let items = node.strictItems else { throw error(key, "expected a list, got \(node.strictKindName)") }
        // By index, the key's path made once: through `enumerated()`, each node was copied twice
        // more (a YAML node's copy retains each of its parts).
        let path = keyPath(key)
        var out: [(path: String, node: Node)] = []
        out.reserveCapacity(items.count)
        for index in items.indices { out.append(("\(path)[\(index)]", items[index])) }
        return out
    }

    /// A list of single values; with `single`, one value alone is read as a list of one.
    @inlinable public func strings(_ key: String, single: Bool = false) throws(Failure) -> [String]? {
        guard let node = node(key) else { return nil }
        if single, let text = node.strictText { return [text] }
        guard let items = node.strictItems else {
            throw error(key, "expected a list of single values, got \(node.strictKindName)")
        }
        var out: [String] = []
        for (index, item) in items.enumerated() {
            guard let text = item.strictText else {
                throw failure(
                    .invalidValue, "\(keyPath(key))[\(index)]", "expected a single value, got \(item.strictKindName)")
            }
            out.append(text)
        }
        return out
    }

    /// Rejects keys outside `allowed` before any is read.
    @inlinable public func allowOnly(_ allowed: [String]) throws(Failure) {
        for (key, _) in entries where !allowed.contains(key) {
            throw unknown(key, allowed: allowed)
        }
    }

    /// Throws for the first key nobody read, naming the keys that were asked for.
    @inlinable public func finish() throws(Failure) {
        for (index, entry) in entries.enumerated() where !used[index] {
            throw unknown(entry.key, allowed: asked)
        }
    }

    @usableFromInline func unknown(_ key: String, allowed: [String]) -> Failure {
        let names = allowed.isEmpty ? "none" : allowed.joined(separator: ", ")
        return error(key, .unknownKey, "unknown key; allowed here: \(names)")
    }
}

extension Yams.Node {
    /// The document in `yaml`, its scalars left as the text they are written as (nil when the
    /// text holds no document). Yams' default resolver would tag each scalar (bool, int, null…)
    /// by regular expressions compiled through ICU on first use — code and data this reader
    /// never needs, because each `strict…` reading below says itself what a scalar means.
    public static func compose(yaml: String) throws -> Node? { try Yams.compose(yaml: yaml, .basic) }
}

extension Yams.Node: StrictNode {
    public var strictEntries: [(key: String?, value: Node)]? {
        mapping.map { $0.map { (key: $0.key.scalar?.string, value: $0.value) } }
    }

    public var strictItems: [Node]? { sequence.map(Array.init) }

    /// Nothing, `~` or `null` written plainly; a quoted `"null"` is text.
    public var strictIsNull: Bool {
        guard case .scalar(let scalar) = self, scalar.style == .plain || scalar.style == .any else { return false }
        return ["", "~", "null", "Null", "NULL"].contains(scalar.string)
    }

    public var strictText: String? { scalar?.string }

    public var strictNumber: Double? {
        scalar.flatMap { Double(Whitespace.trimmed($0.string)) }
    }

    public var strictBool: Bool? {
        switch scalar.map({ Whitespace.trimmed($0.string).lowercased() }) {
        case "true", "yes", "on": true
        case "false", "no", "off": false
        default: nil
        }
    }

    public var strictKindName: String {
        switch self {
        case .scalar(let scalar): "'\(scalar.string)'"
        case .mapping: "a mapping"
        case .sequence: "a list"
        }
    }
}

extension JSONValue: StrictNode {
    public var strictEntries: [(key: String?, value: JSONValue)]? {
        guard case .object(let object) = self else { return nil }
        return object.keys.sorted().map { (key: $0, value: object[$0]!) }
    }

    public var strictItems: [JSONValue]? {
        guard case .array(let items) = self else { return nil }
        return items
    }

    public var strictIsNull: Bool { self == .null }
    public var strictText: String? { stringValue }
    public var strictNumber: Double? { doubleValue }

    public var strictBool: Bool? {
        guard case .bool(let flag) = self else { return nil }
        return flag
    }

    public var strictKindName: String { kindName }
}
