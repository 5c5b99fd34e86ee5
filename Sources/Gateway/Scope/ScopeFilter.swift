public import HomeModel

// Scope decisions: which accessories, services and characteristics are shown and which are
// read-only, and the MQTT topic-filter matching (`+`, `#`) that read-only entries use.

/// Decides what of the home is in scope. Built from a `ScopeConfig` whose type names have
/// been resolved against the catalog once, so that deciding is a set lookup.
public struct ScopeFilter: Sendable {
    public let config: ScopeConfig

    private struct ResolvedList: Sendable {
        var allow: Set<String>?
        var deny: Set<String>

        func admits(_ keys: [String]) -> Bool {
            if keys.contains(where: deny.contains) { return false }
            guard let allow else { return true }
            return keys.contains(where: allow.contains)
        }
    }

    private let manufacturers: ResolvedList
    private let serviceTypes: ResolvedList
    private let characteristicTypes: ResolvedList
    private let rooms: ResolvedList
    private let accessories: ResolvedList
    private let readOnlyNames: Set<String>
    private let readOnlyPatterns: [String]
    /// `scope.rate-limits`, in order: the first entry that selects a characteristic applies.
    let rateLimits: [ResolvedRateLimit]

    /// Resolves type names (catalog name, HAP name or UUID); an unknown one is an error
    /// naming its key (`scope.service-types.allow`; `key` is the mapping's own, such as
    /// `homekit.scope` for a front end's scope).
    public init(_ config: ScopeConfig, file: String = "scope", key scopeKey: String = "scope") throws(ConfigError) {
        self.config = config
        func plain(_ list: ScopeList) -> ResolvedList {
            ResolvedList(allow: list.allow.map { Set($0.map(Self.fold)) }, deny: Set(list.deny.map(Self.fold)))
        }
        func types(_ list: ScopeList, key: String, lookup: (String) -> String?) throws(ConfigError) -> ResolvedList {
            func resolve(_ names: [String], _ which: String) throws(ConfigError) -> Set<String> {
                var out = Set<String>()
                for name in names {
                    guard let uuid = lookup(name) else {
                        throw ConfigError(
                            file: file, key: "\(scopeKey).\(key).\(which)", message: "unknown type '\(name)'")
                    }
                    out.insert(uuid)
                }
                return out
            }
            var allow: Set<String>?
            if let names = list.allow { allow = try resolve(names, "allow") }
            return ResolvedList(allow: allow, deny: try resolve(list.deny, "deny"))
        }
        manufacturers = plain(config.manufacturers)
        rooms = plain(config.rooms)
        accessories = plain(config.accessories)
        serviceTypes = try types(config.serviceTypes, key: "service-types") { name in
            Catalog.serviceType(named: name)?.uuid ?? Catalog.serviceType(uuid: name)?.uuid ?? Self.customUUID(name)
        }
        characteristicTypes = try types(config.characteristicTypes, key: "characteristic-types") { name in
            Self.characteristicUUID(name)
        }
        rateLimits = try ResolvedRateLimit.resolve(config.rateLimits ?? [], file: file)
        readOnlyNames = Set(config.readOnly.filter { !$0.contains("/") }.map(Self.fold))
        readOnlyPatterns = config.readOnly.filter { $0.contains("/") }
    }

    /// A custom type may be named by its full UUID.
    private static func customUUID(_ text: String) -> String? {
        let upper = text.uppercased()
        let hex = upper.replacingOccurrences(of: "-", with: "")
        guard upper.count == 36, hex.count == 32, hex.allSatisfy(\.isHexDigit) else { return nil }
        return upper
    }

    static func fold(_ text: String) -> String { text.lowercased() }

    /// A characteristic type by catalog name, HAP name or UUID; nil when unknown.
    static func characteristicUUID(_ name: String) -> String? {
        Catalog.characteristicType(named: name)?.uuid ?? Catalog.characteristicType(uuid: name)?.uuid
            ?? customUUID(name)
    }

    public func admits(accessory: Accessory, displayName: String, room: Room) -> Bool {
        manufacturers.admits([Self.fold(accessory.manufacturer)])
            && rooms.admits([Self.fold(room.name), Self.fold(room.id), Slug.make(room.name)])
            && accessories.admits([
                Self.fold(displayName), Self.fold(accessory.name), Self.fold(accessory.id), Slug.make(displayName),
            ])
    }

    public func admits(service: AccessoryService) -> Bool {
        if config.userInteractiveOnly && !service.isUserInteractive { return false }
        return serviceTypes.admits([service.type])
    }

    public func admits(characteristic: Characteristic) -> Bool {
        if config.userInteractiveOnly && characteristic.metadata.permissions.contains(.hidden) { return false }
        return characteristicTypes.admits([characteristic.type])
    }

    /// Whether `set` is refused by the read-only list for a characteristic at `topic`. The topic
    /// is made only when a pattern asks for it: the tree's builder asks for every
    /// characteristic, and most scopes have no `read-only` entry.
    public func isReadOnly(accessory: Accessory, displayName: String, topic: @autoclosure () -> String) -> Bool {
        if !readOnlyNames.isEmpty,
            [Self.fold(displayName), Self.fold(accessory.name), Self.fold(accessory.id), Slug.make(displayName)]
                .contains(where: readOnlyNames.contains)
        {
            return true
        }
        guard !readOnlyPatterns.isEmpty else { return false }
        let topic = topic()
        return readOnlyPatterns.contains {
            TopicMatch.matches(filter: $0, topic: topic) || TopicMatch.matches(filter: $0, topic: topic + "/set")
        }
    }
}

public enum TopicMatch {
    /// MQTT topic filter matching with `+` and `#`.
    public static func matches(filter: String, topic: String) -> Bool {
        let f = filter.split(separator: "/", omittingEmptySubsequences: false)
        let t = topic.split(separator: "/", omittingEmptySubsequences: false)
        var i = 0
        while i < f.count {
            if f[i] == "#" { return true }
            guard i < t.count else { return false }
            if f[i] != "+" && f[i] != t[i] { return false }
            i += 1
        }
        return i == t.count
    }
}
