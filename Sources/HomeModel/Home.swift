public import Foundation

// A home as HomeKit models it: rooms, where each accessory is, the names users gave, and the
// events that change it.

/// A room of a home, after HMRoom: a stable id and a name the user chose.
public struct Room: Sendable, Hashable, Codable, Identifiable {
    public var id: String
    public var name: String

    public init(id: String = UUID().uuidString, name: String) {
        self.id = id
        self.name = name
    }
}

/// A home, after HMHome: its rooms, the default room (`roomForEntireHome`), where each accessory
/// is, and the names the user gave accessories and services.
public struct Home: Sendable, Hashable, Codable, Identifiable {
    public static let defaultRoomName = "Default Room"
    public static let defaultName = "My Home"

    public var id: String
    public var name: String
    /// The rooms the user made; the default room is not among them.
    public var rooms: [Room]
    /// HomeKit's room for the entire home: where every accessory not placed elsewhere is.
    public var roomForEntireHome: Room
    /// accessory id → room id.
    public var assignments: [String: String]
    /// accessory id → the user's name for it.
    public var accessoryNames: [String: String]
    /// `serviceKey(accessoryID:iid:)` (`"accessoryID#iid"`) → the user's name for the service.
    public var serviceNames: [String: String]
    /// Every accessory the home has taken in (sorted). A known accessory's suggested room is
    /// never applied again, so the user's choices stick.
    public var knownAccessoryIDs: [String]
    /// Accessories removed from the home while their source still has them (a simulated one,
    /// or one bridged behind a paired bridge): kept out of the home until restored (sorted).
    public var removedAccessoryIDs: [String]
    /// Where the home is served: nil for the gateway's own base topic (the home that was
    /// primary when the database was made), else a base topic of its own. Topics follow the
    /// home, never the primary flag.
    public var baseTopic: String?
    /// Accessory id prefixes (a HAP pairing's `hap:<id>:`, a simulator file's `sim:<stem>`)
    /// whose accessories not yet in any home are taken in here rather than by the primary home.
    public var sourcePrefixes: [String]

    public init(
        id: String = UUID().uuidString, name: String = Home.defaultName, rooms: [Room] = [],
        roomForEntireHome: Room = Room(name: Home.defaultRoomName), assignments: [String: String] = [:],
        accessoryNames: [String: String] = [:], serviceNames: [String: String] = [:], knownAccessoryIDs: [String] = [],
        removedAccessoryIDs: [String] = [], baseTopic: String? = nil, sourcePrefixes: [String] = []
    ) {
        self.removedAccessoryIDs = removedAccessoryIDs
        self.baseTopic = baseTopic
        self.sourcePrefixes = sourcePrefixes
        self.id = id
        self.name = name
        self.rooms = rooms
        self.roomForEntireHome = roomForEntireHome
        self.assignments = assignments
        self.accessoryNames = accessoryNames
        self.serviceNames = serviceNames
        self.knownAccessoryIDs = knownAccessoryIDs
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decode(String.self, forKey: .id)
        name = try c.decode(String.self, forKey: .name)
        rooms = try c.decodeIfPresent([Room].self, forKey: .rooms) ?? []
        roomForEntireHome = try c.decode(Room.self, forKey: .roomForEntireHome)
        assignments = try c.decodeIfPresent([String: String].self, forKey: .assignments) ?? [:]
        accessoryNames = try c.decodeIfPresent([String: String].self, forKey: .accessoryNames) ?? [:]
        serviceNames = try c.decodeIfPresent([String: String].self, forKey: .serviceNames) ?? [:]
        knownAccessoryIDs = try c.decodeIfPresent([String].self, forKey: .knownAccessoryIDs) ?? []
        removedAccessoryIDs = try c.decodeIfPresent([String].self, forKey: .removedAccessoryIDs) ?? []
        baseTopic = try c.decodeIfPresent(String.self, forKey: .baseTopic)
        sourcePrefixes = try c.decodeIfPresent([String].self, forKey: .sourcePrefixes) ?? []
    }

    public static func serviceKey(accessoryID: String, iid: UInt64) -> String { "\(accessoryID)#\(iid)" }

    /// The default room first, then the user's rooms in the order they were made.
    public var allRooms: [Room] { [roomForEntireHome] + rooms }

    public func room(id: String) -> Room? {
        allRooms.first { $0.id == id }
    }

    /// The accessory's room; the default room if it is unassigned or its room is gone.
    public func room(forAccessory accessoryID: String) -> Room {
        assignments[accessoryID].flatMap { room(id: $0) } ?? roomForEntireHome
    }

    /// Case-insensitive; includes the default room.
    public func room(named name: String) -> Room? {
        let key = Self.nameKey(name)
        return allRooms.first { Self.nameKey($0.name) == key }
    }

    /// Ids of the accessories in a room, among those the home knows or has assigned (sorted).
    public func accessoryIDs(inRoom roomID: String) -> [String] {
        Set(knownAccessoryIDs).union(assignments.keys).filter { room(forAccessory: $0).id == roomID }.sorted()
    }

    public func isKnown(accessoryID: String) -> Bool {
        knownAccessoryIDs.contains(accessoryID) || assignments[accessoryID] != nil
    }

    /// Whether the accessory is this home's: known here, or removed from here (and so kept out
    /// of every other home too until restored).
    public func holds(accessoryID: String) -> Bool {
        isKnown(accessoryID: accessoryID) || removedAccessoryIDs.contains(accessoryID)
    }

    /// The user's name for the accessory, else its own.
    public func displayName(accessory: Accessory) -> String {
        accessoryNames[accessory.id] ?? accessory.name
    }

    /// The user's name for the service, else the accessory's (its Name characteristic), else nil.
    public func displayName(service: AccessoryService, accessoryID: String) -> String? {
        serviceNames[Self.serviceKey(accessoryID: accessoryID, iid: service.iid)] ?? service.name
    }

    static func nameKey(_ name: String) -> String {
        name.trimmingWhitespace().lowercased()
    }
}

/// A change to the home, after the HMHomeDelegate callbacks (`home(_:didAdd:)` …). Emitted after
/// the change is on disk.
public enum HomeEvent: Sendable, Hashable {
    case roomAdded(Room)
    case roomRemoved(Room)
    case roomRenamed(Room, oldName: String)
    case accessoryAssigned(accessoryID: String, room: Room)
    /// nil: the user's name was removed; the accessory's own name applies again.
    case accessoryRenamed(accessoryID: String, name: String?)
    case serviceRenamed(accessoryID: String, iid: UInt64, name: String?)
    case accessoryForgotten(accessoryID: String)
    case homeRenamed(String)
    /// An accessory moved here from another home: it is this home's from now on.
    case accessoryJoined(accessoryID: String)
    /// An accessory moved from here to another home.
    case accessoryLeft(accessoryID: String, toHome: String)
    /// A change to the list of homes, told to every home.
    indirect case homes(HomesChange)
}

/// A change to the list of homes (after `homeManager(_:didAdd:)`, `didRemove`,
/// `homeManagerDidUpdatePrimaryHome`), told to every home's subscribers.
public enum HomesChange: Sendable, Hashable {
    case added(Home)
    case removed(Home)
    case renamed(Home, oldName: String)
    case primaryChanged(Home, previous: Home)
    case baseTopicChanged(Home, old: String?)
}
