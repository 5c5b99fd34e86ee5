public import HomeModel

// `scope.rate-limits`: how often, and by how much, a characteristic's `state` may change on the
// broker. A chatty sensor (a power meter reporting ten times a second, a temperature that
// flickers by a hundredth) otherwise fills the broker and every subscriber with messages nobody
// reads. Read here (config file and `scope/set` alike), resolved by `ScopeFilter`, applied by
// `RateLimiter` in the gateway's `update`.

/// One entry of `scope.rate-limits`: which characteristics it selects (each selector given must
/// match; none selects every characteristic) and what it allows them.
public struct RateLimit: Sendable, Hashable, Codable {
    /// Characteristic types by catalog name, HAP name or UUID.
    public var characteristicTypes: [String]?
    /// Accessory names, slugs or ids, as `scope.accessories`.
    public var accessories: [String]?
    /// Topic filters (`+`, `#`) matched against the characteristic's topic, base included.
    public var topics: [String]?
    /// `state` at most once per this many seconds; the latest value when the window closes.
    public var minInterval: Double?
    /// A number's `state` only when it moved at least this far from the one on the broker.
    public var minChange: Double?

    public init(
        characteristicTypes: [String]? = nil, accessories: [String]? = nil, topics: [String]? = nil,
        minInterval: Double? = nil, minChange: Double? = nil
    ) {
        (self.characteristicTypes, self.accessories, self.topics) = (characteristicTypes, accessories, topics)
        (self.minInterval, self.minChange) = (minInterval, minChange)
    }

    enum CodingKeys: String, CodingKey {
        case characteristicTypes = "characteristic-types"
        case accessories, topics
        case minInterval = "min-interval"
        case minChange = "min-change"
    }

    /// The longest `min-interval`: a day. A longer one is almost certainly a unit mistake.
    public static let longestInterval = 86_400.0

    /// The list under `key` (`rate-limits`), read strictly from the config file or a `scope/set`:
    /// every problem names its entry and key (`scope.rate-limits[1].min-interval`).
    static func readList<Node, Failure>(_ key: String, in scope: StrictReader<Node, Failure>) throws(Failure)
        -> [RateLimit]?
    {
        guard let items = try scope.list(key) else { return nil }
        var out: [RateLimit] = []
        for (path, node) in items {
            let entry = try scope.reader(for: node, path: path)
            var limit = RateLimit()
            limit.characteristicTypes = try entry.strings("characteristic-types", single: true)
            limit.accessories = try entry.strings("accessories", single: true)
            limit.topics = try entry.strings("topics", single: true)
            limit.minInterval = try duration("min-interval", in: entry)
            limit.minChange = try entry.positive("min-change")
            guard limit.minInterval != nil || limit.minChange != nil else {
                throw entry.error(nil, .missingKey, "needs min-interval, min-change or both")
            }
            for pattern in limit.topics ?? [] where !Self.isFilter(pattern) {
                throw entry.error(
                    "topics", "'\(pattern)' is not a topic filter: levels split by /, + for one level, # last")
            }
            try entry.finish()
            out.append(limit)
        }
        return out
    }

    /// Seconds, as a number (`30`, `0.5`) or with a unit (`500ms`, `30s`, `5m`, `1h`).
    static func duration<Node, Failure>(_ key: String, in entry: StrictReader<Node, Failure>) throws(Failure)
        -> Double?
    {
        guard let node = entry.node(key) else { return nil }
        let problem = "expected a duration: seconds (30) or a number with ms, s, m or h (500ms, 30s, 5m)"
        let seconds: Double
        if let number = node.strictNumber {
            seconds = number
        } else if let text = node.strictText, let parsed = parseDuration(text) {
            seconds = parsed
        } else {
            throw entry.error(key, "\(problem), got \(node.strictKindName)")
        }
        guard seconds.isFinite, seconds > 0, seconds <= longestInterval else {
            throw entry.error(key, .outOfRange, "must be more than 0 and at most a day (86400 s), got \(seconds) s")
        }
        return seconds
    }

    static func parseDuration(_ text: String) -> Double? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        for (unit, scale) in [("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)] where trimmed.hasSuffix(unit) {
            let digits = trimmed.dropLast(unit.count).trimmingCharacters(in: .whitespaces)
            // "5ms" ends in "s" too: only a number before the unit counts.
            guard let value = Double(digits), !digits.hasPrefix("+") else { continue }
            return value * scale
        }
        return nil
    }

    /// `a/+/b`, `a/#`: no empty filter, `#` only as the last level, wildcards alone in a level.
    static func isFilter(_ pattern: String) -> Bool {
        let levels = pattern.split(separator: "/", omittingEmptySubsequences: false)
        guard !pattern.isEmpty else { return false }
        for (index, level) in levels.enumerated() {
            if level == "#" { return index == levels.count - 1 }
            if level != "+", level.contains(where: { $0 == "+" || $0 == "#" }) { return false }
        }
        return true
    }
}

/// What one characteristic is allowed, resolved from the first entry that selects it.
public struct CharacteristicRateLimit: Sendable, Hashable {
    public var minInterval: Duration?
    public var minChange: Double?

    public init(minInterval: Duration?, minChange: Double?) {
        (self.minInterval, self.minChange) = (minInterval, minChange)
    }
}

/// An entry of `scope.rate-limits` with its type names resolved against the catalog once.
struct ResolvedRateLimit: Sendable {
    var types: Set<String>?
    var accessories: Set<String>?
    var topics: [String]?
    var limit: CharacteristicRateLimit

    /// Each entry's types resolved (an unknown one is an error naming its entry's key).
    static func resolve(_ list: [RateLimit], file: String) throws(ConfigError) -> [ResolvedRateLimit] {
        var out: [ResolvedRateLimit] = []
        for (index, entry) in list.enumerated() {
            var types: Set<String>?
            if let names = entry.characteristicTypes {
                var uuids = Set<String>()
                for name in names {
                    guard let uuid = ScopeFilter.characteristicUUID(name) else {
                        throw ConfigError(
                            file: file, key: "scope.rate-limits[\(index)].characteristic-types",
                            message: "unknown type '\(name)'")
                    }
                    uuids.insert(uuid)
                }
                types = uuids
            }
            out.append(
                ResolvedRateLimit(
                    types: types, accessories: entry.accessories.map { Set($0.map(ScopeFilter.fold)) },
                    topics: entry.topics,
                    limit: CharacteristicRateLimit(
                        minInterval: entry.minInterval.map { .milliseconds(Int64(($0 * 1000).rounded())) },
                        minChange: entry.minChange)))
        }
        return out
    }

    func selects(type: String, accessoryKeys: [String], topic: String) -> Bool {
        if let types, !types.contains(type) { return false }
        if let accessories, !accessoryKeys.contains(where: accessories.contains) { return false }
        if let topics, !topics.contains(where: { TopicMatch.matches(filter: $0, topic: topic) }) { return false }
        return true
    }
}

extension ScopeFilter {
    /// The limit on a characteristic's `state`, from the first `scope.rate-limits` entry that
    /// selects it; nil for none, and always for a button's press (an event: each one counts).
    public func rateLimit(
        of characteristic: TopicTree.CharacteristicNode, in accessory: TopicTree.AccessoryNode
    ) -> CharacteristicRateLimit? {
        guard !rateLimits.isEmpty, !characteristic.isEvent else { return nil }
        let keys = [
            Self.fold(accessory.displayName), Self.fold(accessory.accessory.name), Self.fold(accessory.id),
            Slug.make(accessory.displayName),
        ]
        let type = characteristic.characteristic.type
        return rateLimits.first { $0.selects(type: type, accessoryKeys: keys, topic: characteristic.topic) }?.limit
    }

    /// Every limited characteristic of `tree`; empty (and nothing looked at) without entries.
    public func rateLimits(of tree: TopicTree) -> [CharacteristicAddress: CharacteristicRateLimit] {
        guard !rateLimits.isEmpty else { return [:] }
        var out: [CharacteristicAddress: CharacteristicRateLimit] = [:]
        for accessory in tree.accessories {
            for service in accessory.services {
                for c in service.characteristics {
                    if let limit = rateLimit(of: c, in: accessory) { out[c.address] = limit }
                }
            }
        }
        return out
    }
}
