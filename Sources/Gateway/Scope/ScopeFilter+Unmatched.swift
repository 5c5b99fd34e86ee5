public import HomeModel

/// Scope entries that match nothing in the home: almost always a typo, or a list YAML split at
/// a comma (`[Kilgo Devices, Inc.]` is two names), which would otherwise deny nothing or allow
/// nothing without a word. `run` and `check-config` warn about each.
extension ScopeFilter {
    /// One line per entry that matches nothing, naming its key: `scope.manufacturers.deny:
    /// 'Inc.' matches no accessory`.
    public func unmatchedEntries(accessories: [Accessory], home: Home) -> [String] {
        var manufacturers = Set<String>(), accessoryKeys = Set<String>(), roomKeys = Set<String>()
        var serviceTypes = Set<String>(), characteristicTypes = Set<String>()
        for accessory in accessories {
            manufacturers.insert(Self.fold(accessory.manufacturer))
            let displayName = home.displayName(accessory: accessory)
            accessoryKeys.formUnion([
                Self.fold(displayName), Self.fold(accessory.name), Self.fold(accessory.id), Slug.make(displayName),
            ])
            for service in accessory.services {
                serviceTypes.insert(service.type)
                for characteristic in service.characteristics { characteristicTypes.insert(characteristic.type) }
            }
        }
        for room in home.allRooms {
            roomKeys.formUnion([Self.fold(room.name), Self.fold(room.id), Slug.make(room.name)])
        }

        var out: [String] = []
        func check(_ list: ScopeList, _ key: String, what: String, matches: (String) -> Bool) {
            for (which, names) in [("allow", list.allow ?? []), ("deny", list.deny)] {
                for name in names where !matches(name) {
                    out.append("scope.\(key).\(which): '\(name)' matches no \(what)")
                }
            }
        }
        check(config.manufacturers, "manufacturers", what: "accessory's manufacturer") {
            manufacturers.contains(Self.fold($0))
        }
        check(config.accessories, "accessories", what: "accessory") {
            accessoryKeys.contains(Self.fold($0)) || accessoryKeys.contains($0)
        }
        check(config.rooms, "rooms", what: "room") { roomKeys.contains(Self.fold($0)) || roomKeys.contains($0) }
        check(config.serviceTypes, "service-types", what: "service of the home") { name in
            let uuid =
                Catalog.serviceType(named: name)?.uuid ?? Catalog.serviceType(uuid: name)?.uuid ?? name.uppercased()
            return serviceTypes.contains(uuid)
        }
        check(config.characteristicTypes, "characteristic-types", what: "characteristic of the home") { name in
            let uuid =
                Catalog.characteristicType(named: name)?.uuid ?? Catalog.characteristicType(uuid: name)?.uuid
                ?? name.uppercased()
            return characteristicTypes.contains(uuid)
        }
        for (index, entry) in (config.rateLimits ?? []).enumerated() {
            let key = "scope.rate-limits[\(index)]"
            for name in entry.characteristicTypes ?? [] {
                let uuid = Self.characteristicUUID(name) ?? name.uppercased()
                if !characteristicTypes.contains(uuid) {
                    out.append("\(key).characteristic-types: '\(name)' matches no characteristic of the home")
                }
            }
            for name in entry.accessories ?? [] where !accessoryKeys.contains(Self.fold(name)) {
                out.append("\(key).accessories: '\(name)' matches no accessory")
            }
        }
        // Topic patterns are checked against topics, which the names above do not give.
        for name in config.readOnly where !name.contains("/") && !accessoryKeys.contains(Self.fold(name)) {
            out.append("scope.read-only: '\(name)' matches no accessory")
        }
        return out
    }
}
