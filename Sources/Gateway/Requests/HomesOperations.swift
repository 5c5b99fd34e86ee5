// The operations on the list of homes: list, add, rename, remove, make primary, move a home's
// base topic, and move an accessory or a whole source to another home. Like the room operations
// they need no running gateway; a running one announces each change on every home's
// `$gateway/event` and serves a new home at once.
public import HomeModel

/// A home as the operations answer it. `present`: the accessories its sources have now, when
/// known; the home database keeps one its source dropped (a simulated accessory's file deleted),
/// so that its room and names stick if it comes back, but the home does not hold it meanwhile.
func homeAnswer(_ home: Home, primaryID: String, gatewayBase: String, present: Set<String>? = nil) -> JSONValue {
    let accessories = present.map { present in home.knownAccessoryIDs.filter(present.contains) }
    return .object([
        "id": .string(home.id), "name": .string(home.name), "primary": .bool(home.id == primaryID),
        "base-topic": .string(home.baseTopic ?? gatewayBase), "rooms": .uint(UInt64(home.allRooms.count)),
        "accessories": .uint(UInt64((accessories ?? home.knownAccessoryIDs).count)),
    ])
}

extension HomeEditor {
    /// Refuses a change to the list of homes where it may not be made: on the request topic of
    /// a home other than the one on the gateway's base topic (where its administrators need not
    /// administer the homes it would change). `ManagementOperations.perform` asks it of every
    /// operation that declares `access: .homeList`, so the declaration is the one place.
    func requireHomesEditor(_ op: String) throws(GatewayFailure) {
        guard managesHomes else {
            throw GatewayFailure(
                code: .insufficientPrivileges,
                message: "\(op) changes the list of homes: send it to \(gatewayBase)/$gateway/request/\(op)")
        }
    }

    /// The home `key` names (id, name or base topic), as a request's failure when none does.
    func home(named key: String) async throws(GatewayFailure) -> Home {
        do throws(ModelError) {
            return try await database.home(named: key, gatewayBase: gatewayBase)
        } catch {
            throw GatewayFailure(code: error.code, message: error.message)
        }
    }

    /// The home as the database holds it now. Its accessories are those its sources have, as
    /// the running gateway knows; without it a paired accessory's source does not run, so the
    /// count is of every accessory the database knows.
    func describe(_ home: Home) async -> JSONValue {
        homeAnswer(home, primaryID: await database.primaryHomeID, gatewayBase: gatewayBase, present: await present())
    }

    func present() async -> Set<String>? {
        running == nil ? nil : Set(await sourceAccessories().map(\.id))
    }

    /// The accessory `key` names in any home, for moving it between homes: this home's by id,
    /// name or topic; else any home's by id; else one present in a home by its name there (the
    /// user's, else its own; any case). Another home's topics are its gateway's, so not here.
    func accessoryID(inAnyHome key: String) async throws(GatewayFailure) -> String {
        do throws(GatewayFailure) {
            return try await accessory(named: key).id
        } catch {
            guard error.code == .unknownAccessory else { throw error }
            let homes = await database.homes
            if homes.contains(where: { $0.holds(accessoryID: key) }) { return key }
            let lower = key.lowercased()
            let named = await sourceAccessories().compactMap { accessory -> (String, Home)? in
                guard let home = homes.first(where: { $0.isKnown(accessoryID: accessory.id) }),
                    home.displayName(accessory: accessory).lowercased() == lower
                else { return nil }
                return (accessory.id, home)
            }
            guard named.count <= 1 else {
                let which = named.map { "\($0.0) (\($0.1.name))" }.joined(separator: ", ")
                throw GatewayFailure(
                    code: .ambiguous, message: "\(named.count) accessories are named '\(key)'; use its id: \(which)")
            }
            guard let (id, _) = named.first else { throw error }
            return id
        }
    }
}

/// `homes`: every home, with its id, name, whether it is primary, its base topic and counts.
public struct HomesList: ManagementOperation {
    public static let name = "homes"

    public init() {}
    public init(_ request: RequestReader) throws(GatewayFailure) {}
    public var fields: [String: JSONValue] { [:] }

    public func perform(on editor: some HomeEditor) async throws(GatewayFailure) -> JSONValue {
        let primary = await editor.database.primaryHomeID
        let present = await editor.present()
        return .array(
            await editor.database.homes.map {
                homeAnswer($0, primaryID: primary, gatewayBase: editor.gatewayBase, present: present)
            })
    }
}

/// `home/add`: a new home, served at once on its own base topic (`<base>-<name>` unless given).
public struct HomeAdd: ManagementOperation {
    public static let name = "home/add"
    public static let access = OperationAccess.homeList
    public var name: String
    public var baseTopic: String?

    public init(name: String, baseTopic: String? = nil) {
        self.name = name
        self.baseTopic = baseTopic
    }

    public init(_ request: RequestReader) throws(GatewayFailure) {
        name = try request.text("name")
        baseTopic = try request.optionalText("base-topic")
    }

    public var fields: [String: JSONValue] {
        ["name": .string(name), "base-topic": baseTopic.map(JSONValue.string) ?? .null]
    }

    public func perform(on editor: some HomeEditor) async throws(GatewayFailure) -> JSONValue {
        let (name, topic, base, reserved) = (self.name, baseTopic, editor.gatewayBase, editor.reservedTopics)
        let home = try await editor.change { db throws(ModelError) in
            try await db.addHome(named: name, baseTopic: topic, gatewayBase: base, reserved: reserved)
        }
        return await editor.describe(home)
    }
}

/// `home/rename`: a home's new name; its topics stay.
public struct HomeRename: ManagementOperation {
    public static let name = "home/rename"
    public static let access = OperationAccess.homeList
    /// The home: id, name or base topic.
    public var home: String
    public var name: String

    public init(home: String, name: String) {
        self.home = home
        self.name = name
    }

    public init(_ request: RequestReader) throws(GatewayFailure) {
        home = try request.text("home")
        name = try request.text("name")
    }

    public var fields: [String: JSONValue] { ["home": .string(home), "name": .string(name)] }

    public func perform(on editor: some HomeEditor) async throws(GatewayFailure) -> JSONValue {
        let home = try await editor.home(named: self.home)
        let name = self.name
        try await editor.change { db throws(ModelError) in try await db.renameHome(id: home.id, to: name) }
        return await editor.describe(try await editor.home(named: home.id))
    }
}

/// `home/remove`: a home and its topics; one that holds accessories only with `move-to`. Only
/// the running gateway can clear the topics of the home it served, so only it removes one.
public struct HomeRemove: ManagementOperation {
    public static let name = "home/remove"
    public static let access = OperationAccess.homeList
    public static var needsGateway: Bool { true }
    /// The home: id, name or base topic.
    public var home: String
    /// Where its accessories go: a home's id, name or base topic.
    public var moveTo: String?

    public init(home: String, moveTo: String? = nil) {
        self.home = home
        self.moveTo = moveTo
    }

    public init(_ request: RequestReader) throws(GatewayFailure) {
        home = try request.text("home")
        moveTo = try request.optionalText("move-to")
    }

    public var fields: [String: JSONValue] {
        ["home": .string(home), "move-to": moveTo.map(JSONValue.string) ?? .null]
    }

    public func perform(on editor: some HomeEditor) async throws(GatewayFailure) -> JSONValue {
        try HomeRemove.requireGateway(editor, for: Self.name)
        let home = try await editor.home(named: self.home)
        var targetID: String?
        if let moveTo { targetID = try await editor.home(named: moveTo).id }
        let answer = await editor.describe(home)
        try await editor.change { [targetID] db throws(ModelError) in
            try await db.removeHome(id: home.id, movingTo: targetID)
        }
        return answer
    }
}

extension HomeRemove {
    /// Without the running gateway a home's retained topics would stay on the broker with no
    /// one left to clear them.
    static func requireGateway(_ editor: some HomeEditor, for op: String) throws(GatewayFailure) {
        guard editor.running != nil else {
            throw GatewayFailure(
                code: .needsGateway,
                message: "\(op) needs the running gateway, which clears the topics of the home it served")
        }
    }
}

/// `home/primary`: makes a home primary. No topic changes; it is announced.
public struct HomePrimary: ManagementOperation {
    public static let name = "home/primary"
    public static let access = OperationAccess.homeList
    public var home: String

    public init(home: String) { self.home = home }

    public init(_ request: RequestReader) throws(GatewayFailure) {
        home = try request.text("home")
    }

    public var fields: [String: JSONValue] { ["home": .string(home)] }

    public func perform(on editor: some HomeEditor) async throws(GatewayFailure) -> JSONValue {
        let home = try await editor.home(named: self.home)
        try await editor.change { db throws(ModelError) in try await db.setPrimary(homeID: home.id) }
        return await editor.describe(home)
    }
}

/// `home/base-topic`: moves a home (not the one on the gateway's base topic) to another base
/// topic; the running gateway clears its old topics, so only it moves one.
public struct HomeBaseTopic: ManagementOperation {
    public static let name = "home/base-topic"
    public static let access = OperationAccess.homeList
    public static var needsGateway: Bool { true }
    public var home: String
    public var baseTopic: String

    public init(home: String, baseTopic: String) {
        self.home = home
        self.baseTopic = baseTopic
    }

    public init(_ request: RequestReader) throws(GatewayFailure) {
        home = try request.text("home")
        baseTopic = try request.text("base-topic")
    }

    public var fields: [String: JSONValue] { ["home": .string(home), "base-topic": .string(baseTopic)] }

    public func perform(on editor: some HomeEditor) async throws(GatewayFailure) -> JSONValue {
        try HomeRemove.requireGateway(editor, for: Self.name)
        let home = try await editor.home(named: self.home)
        let (topic, base, reserved) = (baseTopic, editor.gatewayBase, editor.reservedTopics)
        try await editor.change { db throws(ModelError) in
            try await db.setBaseTopic(homeID: home.id, to: topic, gatewayBase: base, reserved: reserved)
        }
        return await editor.describe(try await editor.home(named: home.id))
    }
}

/// `accessory/home`: an accessory moved to another home, with its names; its topics in the home
/// it leaves are cleared. Answered with both homes as they are after the move.
public struct AccessoryHome: ManagementOperation {
    public static let name = "accessory/home"
    public static let access = OperationAccess.homeList
    /// The accessory: id, name or topic in the home on the gateway's base topic (where the
    /// request is sent), or any home's id, or its name in the home it is in.
    public var accessory: String
    public var home: String

    public init(accessory: String, home: String) {
        self.accessory = accessory
        self.home = home
    }

    public init(_ request: RequestReader) throws(GatewayFailure) {
        accessory = try request.text("accessory")
        home = try request.text("home")
    }

    public var fields: [String: JSONValue] { ["accessory": .string(accessory), "home": .string(home)] }

    public func perform(on editor: some HomeEditor) async throws(GatewayFailure) -> JSONValue {
        let target = try await editor.home(named: home)
        let id = try await editor.accessoryID(inAnyHome: accessory)
        let from = await editor.database.homes.first { $0.holds(accessoryID: id) }
        try await editor.change { db throws(ModelError) in try await db.moveAccessory(id: id, toHome: target.id) }
        var answer: [String: JSONValue] = [
            "id": .string(id), "home": await editor.describe(try await editor.home(named: target.id)),
        ]
        if let from { answer["from"] = await editor.describe(try await editor.home(named: from.id)) }
        return .object(answer)
    }
}

/// `source/home`: a whole source — accessory ids starting with `prefix`, such as a HAP pairing's
/// `hap:<pairing id>:` or a simulator file's `sim:<file>` — assigned to a home: its accessories
/// move there now, and new ones are taken in there.
public struct SourceHome: ManagementOperation {
    public static let name = "source/home"
    public static let access = OperationAccess.homeList
    public var prefix: String
    public var home: String

    public init(prefix: String, home: String) {
        self.prefix = prefix
        self.home = home
    }

    public init(_ request: RequestReader) throws(GatewayFailure) {
        prefix = try request.text("prefix")
        home = try request.text("home")
    }

    public var fields: [String: JSONValue] { ["prefix": .string(prefix), "home": .string(home)] }

    public func perform(on editor: some HomeEditor) async throws(GatewayFailure) -> JSONValue {
        let target = try await editor.home(named: home)
        let prefix = self.prefix
        try await editor.change { db throws(ModelError) in try await db.assignSource(prefix: prefix, toHome: target.id)
        }
        // The home as it is after its new accessories came.
        return .object([
            "prefix": .string(prefix), "home": await editor.describe(try await editor.home(named: target.id)),
        ])
    }
}
