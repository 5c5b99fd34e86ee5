// The list of homes, after HMHomeManager: homes added, renamed and removed, the primary home, each
// home's base topic, and accessories (or whole sources) moved between homes. Any view may make
// these changes; each is told to the homes it concerns and, as a `HomesChange`, to every home.

extension HomeDatabase {
    /// The home `key` names: its id, its name in any case, or its base topic (`gatewayBase` for
    /// the home served on the gateway's own).
    public func home(named key: String, gatewayBase: String) throws(ModelError) -> Home {
        let homes = self.homes
        let wanted = Home.nameKey(key)
        if let home = homes.first(where: { $0.id == key }) ?? homes.first(where: { Home.nameKey($0.name) == wanted })
            ?? homes.first(where: { ($0.baseTopic ?? gatewayBase) == key })
        {
            return home
        }
        throw ModelError(
            code: .unknownHome,
            message: "no home '\(key)'; homes: \(homes.map { "\($0.name) (\($0.id))" }.joined(separator: ", "))")
    }

    /// A new home on `baseTopic`, or on `<gatewayBase>-<name>` when nil.
    @discardableResult
    /// - Parameter reserved: other topic prefixes the gateway publishes under (Home Assistant's
    ///   discovery prefix, Homie's domain), which no home's topics may overlap either.
    public func addHome(named name: String, baseTopic: String?, gatewayBase: String, reserved: [String] = [])
        throws(ModelError) -> Home
    {
        try shared.update { document throws(ModelError) in
            let name = try Self.checkedName(name, what: "home")
            if let other = document.homes.first(where: { Home.nameKey($0.name) == Home.nameKey(name) }) {
                throw ModelError(code: .duplicateName, message: "a home named '\(other.name)' already exists")
            }
            let topics = Self.baseTopics(document, gatewayBase: gatewayBase) + reserved.map { ("", $0) }
            let topic: String
            if let baseTopic {
                topic = try Self.checkedBaseTopic(baseTopic, among: topics)
            } else {
                topic = Self.derivedBaseTopic(name: name, gatewayBase: gatewayBase, among: topics)
            }
            let home = Home(name: name, baseTopic: topic)
            document.homes.append(home)
            return (home, [(nil, .homes(.added(home)))])
        }
    }

    public func renameHome(id: String, to newName: String) throws(ModelError) {
        try shared.update { document throws(ModelError) in
            let name = try Self.checkedName(newName, what: "home")
            guard let index = document.homes.firstIndex(where: { $0.id == id }) else { throw Self.unknownHome(id) }
            if let other = document.homes.first(where: { Home.nameKey($0.name) == Home.nameKey(name) }), other.id != id
            {
                throw ModelError(code: .duplicateName, message: "a home named '\(other.name)' already exists")
            }
            let old = document.homes[index].name
            guard old != name else { return ((), []) }
            document.homes[index].name = name
            // The home itself hears `homeRenamed`, as it always did; the others hear of the list.
            let change = HomesChange.renamed(document.homes[index], oldName: old)
            let others: [Addressed] = document.homes.filter { $0.id != id }.map { ($0.id, .homes(change)) }
            return ((), [(id, .homeRenamed(name))] + others)
        }
    }

    /// A new base topic for a home that has its own (the home on the gateway's base topic keeps
    /// the gateway's). The home's topics move: its gateway clears the old ones.
    public func setBaseTopic(homeID: String, to topic: String, gatewayBase: String, reserved: [String] = [])
        throws(ModelError)
    {
        try shared.update { document throws(ModelError) in
            guard let index = document.homes.firstIndex(where: { $0.id == homeID }) else {
                throw Self.unknownHome(homeID)
            }
            let home = document.homes[index]
            guard let old = home.baseTopic else {
                throw ModelError(
                    code: .protectedHome,
                    message:
                        "\(home.name) is served on the gateway's base topic '\(gatewayBase)'; change mqtt.base-topic in the config to move it"
                )
            }
            let others =
                Self.baseTopics(document, gatewayBase: gatewayBase).filter { $0.homeID != homeID }
                + reserved.map { ("", $0) }
            let topic = try Self.checkedBaseTopic(topic, among: others)
            guard topic != old else { return ((), []) }
            document.homes[index].baseTopic = topic
            return ((), [(nil, .homes(.baseTopicChanged(document.homes[index], old: old)))])
        }
    }

    /// Makes a home primary: where new accessories go unless a source is assigned elsewhere. No
    /// home's topics change.
    public func setPrimary(homeID: String) throws(ModelError) {
        try shared.update { document throws(ModelError) in
            guard let home = document.homes.first(where: { $0.id == homeID }) else { throw Self.unknownHome(homeID) }
            let previous = document.homes[document.primaryIndex]
            guard previous.id != homeID else { return ((), []) }
            document.primaryHomeID = homeID
            return ((), [(nil, .homes(.primaryChanged(home, previous: previous)))])
        }
    }

    /// Removes a home. One that holds accessories is refused unless `movingTo` names the home
    /// they (and its source assignments) go to. The primary home and the home on the gateway's
    /// base topic cannot be removed.
    public func removeHome(id: String, movingTo target: String?) throws(ModelError) {
        try shared.update { document throws(ModelError) in
            guard let index = document.homes.firstIndex(where: { $0.id == id }) else { throw Self.unknownHome(id) }
            let home = document.homes[index]
            if home.baseTopic == nil {
                throw ModelError(
                    code: .protectedHome,
                    message: "\(home.name) is served on the gateway's base topic and cannot be removed")
            }
            if document.primaryHomeID == id {
                throw ModelError(
                    code: .protectedHome,
                    message: "\(home.name) is the primary home; make another home primary first")
            }
            let held = Set(home.knownAccessoryIDs).union(home.assignments.keys).union(home.removedAccessoryIDs)
            var events: [Addressed] = []
            if !held.isEmpty || !home.sourcePrefixes.isEmpty {
                guard let target else {
                    throw ModelError(
                        code: .homeNotEmpty,
                        message:
                            "\(home.name) holds \(held.count) accessories; move them first, or name the home they go to"
                    )
                }
                guard let to = document.homes.firstIndex(where: { $0.id == target }), to != index else {
                    throw ModelError(
                        code: .unknownHome, message: "no other home '\(target)' to move the accessories to")
                }
                for accessoryID in held.sorted() {
                    events += Self.move(accessoryID, from: index, to: to, in: &document)
                }
                document.homes[to].sourcePrefixes = Array(
                    Set(document.homes[to].sourcePrefixes).union(home.sourcePrefixes)
                ).sorted()
            }
            document.homes.remove(at: index)
            return ((), events + [(nil, .homes(.removed(home)))])
        }
    }

    /// Moves an accessory the database knows to another home: its name and service names go
    /// with it, and its room if the other home has a room of that name (else the default room).
    public func moveAccessory(id: String, toHome target: String) throws(ModelError) {
        try shared.update { document throws(ModelError) in
            guard let to = document.homes.firstIndex(where: { $0.id == target }) else { throw Self.unknownHome(target) }
            guard let from = document.homes.firstIndex(where: { $0.holds(accessoryID: id) }) else {
                throw ModelError(code: .unknownAccessory, message: "no home holds an accessory with id '\(id)'")
            }
            guard from != to else { return ((), []) }
            return ((), Self.move(id, from: from, to: to, in: &document))
        }
    }

    /// Assigns a source (its accessory id prefix) to a home: its accessories any home holds now
    /// move there, and new ones are taken in there.
    public func assignSource(prefix: String, toHome target: String) throws(ModelError) {
        try shared.update { document throws(ModelError) in
            guard !prefix.isEmpty else {
                throw ModelError(code: .invalidField, message: "a source prefix must not be empty")
            }
            guard let to = document.homes.firstIndex(where: { $0.id == target }) else { throw Self.unknownHome(target) }
            for index in document.homes.indices { document.homes[index].sourcePrefixes.removeAll { $0 == prefix } }
            document.homes[to].sourcePrefixes = (document.homes[to].sourcePrefixes + [prefix]).sorted()
            var events: [Addressed] = []
            for (from, home) in document.homes.enumerated() where from != to {
                let held = Set(home.knownAccessoryIDs).union(home.assignments.keys).union(home.removedAccessoryIDs)
                for id in held.sorted() where id.hasPrefix(prefix) {
                    events += Self.move(id, from: from, to: to, in: &document)
                }
            }
            return ((), events)
        }
    }

    private static func move(_ id: String, from: Int, to: Int, in document: inout Document) -> [Addressed] {
        let source = document.homes[from]
        let roomName = source.assignments[id].flatMap { source.room(id: $0) }?.name
        let prefix = id + "#"
        let serviceNames = source.serviceNames.filter { $0.key.hasPrefix(prefix) }
        let wasRemoved = source.removedAccessoryIDs.contains(id)
        document.homes[from].assignments[id] = nil
        document.homes[from].accessoryNames[id] = nil
        document.homes[from].serviceNames = source.serviceNames.filter { !$0.key.hasPrefix(prefix) }
        document.homes[from].knownAccessoryIDs.removeAll { $0 == id }
        document.homes[from].removedAccessoryIDs.removeAll { $0 == id }

        var target = document.homes[to]
        if wasRemoved {
            target.removedAccessoryIDs = Array(Set(target.removedAccessoryIDs).union([id])).sorted()
        } else {
            target.knownAccessoryIDs = Array(Set(target.knownAccessoryIDs).union([id])).sorted()
        }
        if let name = source.accessoryNames[id] { target.accessoryNames[id] = name }
        target.serviceNames.merge(serviceNames) { _, new in new }
        if let roomName, let room = target.room(named: roomName), room.id != target.roomForEntireHome.id {
            target.assignments[id] = room.id
        }
        document.homes[to] = target
        return [
            (source.id, .accessoryLeft(accessoryID: id, toHome: target.id)),
            (target.id, .accessoryJoined(accessoryID: id)),
        ]
    }

    // MARK: Base topics

    /// Each home's base topic, the gateway's for the home on it.
    static func baseTopics(_ document: Document, gatewayBase: String) -> [(homeID: String, topic: String)] {
        document.homes.map { ($0.id, $0.baseTopic ?? gatewayBase) }
    }

    /// A base topic is a topic prefix without wildcards, empty levels or a leading `$`, and
    /// never one home's topic inside another's: neither is the other or a level-prefix of it.
    static func checkedBaseTopic(_ topic: String, among others: [(homeID: String, topic: String)]) throws(ModelError)
        -> String
    {
        func invalid(_ why: String) -> ModelError {
            ModelError(code: .invalidBaseTopic, message: "the base topic '\(topic)' \(why)")
        }
        let trimmed = topic.trimmingWhitespace()
        guard !trimmed.isEmpty else { throw invalid("is empty") }
        guard trimmed.utf8.count <= 200 else { throw invalid("is longer than 200 bytes") }
        guard !trimmed.contains(where: { "+#\0".contains($0) }) else { throw invalid("holds + # or NUL") }
        // A topic is written into the broker's ACL file, a line per rule: no spaces, no controls.
        guard
            !trimmed.unicodeScalars.contains(where: {
                $0.properties.isWhitespace || $0.properties.generalCategory == .control
            })
        else { throw invalid("holds a space or a control character") }
        guard !trimmed.hasPrefix("$") else { throw invalid("starts with $ (the broker's own topics)") }
        guard !trimmed.split(separator: "/", omittingEmptySubsequences: false).contains(where: \.isEmpty) else {
            throw invalid("has an empty level (a leading, trailing or double /)")
        }
        if let clash = others.first(where: { Self.overlaps($0.topic, trimmed) }) {
            throw invalid("overlaps '\(clash.topic)', another home's topics or the gateway's")
        }
        return trimmed
    }

    static func overlaps(_ a: String, _ b: String) -> Bool {
        a == b || a.hasPrefix(b + "/") || b.hasPrefix(a + "/")
    }

    /// `<gatewayBase>-<name as a slug>`, numbered when taken.
    static func derivedBaseTopic(name: String, gatewayBase: String, among others: [(homeID: String, topic: String)])
        -> String
    {
        var slug = ""
        for scalar in name.lowercased().unicodeScalars {
            if scalar.isASCII, scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) {
                slug.unicodeScalars.append(scalar)
            } else if !slug.isEmpty, !slug.hasSuffix("-") {
                slug += "-"
            }
        }
        while slug.hasSuffix("-") { slug.removeLast() }
        let stem = "\(gatewayBase)-\(slug.isEmpty ? "home" : slug)"
        var candidate = stem
        var number = 2
        while others.contains(where: { overlaps($0.topic, candidate) }) {
            candidate = "\(stem)-\(number)"
            number += 1
        }
        return candidate
    }
}
