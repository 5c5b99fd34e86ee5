public import Foundation

/// The home database, after HomeKit's: homes (one primary), rooms, where accessories are, and the
/// names users gave them. Every change is on disk before it returns and before its `HomeEvent`
/// is emitted.
///
/// Stored as `home.json` (`{"version": 1, ...}`) in the state directory, replaced atomically (see
/// `AtomicFileWriter`). `home.lock` is `flock`ed so two processes never write at once: an
/// exclusive database holds it for its lifetime; a non-exclusive one (a CLI while the gateway may
/// run) takes it for each change, re-reading the file under it first.
public actor HomeDatabase {
    public static let currentVersion = 1
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
    }

    struct Storage: Sendable {
        let file: URL
        let lockPath: String
        let exclusive: Bool
        let writer: AtomicFileWriter
        /// Held for the database's lifetime when exclusive.
        let heldLock: FileLock?
    }

    private let storage: Storage?
    private var document: Document
    private let hub = EventHub<HomeEvent>()

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
        if let loaded = try Self.load(file) {
            document = loaded
        } else {
            document = .fresh()
            // Written at once so the home's and default room's ids are stable from now on.
            if exclusive { try Self.save(document, storage) }
        }
        self.storage = storage
    }

    private init(inMemory document: Document) {
        self.storage = nil
        self.document = document
    }

    /// A database without a file, for tests and dry runs.
    public static func inMemory() -> HomeDatabase {
        HomeDatabase(inMemory: .fresh())
    }

    /// An in-memory copy of `home`, to preview changes (a dry run) without touching any file.
    public static func inMemory(copying home: Home) -> HomeDatabase {
        HomeDatabase(inMemory: Document(version: currentVersion, primaryHomeID: home.id, homes: [home]))
    }

    deinit {
        hub.finish()
    }

    /// The primary home.
    public var home: Home { document.homes[document.primaryIndex] }

    public var homes: [Home] { document.homes }

    /// Each call returns a new stream that sees every change from then on.
    public nonisolated func events() -> EventStream<HomeEvent> {
        hub.subscribe()
    }

    /// Re-reads the file (for a non-exclusive database, which another process may change).
    public func reload() throws(ModelError) {
        guard let storage, let fresh = try Self.load(storage.file) else { return }
        document = fresh
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

    /// Takes in accessories from the sources. One never seen before is remembered, and if it
    /// suggests a room, placed there (the room is made if missing). A known accessory is never
    /// moved, so calling this again with the same accessories changes nothing.
    public func adopt(_ accessories: [Accessory]) throws(ModelError) {
        try change { home throws(ModelError) in
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
            return ((), events)
        }
    }

    public func renameHome(to newName: String) throws(ModelError) {
        try change { home throws(ModelError) in
            let name = try Self.checkedName(newName, what: "home")
            guard home.name != name else { return ((), []) }
            home.name = name
            return ((), [.homeRenamed(name)])
        }
    }

    // MARK: Machinery

    /// Applies `body` to the primary home, persists the result if it changed, then emits events.
    private func change<R>(_ body: (inout Home) throws(ModelError) -> (R, [HomeEvent])) throws(ModelError) -> R {
        var transientLock: FileLock?
        var base = document
        if let storage, !storage.exclusive {
            transientLock = try FileLock(path: storage.lockPath)
            if let fresh = try Self.load(storage.file) { base = fresh }
        }
        defer { _ = transientLock }
        var next = base
        let index = next.primaryIndex
        let (result, events) = try body(&next.homes[index])
        if next != base, let storage {
            try Self.save(next, storage)
        }
        document = next
        for event in events { hub.yield(event) }
        return result
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

    static func load(_ file: URL) throws(ModelError) -> Document? {
        let bytes: [UInt8]
        do {
            guard FileManager.default.fileExists(atPath: file.path) else { return nil }
            bytes = Array(try Data(contentsOf: file))
        } catch {
            throw ModelError(
                code: .io, message: "could not read the home database \(file.path): \(error.localizedDescription)")
        }
        func corrupt(_ why: String) -> ModelError {
            ModelError(
                code: .corruptDatabase,
                message:
                    "the home database \(file.path) is corrupt (\(why)); it was left as it is — fix or move it away")
        }
        let json: JSONValue
        do { json = try JSONValue(parsing: bytes) } catch { throw corrupt(error.message) }
        guard let version = json["version"]?.int64Value else { throw corrupt("no \"version\"") }
        if version > Int64(currentVersion) {
            throw ModelError(
                code: .unsupportedVersion,
                message:
                    "the home database \(file.path) is version \(version), written by a newer HomeMQTT; this one reads version \(currentVersion). It was left as it is"
            )
        }
        guard version >= 1 else { throw corrupt("version \(version)") }
        let document: Document
        do {
            document = try JSONDecoder().decode(Document.self, from: Data(bytes))
        } catch {
            throw corrupt("\(error)")
        }
        guard document.homes.contains(where: { $0.id == document.primaryHomeID }) else {
            throw corrupt("the primary home \(document.primaryHomeID) is missing")
        }
        return document
    }

    static func save(_ document: Document, _ storage: Storage) throws(ModelError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let data: Data
        do { data = try encoder.encode(document) } catch {
            throw ModelError(code: .io, message: "could not encode the home database: \(error)")
        }
        try storage.writer.write(Array(data) + [0x0A], to: storage.file)
    }
}
