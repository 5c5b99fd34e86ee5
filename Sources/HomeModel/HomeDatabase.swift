public import Foundation
import Synchronization

/// The home database, after HomeKit's: homes (one primary), their rooms, which home and room
/// each accessory is in, and the names users gave them. Every change is on disk before it
/// returns and before its `HomeEvent` is emitted.
///
/// A `HomeDatabase` is a view of the database for one home: `view(homeID:)` makes another view of
/// the same database, sharing its document, file and lock. The views a gateway serves are bound
/// to a home; the one `init` opens follows the primary home (what the CLI edits by default).
///
/// Stored as `home.json` (`{"version": 2, ...}`) in the state directory, replaced atomically (see
/// `AtomicFileWriter`). `home.lock` is `flock`ed so two processes never write at once: an
/// exclusive database holds it for its lifetime; a non-exclusive one (a CLI while the gateway may
/// run) takes it for each change, re-reading the file under it first. Version 1 (one home, before
/// 0.11) reads as version 2 with that home on the gateway's base topic; the state format's
/// migration rewrites it.
public actor HomeDatabase {
    public static let currentVersion = 2
    public static let fileName = "home.json"
    public static let lockFileName = "home.lock"

    struct Document: Codable, Sendable, Equatable {
        var version: Int
        var primaryHomeID: String
        var homes: [Home]

        static func fresh() -> Document {
            let home = Home()
            return Document(version: HomeDatabase.currentVersion, primaryHomeID: home.id, homes: [home])
        }

        var primaryIndex: Int { homes.firstIndex { $0.id == primaryHomeID } ?? 0 }

        /// The home a view bound to `homeID` sees; nil follows the primary home.
        func index(of homeID: String?) -> Int? {
            guard let homeID else { return primaryIndex }
            return homes.firstIndex { $0.id == homeID }
        }

        /// The home that holds the accessory, else the home that takes in a new accessory of its
        /// source (the longest matching source prefix), else the primary home.
        func homeIndex(forAccessory id: String) -> Int {
            if homes.count == 1 { return 0 }
            if let holder = homes.firstIndex(where: { $0.holds(accessoryID: id) }) { return holder }
            var best: (index: Int, length: Int)?
            for (index, home) in homes.enumerated() {
                for prefix in home.sourcePrefixes where id.hasPrefix(prefix) && prefix.count > (best?.length ?? -1) {
                    best = (index, prefix.count)
                }
            }
            return best?.index ?? primaryIndex
        }
    }

    struct Storage: Sendable {
        let file: URL
        let lockPath: String
        let exclusive: Bool
        let writer: AtomicFileWriter
        /// Held for the database's lifetime when exclusive.
        let heldLock: FileLock?
    }

    /// An event and the home it is told to: nil tells every home.
    typealias Addressed = (homeID: String?, event: HomeEvent)

    /// What every view of one database shares: the document, its file, and each home's events.
    final class Shared: Sendable {
        let storage: Storage?
        let document: Mutex<Document>
        /// home id → the hub of that home's events, made when first subscribed.
        private let hubs = Mutex<[String: EventHub<HomeEvent>]>([:])

        init(storage: Storage?, document: Document) {
            self.storage = storage
            self.document = Mutex(document)
        }

        deinit {
            for hub in hubs.withLock({ Array($0.values) }) { hub.finish() }
        }

        func hub(for homeID: String) -> EventHub<HomeEvent> {
            hubs.withLock { hubs in
                if let hub = hubs[homeID] { return hub }
                let hub = EventHub<HomeEvent>()
                hubs[homeID] = hub
                return hub
            }
        }

        /// Applies `body` to the document (re-read first under the lock when not exclusive),
        /// saves the result if it changed, then emits the events.
        func update<R: Sendable>(_ body: (inout Document) throws(ModelError) -> (R, [Addressed])) throws(ModelError)
            -> R
        {
            let storage = self.storage
            // The events are yielded under the lock, so that every subscriber hears the changes
            // in the order they were made (yielding only buffers; it never calls back here).
            return try document.withLock { document throws(ModelError) in
                var transientLock: FileLock?
                var base = document
                if let storage, !storage.exclusive {
                    transientLock = try FileLock(path: storage.lockPath)
                    if let fresh = try HomeDatabase.load(storage.file) { base = fresh }
                }
                defer { _ = transientLock }
                var next = base
                let out = try body(&next)
                if next != base, let storage {
                    try HomeDatabase.save(next, storage)
                }
                document = next
                let (result, events) = out
                let targets = hubs.withLock { $0 }
                for (homeID, event) in events {
                    if let homeID {
                        targets[homeID]?.yield(event)
                    } else {
                        for hub in targets.values { hub.yield(event) }
                    }
                }
                return result
            }
        }
    }

    let shared: Shared
    /// The home this view reads and changes; nil follows the primary home.
    public nonisolated let homeID: String?

    /// Opens (or starts) the database in `directory`, creating the directory (0700) if needed.
    /// A corrupt `home.json` (`corrupt-database`) or one from a newer version
    /// (`unsupported-version`) is refused and left as it is. With `exclusive`, the lock is taken
    /// now and kept (`locked` if another process has it).
    public init(directory: URL, exclusive: Bool = true) throws(ModelError) {
        try self.init(directory: directory, exclusive: exclusive, writer: AtomicFileWriter())
    }

    /// For tests: `hook` runs before each step of every write, `chunkSize` splits the data.
    init(directory: URL, exclusive: Bool, writer: AtomicFileWriter) throws(ModelError) {
        try AtomicFileWriter.createDirectory(directory)
        let file = directory.appendingPathComponent(Self.fileName)
        let lockPath = directory.appendingPathComponent(Self.lockFileName).path
        let held = exclusive ? try FileLock(path: lockPath) : nil
        if held != nil { AtomicFileWriter.removeStaleTemporaries(for: file) }
        let storage = Storage(file: file, lockPath: lockPath, exclusive: exclusive, writer: writer, heldLock: held)
        let document: Document
        if let loaded = try Self.load(file) {
            document = loaded
        } else {
            document = .fresh()
            // Written at once so the home's and default room's ids are stable from now on.
            if exclusive { try Self.save(document, storage) }
        }
        shared = Shared(storage: storage, document: document)
        homeID = nil
    }

    private init(shared: Shared, homeID: String?) {
        self.shared = shared
        self.homeID = homeID
    }

    /// A database without a file, for tests and dry runs.
    public static func inMemory() -> HomeDatabase {
        HomeDatabase(shared: Shared(storage: nil, document: .fresh()), homeID: nil)
    }

    /// An in-memory copy of `home`, to preview changes (a dry run) without touching any file.
    public static func inMemory(copying home: Home) -> HomeDatabase {
        let document = Document(version: currentVersion, primaryHomeID: home.id, homes: [home])
        return HomeDatabase(shared: Shared(storage: nil, document: document), homeID: nil)
    }

    /// A view of the same database bound to the home `homeID`: what it reads, changes and hears
    /// is that home's, whichever home is primary.
    public nonisolated func view(homeID: String) -> HomeDatabase {
        HomeDatabase(shared: shared, homeID: homeID)
    }

    /// This view's home; the primary home if the view's home was removed.
    public var home: Home {
        shared.document.withLock { $0.homes[$0.index(of: homeID) ?? $0.primaryIndex] }
    }

    public var homes: [Home] { shared.document.withLock { $0.homes } }

    /// The homes now, without waiting for the actor: for building the gateways that serve them.
    public nonisolated var homesNow: [Home] { shared.document.withLock { $0.homes } }

    /// The home served on the gateway's own base topic (the one without a base topic of its own).
    public nonisolated var baseHomeID: String {
        shared.document.withLock { document in
            (document.homes.first { $0.baseTopic == nil } ?? document.homes[document.primaryIndex]).id
        }
    }

    public var primaryHomeID: String { shared.document.withLock { $0.primaryHomeID } }

    /// Each call returns a new stream that sees every change of this view's home from then on
    /// (for a view following the primary home: of the home primary now), and every change to
    /// the list of homes.
    public nonisolated func events() -> EventStream<HomeEvent> {
        let id = shared.document.withLock { $0.homes[$0.index(of: homeID) ?? $0.primaryIndex].id }
        return shared.hub(for: id).subscribe()
    }

    /// Whether the accessory is this view's home's, or would be taken in by it if new. With one
    /// home, every accessory is.
    public nonisolated func serves(accessoryID: String) -> Bool {
        shared.document.withLock { document in
            document.homes.count == 1 || document.homeIndex(forAccessory: accessoryID) == document.index(of: homeID)
        }
    }

    /// Re-reads the file (for a non-exclusive database, which another process may change).
    public func reload() throws(ModelError) {
        guard let storage = shared.storage, let fresh = try Self.load(storage.file) else { return }
        shared.document.withLock { $0 = fresh }
    }

    // MARK: Changes

    @discardableResult
    public func addRoom(named name: String) throws(ModelError) -> Room {
        try change { home throws(ModelError) in
            let name = try Self.checkedName(name, what: "room")
            if let existing = home.room(named: name) {
                throw ModelError(code: .duplicateName, message: "a room named '\(existing.name)' already exists")
            }
            let room = Room(name: name)
            home.rooms.append(room)
            return (room, [.roomAdded(room)])
        }
    }

    public func renameRoom(id: String, to newName: String) throws(ModelError) {
        try change { home throws(ModelError) in
            let name = try Self.checkedName(newName, what: "room")
            let room = try Self.existingRoom(id, in: home)
            if let other = home.room(named: name), other.id != id {
                throw ModelError(code: .duplicateName, message: "a room named '\(other.name)' already exists")
            }
            guard room.name != name else { return ((), []) }
            let renamed = Room(id: id, name: name)
            if home.roomForEntireHome.id == id {
                home.roomForEntireHome = renamed
            } else if let index = home.rooms.firstIndex(where: { $0.id == id }) {
                home.rooms[index] = renamed
            }
            return ((), [.roomRenamed(renamed, oldName: room.name)])
        }
    }

    /// Its accessories go to the default room (an `accessoryAssigned` event each, then
    /// `roomRemoved`). The default room cannot be removed.
    public func removeRoom(id: String) throws(ModelError) {
        try change { home throws(ModelError) in
            let room = try Self.existingRoom(id, in: home)
            if room.id == home.roomForEntireHome.id {
                throw ModelError(code: .defaultRoom, message: "the default room '\(room.name)' cannot be removed")
            }
            home.rooms.removeAll { $0.id == id }
            var events: [HomeEvent] = []
            for accessoryID in home.assignments.filter({ $0.value == id }).keys.sorted() {
                home.assignments[accessoryID] = nil
                events.append(.accessoryAssigned(accessoryID: accessoryID, room: home.roomForEntireHome))
            }
            events.append(.roomRemoved(room))
            return ((), events)
        }
    }

    /// Places a known accessory in a room (the default room included). Placing it by hand also
    /// means its suggested room is never applied.
    public func assign(accessoryID: String, toRoom roomID: String) throws(ModelError) {
        try change { home throws(ModelError) in
            try Self.checkKnown(accessoryID, in: home)
            let room = try Self.existingRoom(roomID, in: home)
            guard home.assignments[accessoryID] != roomID else { return ((), []) }
            home.assignments[accessoryID] = roomID
            return ((), [.accessoryAssigned(accessoryID: accessoryID, room: room)])
        }
    }

    /// nil gives the accessory its own name back.
    public func renameAccessory(id: String, to name: String?) throws(ModelError) {
        try change { home throws(ModelError) in
            try Self.checkKnown(id, in: home)
            let name = try name.map { name throws(ModelError) in try Self.checkedName(name, what: "accessory") }
            guard home.accessoryNames[id] != name else { return ((), []) }
            home.accessoryNames[id] = name
            return ((), [.accessoryRenamed(accessoryID: id, name: name)])
        }
    }

    public func renameService(accessoryID: String, iid: UInt64, to name: String?) throws(ModelError) {
        try change { home throws(ModelError) in
            try Self.checkKnown(accessoryID, in: home)
            let name = try name.map { name throws(ModelError) in try Self.checkedName(name, what: "service") }
            let key = Home.serviceKey(accessoryID: accessoryID, iid: iid)
            guard home.serviceNames[key] != name else { return ((), []) }
            home.serviceNames[key] = name
            return ((), [.serviceRenamed(accessoryID: accessoryID, iid: iid, name: name)])
        }
    }

    /// Removes the accessory's room, names and service names; if it comes back it is adopted anew.
    public func forgetAccessory(id: String) throws(ModelError) {
        try change { home throws(ModelError) in
            try Self.forget(id, in: &home)
            return ((), [.accessoryForgotten(accessoryID: id)])
        }
    }

    /// Removes an accessory from the home for good: forgotten as `forgetAccessory` does, and
    /// not taken in again while its source still reports it, until `restoreAccessory`.
    public func removeAccessory(id: String) throws(ModelError) {
        try change { home throws(ModelError) in
            try Self.forget(id, in: &home)
            home.removedAccessoryIDs = Array(Set(home.removedAccessoryIDs).union([id])).sorted()
            return ((), [.accessoryForgotten(accessoryID: id)])
        }
    }

    private static func forget(_ id: String, in home: inout Home) throws(ModelError) {
        try checkKnown(id, in: home)
        home.assignments[id] = nil
        home.accessoryNames[id] = nil
        let prefix = id + "#"
        home.serviceNames = home.serviceNames.filter { !$0.key.hasPrefix(prefix) }
        home.knownAccessoryIDs.removeAll { $0 == id }
    }

    /// Lets a removed accessory back into the home (it is adopted again as new).
    public func restoreAccessory(id: String) throws(ModelError) {
        try change { home throws(ModelError) in
            home.removedAccessoryIDs.removeAll { $0 == id }
            return ((), [])
        }
    }

    /// Takes in accessories from the sources, those that are this home's (`serves`). One never
    /// seen before is remembered, and if it suggests a room, placed there (the room is made if
    /// missing). A known accessory is never moved, so calling this again with the same
    /// accessories changes nothing.
    public func adopt(_ accessories: [Accessory]) throws(ModelError) {
        let homeID = self.homeID
        try shared.update { document throws(ModelError) in
            guard let index = document.index(of: homeID) else { throw Self.unknownHome(homeID ?? "") }
            let mine =
                document.homes.count == 1
                ? accessories
                : accessories.filter {
                    document.homeIndex(forAccessory: $0.id) == index
                }
            let events = Self.adopt(mine, into: &document.homes[index])
            return ((), events.map { (document.homes[index].id, $0) })
        }
    }

    private static func adopt(_ accessories: [Accessory], into home: inout Home) -> [HomeEvent] {
        var known = Set(home.knownAccessoryIDs).union(home.removedAccessoryIDs)
        var events: [HomeEvent] = []
        for accessory in accessories where !known.contains(accessory.id) {
            known.insert(accessory.id)
            guard home.assignments[accessory.id] == nil,
                let suggestion = accessory.suggestedRoom?.trimmingCharacters(in: .whitespacesAndNewlines),
                !suggestion.isEmpty
            else { continue }
            let room: Room
            if let existing = home.room(named: suggestion) {
                room = existing
            } else {
                room = Room(name: suggestion)
                home.rooms.append(room)
                events.append(.roomAdded(room))
            }
            home.assignments[accessory.id] = room.id
            events.append(.accessoryAssigned(accessoryID: accessory.id, room: room))
        }
        home.knownAccessoryIDs = known.subtracting(home.removedAccessoryIDs).sorted()
        return events
    }

    /// Renames this view's home (`renameHome(id:to:)` for any home).
    public func renameHome(to newName: String) throws(ModelError) {
        let id = home.id
        try renameHome(id: id, to: newName)
    }

    // MARK: Machinery

    /// Applies `body` to this view's home, persists the result if it changed, then emits events.
    private func change<R: Sendable>(_ body: (inout Home) throws(ModelError) -> (R, [HomeEvent])) throws(ModelError)
        -> R
    {
        let homeID = self.homeID
        return try shared.update { document throws(ModelError) in
            guard let index = document.index(of: homeID) else { throw Self.unknownHome(homeID ?? "") }
            let (result, events) = try body(&document.homes[index])
            let id = document.homes[index].id
            return (result, events.map { (id, $0) })
        }
    }

    static func unknownHome(_ key: String) -> ModelError {
        ModelError(code: .unknownHome, message: "no home '\(key)'")
    }

    static func checkedName(_ name: String, what: String) throws(ModelError) -> String {
        let trimmed = name.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty else {
            throw ModelError(code: .invalidName, message: "a \(what) name must not be empty")
        }
        guard !trimmed.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw ModelError(code: .invalidName, message: "a \(what) name must not contain control characters")
        }
        return trimmed
    }

    static func existingRoom(_ id: String, in home: Home) throws(ModelError) -> Room {
        guard let room = home.room(id: id) else {
            throw ModelError(
                code: .unknownRoom,
                message:
                    "no room with id '\(id)' in \(home.name); rooms: \(home.allRooms.map { "\($0.name) (\($0.id))" }.joined(separator: ", "))"
            )
        }
        return room
    }

    static func checkKnown(_ accessoryID: String, in home: Home) throws(ModelError) {
        guard home.isKnown(accessoryID: accessoryID) else {
            throw ModelError(code: .unknownAccessory, message: "no accessory with id '\(accessoryID)' in \(home.name)")
        }
    }

}
