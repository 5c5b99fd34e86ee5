public import Foundation
public import HomeModel

/// The retained topics this gateway has published on one broker under one base topic: the only
/// topics it ever clears. Other clients' retained topics under the same base (`home/` is a name
/// many people use for their own) are never touched, whatever their shape.
///
/// Characteristics are kept as paths under their accessory's topic (`lightbulb/on`): each stands
/// for its `meta` and `state`, so a large home's record is one short string per characteristic.
public struct OwnedTopics: Sendable, Equatable {
    /// Whole topics: accessories' `$info`, `$availability` and `$state`, the gateway's `status`
    /// and `tree` (and its pages), discovery configs outside the base.
    public var topics: Set<String> = []
    /// Accessory topic → its characteristics' paths relative to it.
    public var accessories: [String: Set<String>] = [:]

    public init() {}

    public var isEmpty: Bool { topics.isEmpty && accessories.isEmpty }

    /// Whether `topic` is one of ours: a whole topic, or a characteristic's `meta`/`state`.
    public func contains(_ topic: String) -> Bool {
        if topics.contains(topic) { return true }
        guard let slash = topic.lastIndex(of: "/") else { return false }
        let kind = topic[topic.index(after: slash)...]
        guard kind == "state" || kind == "meta" else { return false }
        return containsCharacteristic(String(topic[..<slash]))
    }

    /// Whether `path` (a characteristic's topic, without `/state`) is one of ours.
    func containsCharacteristic(_ path: String) -> Bool {
        // An accessory topic is `<base>/<room>/<accessory>`; its characteristics are two more levels.
        var end = path.endIndex
        for _ in 0..<2 {
            guard let slash = path[..<end].lastIndex(of: "/") else { return false }
            end = slash
        }
        guard let paths = accessories[String(path[..<end])] else { return false }
        return paths.contains(String(path[path.index(after: end)...]))
    }

    public mutating func formUnion(_ other: OwnedTopics) {
        topics.formUnion(other.topics)
        for (accessory, paths) in other.accessories {
            // An accessory's set is usually shared with others of its model (`Shapes`): taking
            // `other`'s, or keeping ours when it has them all, copies nothing.
            guard let mine = accessories[accessory] else {
                accessories[accessory] = paths
                continue
            }
            if !paths.isSubset(of: mine) { accessories[accessory] = mine.union(paths) }
        }
    }

    /// Accessories of one model have the same characteristic paths: a builder of a record keeps
    /// one set for all of them, so that a home of 10,000 lamps of a few models holds a few sets
    /// of paths, not 10,000 (about 2 KB each for 25 characteristics).
    struct Shapes {
        private var known: Set<Set<String>> = []

        /// `paths`, or the equal set met before.
        mutating func shared(_ paths: Set<String>) -> Set<String> { known.insert(paths).memberAfterInsert }
    }

    /// Whether every topic of `other` is in this record already.
    public func covers(_ other: OwnedTopics) -> Bool {
        guard other.topics.isSubset(of: topics) else { return false }
        return other.accessories.allSatisfy { accessory, paths in
            accessories[accessory].map { paths.isSubset(of: $0) } ?? paths.isEmpty
        }
    }

    /// The topics of this record that `current` no longer has, each a retained topic to clear
    /// (a characteristic's `meta` and `state` both; clearing one that holds nothing changes nothing).
    public func topicsToClear(keeping current: OwnedTopics) -> [String] {
        var out = topics.subtracting(current.topics).sorted()
        for (accessory, paths) in accessories.sorted(by: { $0.key < $1.key }) {
            let kept = current.accessories[accessory] ?? []
            for path in paths.subtracting(kept).sorted() {
                out.append("\(accessory)/\(path)/meta")
                out.append("\(accessory)/\(path)/state")
            }
        }
        return out
    }

    // MARK: The retained tree document as a record

    /// What a retained `$gateway/tree` document (or one of its pages) says was published: every
    /// accessory object (one with `topic` and `services`) with its documents and characteristics.
    /// Used when the state directory has no record (lost, or written by an earlier version).
    /// `documents` are the topic levels every accessory has (`$info`, `$availability`, …).
    public mutating func addTreeDocument(_ document: JSONValue, documents: [String]) {
        switch document {
        case .array(let items):
            for item in items { addTreeDocument(item, documents: documents) }
        case .object(let object):
            if case .string(let topic)? = object["topic"], case .array(let services)? = object["services"] {
                addAccessory(topic: topic, services: services, documents: documents)
                return
            }
            // The tree (and each of its pages) names its base: the run that published it held
            // that base's `$gateway/status` too, retained (`online`, or `offline` as its will).
            // Without this, a gateway whose state directory was lost called its own status
            // another client's topic at the next start.
            if case .string(let base)? = object["base"], case .string? = object["home"] {
                topics.insert("\(base)/$gateway/status")
            }
            for (_, value) in object { addTreeDocument(value, documents: documents) }
        default:
            break
        }
    }

    private mutating func addAccessory(topic: String, services: [JSONValue], documents: [String]) {
        for document in documents { topics.insert("\(topic)/\(document)") }
        var paths = accessories[topic] ?? []
        for service in services {
            guard case .array(let characteristics)? = service["characteristics"] else { continue }
            for characteristic in characteristics {
                guard let path = characteristic["topic"]?.stringValue, path.hasPrefix(topic + "/") else { continue }
                paths.insert(String(path.dropFirst(topic.count + 1)))
            }
        }
        accessories[topic] = paths
    }

    // MARK: Encoding

    /// The record as the store's JSON document, written to `stream` as it is made (keys
    /// sorted, as `JSONValue` writes them): at 10,000 accessories the document as a `JSONValue`
    /// and its text were 24 MB, the start-up's peak.
    func write(
        to stream: inout AtomicFileWriter.Stream, version: Int, broker: String, base: String
    ) throws(ModelError) {
        // Accessories of one model share one set of paths (`Shapes`): each set is sorted once.
        var sortedShapes: [(paths: Set<String>, sorted: [String])] = []
        func sorted(_ paths: Set<String>) -> [String] {
            if let known = sortedShapes.first(where: { $0.paths == paths }) { return known.sorted }
            let sorted = paths.sorted()
            if sortedShapes.count == 16 { sortedShapes.removeFirst() }
            sortedShapes.append((paths, sorted))
            return sorted
        }
        func list(_ strings: [String], _ stream: inout AtomicFileWriter.Stream) throws(ModelError) {
            try stream.append("[".utf8)
            for (index, string) in strings.enumerated() {
                if index > 0 { try stream.append(",".utf8) }
                try stream.appendJSONString(string)
            }
            try stream.append("]".utf8)
        }
        try stream.append(#"{"accessories":{"#.utf8)
        for (index, (id, paths)) in accessories.sorted(by: { $0.key < $1.key }).enumerated() {
            if index > 0 { try stream.append(",".utf8) }
            try stream.appendJSONString(id)
            try stream.append(":".utf8)
            try list(sorted(paths), &stream)
        }
        try stream.append(#"},"base":"#.utf8)
        try stream.appendJSONString(base)
        try stream.append(#","broker":"#.utf8)
        try stream.appendJSONString(broker)
        try stream.append(#","topics":"#.utf8)
        try list(topics.sorted(), &stream)
        try stream.append(#","version":\#(version)}"#.utf8)
    }

    init(json: JSONValue) throws(ModelError) {
        guard case .array(let topics)? = json["topics"], case .object(let accessories)? = json["accessories"] else {
            throw ModelError(
                code: .invalidJSON, message: "a record has 'topics' (a list) and 'accessories' (an object)")
        }
        for topic in topics {
            guard let topic = topic.stringValue else {
                throw ModelError(code: .invalidJSON, message: "'topics' holds strings only")
            }
            self.topics.insert(topic)
        }
        var shapes = Shapes()
        for (accessory, value) in accessories {
            guard case .array(let paths) = value, paths.allSatisfy({ $0.stringValue != nil }) else {
                throw ModelError(code: .invalidJSON, message: "'accessories.\(accessory)' is a list of strings")
            }
            self.accessories[accessory] = shapes.shared(Set(paths.compactMap(\.stringValue)))
        }
    }
}

/// Where the record of published topics is kept: `<state>/published/<broker and base>.json`, one
/// file per broker and base topic (a gateway moved to another broker and back finds its record),
/// written by the atomic writer before anything new is published, so that a crash at any moment
/// leaves a record that includes everything on the broker.
public struct OwnedTopicsStore: Sendable {
    public let directory: URL
    let broker: String
    let base: String

    /// The record of the gateway `config` describes, in its state directory.
    public init(config: GatewayConfig) {
        self.init(
            stateDirectory: URL(fileURLWithPath: config.stateDirectory), broker: config.brokerDisplay,
            base: config.baseTopic)
    }

    public init(stateDirectory: URL, broker: String, base: String) {
        directory = stateDirectory.appendingPathComponent("published")
        self.broker = broker
        self.base = base
    }

    public var file: URL {
        let digest = PayloadDigest(Array("\(broker) \(base)".utf8))
        return directory.appendingPathComponent(String(format: "%016llx.json", digest.hash))
    }

    /// The record, or nil when there is none (a first run, a lost state directory, an earlier
    /// version); an unreadable one is an error the caller logs, and is treated as none.
    public func load() throws(ModelError) -> OwnedTopics? {
        guard let data = FileManager.default.contents(atPath: file.path) else { return nil }
        let json = try JSONValue(parsing: Array(data))
        guard json["version"]?.intValue == Self.version else {
            throw ModelError(code: .invalidJSON, message: "\(file.path): not a record of version \(Self.version)")
        }
        do throws(ModelError) {
            return try OwnedTopics(json: json)
        } catch {
            throw ModelError(code: error.code, message: "\(file.path): \(error.message)")
        }
    }

    public func save(_ record: OwnedTopics) throws(ModelError) {
        try AtomicFileWriter().write(to: file) { (stream: inout AtomicFileWriter.Stream) throws(ModelError) in
            try record.write(to: &stream, version: Self.version, broker: broker, base: base)
        }
    }

    static let version = 1
}
