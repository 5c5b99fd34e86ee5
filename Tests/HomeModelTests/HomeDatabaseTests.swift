import Foundation
import Testing
import TestSupport
@testable import HomeModel

extension TemporaryDirectory {
    /// The home database's file in this directory.
    var databaseFile: URL { url.appendingPathComponent(HomeDatabase.fileName) }
    func bytes() throws -> Data { try Data(contentsOf: databaseFile) }
}

private func accessory(_ id: String, room: String? = nil) -> Accessory {
    Accessory(
        id: id, name: "Accessory \(id)",
        services: [
            AccessoryService(iid: 8, type: StandardUUID.longForm("43"), name: "Light", characteristics: [])
        ], suggestedRoom: room)
}

/// What is on disk now, read the way another process would.
private func onDisk(_ dir: TemporaryDirectory) async throws -> Home {
    try await HomeDatabase(directory: dir.url, exclusive: false).home
}

private func code(_ body: () async throws(ModelError) -> Void) async -> String? {
    do { try await body(); return nil } catch { return error.code.rawValue }
}

/// Counts write steps and throws at a chosen one, as if the process died there.
final class CrashSwitch: @unchecked Sendable {
    struct Crash: Error {}
    private let lock = NSLock()
    private var count = 0
    private var crashAt: Int?
    private(set) var steps: [WriteStep] = []

    init(crashAt: Int?) { self.crashAt = crashAt }

    var hook: WriteHook {
        { step in
            try self.lock.withLock {
                defer { self.count += 1 }
                self.steps.append(step)
                if self.count == self.crashAt { throw Crash() }
            }
        }
    }
}

@Suite struct HomeDatabaseTests {
    @Test func startsWithADefaultRoomAndPersistsIt() async throws {
        let dir = try TemporaryDirectory()
        let db = try HomeDatabase(directory: dir.url)
        let home = await db.home
        #expect(home.roomForEntireHome.name == "Default Room")
        #expect(home.rooms.isEmpty)
        #expect(await db.homes == [home])
        // Ids are stable: a second reader sees the same home.
        #expect(try await onDisk(dir) == home)
        let json = try JSONValue(parsing: Array(try dir.bytes()))
        #expect(json["version"] == 2)
    }

    @Test func everyChangePersistsThenEmitsItsEvent() async throws {
        let dir = try TemporaryDirectory()
        let db = try HomeDatabase(directory: dir.url)
        var events = db.events().makeAsyncIterator()
        let other = db.events() // every stream sees every event

        try await db.adopt([accessory("a1"), accessory("a2")])
        let kitchen = try await db.addRoom(named: " Kitchen ")
        #expect(kitchen.name == "Kitchen")
        #expect(await events.next() == .roomAdded(kitchen))
        #expect(try await onDisk(dir).rooms == [kitchen])

        try await db.renameRoom(id: kitchen.id, to: "Cuisine")
        let cuisine = Room(id: kitchen.id, name: "Cuisine")
        #expect(await events.next() == .roomRenamed(cuisine, oldName: "Kitchen"))
        #expect(try await onDisk(dir).rooms == [cuisine])

        try await db.assign(accessoryID: "a1", toRoom: kitchen.id)
        #expect(await events.next() == .accessoryAssigned(accessoryID: "a1", room: cuisine))
        #expect(try await onDisk(dir).room(forAccessory: "a1") == cuisine)

        try await db.renameAccessory(id: "a1", to: "Ceiling")
        #expect(await events.next() == .accessoryRenamed(accessoryID: "a1", name: "Ceiling"))
        #expect(try await onDisk(dir).displayName(accessory: accessory("a1")) == "Ceiling")

        try await db.renameService(accessoryID: "a1", iid: 8, to: "Spot")
        #expect(await events.next() == .serviceRenamed(accessoryID: "a1", iid: 8, name: "Spot"))
        let service = accessory("a1").services[0]
        #expect(try await onDisk(dir).displayName(service: service, accessoryID: "a1") == "Spot")

        try await db.renameService(accessoryID: "a1", iid: 8, to: nil)
        #expect(await events.next() == .serviceRenamed(accessoryID: "a1", iid: 8, name: nil))
        #expect(try await onDisk(dir).displayName(service: service, accessoryID: "a1") == "Light")

        try await db.renameAccessory(id: "a1", to: nil)
        #expect(await events.next() == .accessoryRenamed(accessoryID: "a1", name: nil))
        #expect(try await onDisk(dir).displayName(accessory: accessory("a1")) == "Accessory a1")

        try await db.renameHome(to: "Cottage")
        #expect(await events.next() == .homeRenamed("Cottage"))
        #expect(try await onDisk(dir).name == "Cottage")

        try await db.assign(accessoryID: "a2", toRoom: kitchen.id)
        #expect(await events.next() == .accessoryAssigned(accessoryID: "a2", room: cuisine))
        let defaultRoom = await db.home.roomForEntireHome
        try await db.removeRoom(id: kitchen.id)
        #expect(await events.next() == .accessoryAssigned(accessoryID: "a1", room: defaultRoom))
        #expect(await events.next() == .accessoryAssigned(accessoryID: "a2", room: defaultRoom))
        #expect(await events.next() == .roomRemoved(cuisine))
        let afterRemove = try await onDisk(dir)
        #expect(afterRemove.rooms.isEmpty)
        #expect(afterRemove.room(forAccessory: "a1") == defaultRoom)

        try await db.renameAccessory(id: "a2", to: "Lamp")
        _ = await events.next()
        try await db.forgetAccessory(id: "a2")
        #expect(await events.next() == .accessoryForgotten(accessoryID: "a2"))
        let afterForget = try await onDisk(dir)
        #expect(afterForget.accessoryNames["a2"] == nil)
        #expect(!afterForget.knownAccessoryIDs.contains("a2"))

        // Reloading from disk gives exactly the home in memory.
        #expect(try await onDisk(dir) == (await db.home))
        // The second stream saw the same 14 events (the first one's were checked one by one).
        var seen: [HomeEvent] = []
        for await event in other {
            seen.append(event)
            if seen.count == 14 { break }
        }
        #expect(seen.first == .roomAdded(kitchen))
        #expect(seen.last == .accessoryForgotten(accessoryID: "a2"))
    }

    @Test func noChangeMeansNoEventAndNoWrite() async throws {
        let dir = try TemporaryDirectory()
        let db = try HomeDatabase(directory: dir.url)
        let room = try await db.addRoom(named: "Hall")
        let before = try dir.bytes()
        var events = db.events().makeAsyncIterator()
        try await db.renameRoom(id: room.id, to: "Hall")
        try await db.adopt([])
        try await db.renameHome(to: Home.defaultName)
        #expect(try dir.bytes() == before)
        try await db.renameHome(to: "Next")
        #expect(await events.next() == .homeRenamed("Next"))
    }

    @Test func refusals() async throws {
        let db = HomeDatabase.inMemory()
        try await db.adopt([accessory("a")])
        let hall = try await db.addRoom(named: "Hall")
        let defaultID = await db.home.roomForEntireHome.id
        #expect(await code { () async throws(ModelError) in try await db.addRoom(named: "hall") } == "duplicate-name")
        #expect(
            await code { () async throws(ModelError) in try await db.addRoom(named: "default room") }
                == "duplicate-name")
        #expect(await code { () async throws(ModelError) in try await db.addRoom(named: "  ") } == "invalid-name")
        #expect(await code { () async throws(ModelError) in try await db.addRoom(named: "a\u{07}b") } == "invalid-name")
        #expect(
            await code { () async throws(ModelError) in try await db.renameRoom(id: defaultID, to: "HALL") }
                == "duplicate-name")
        #expect(
            await code { () async throws(ModelError) in try await db.renameRoom(id: "nope", to: "X") } == "unknown-room"
        )
        #expect(await code { () async throws(ModelError) in try await db.removeRoom(id: "nope") } == "unknown-room")
        #expect(await code { () async throws(ModelError) in try await db.removeRoom(id: defaultID) } == "default-room")
        #expect(
            await code { () async throws(ModelError) in try await db.assign(accessoryID: "a", toRoom: "nope") }
                == "unknown-room")
        #expect(
            await code { () async throws(ModelError) in try await db.assign(accessoryID: "zz", toRoom: hall.id) }
                == "unknown-accessory")
        #expect(
            await code { () async throws(ModelError) in try await db.renameAccessory(id: "zz", to: "X") }
                == "unknown-accessory")
        #expect(
            await code { () async throws(ModelError) in try await db.renameAccessory(id: "a", to: "") }
                == "invalid-name")
        #expect(
            await code { () async throws(ModelError) in try await db.renameService(accessoryID: "zz", iid: 1, to: "X") }
                == "unknown-accessory")
        #expect(
            await code { () async throws(ModelError) in try await db.forgetAccessory(id: "zz") } == "unknown-accessory")
        #expect(await code { () async throws(ModelError) in try await db.renameHome(to: "") } == "invalid-name")
        // The default room can be renamed, and then found by its new name.
        try await db.renameRoom(id: defaultID, to: "Everywhere")
        #expect(await db.home.room(named: "EVERYWHERE")?.id == defaultID)
    }

    @Test func removedAccessoriesStayOutUntilRestoredAcrossReopen() async throws {
        let dir = try TemporaryDirectory()
        do {
            let db = try HomeDatabase(directory: dir.url)
            try await db.adopt([accessory("door", room: "Garage"), accessory("plug")])
            try await db.renameAccessory(id: "door", to: "Big Door")
            try await db.removeAccessory(id: "door")
            let home = await db.home
            #expect(home.removedAccessoryIDs == ["door"])
            #expect(home.knownAccessoryIDs == ["plug"])
            #expect(home.accessoryNames["door"] == nil)
        }
        // Reopened, and the source still reports the door: it is not taken in again.
        let db = try HomeDatabase(directory: dir.url)
        try await db.adopt([accessory("door", room: "Garage"), accessory("plug")])
        #expect(await db.home.removedAccessoryIDs == ["door"])
        #expect(await db.home.assignments["door"] == nil)
        // Restored (paired again): adopted anew, into its suggested room.
        try await db.restoreAccessory(id: "door")
        try await db.adopt([accessory("door", room: "Garage")])
        let home = await db.home
        #expect(home.removedAccessoryIDs.isEmpty)
        #expect(home.room(forAccessory: "door").name == "Garage")
        await #expect(throws: ModelError.self) { try await db.removeAccessory(id: "never-seen") }
    }

    @Test func adoptionPlacesNewAccessoriesOnce() async throws {
        let db = HomeDatabase.inMemory()
        var events = db.events().makeAsyncIterator()
        try await db.adopt([accessory("door", room: "Garage"), accessory("light", room: "garage"), accessory("plug")])
        let garage = try #require(await db.home.room(named: "Garage"))
        #expect(await events.next() == .roomAdded(garage))
        #expect(await events.next() == .accessoryAssigned(accessoryID: "door", room: garage))
        #expect(await events.next() == .accessoryAssigned(accessoryID: "light", room: garage))
        let home = await db.home
        #expect(home.rooms == [garage])
        #expect(home.room(forAccessory: "plug") == home.roomForEntireHome)
        #expect(home.knownAccessoryIDs == ["door", "light", "plug"])
        #expect(home.accessoryIDs(inRoom: garage.id) == ["door", "light"])

        // Idempotent.
        try await db.adopt([accessory("door", room: "Garage"), accessory("plug", room: "Porch")])
        #expect(await db.home == home)

        // Moved by the user: stays moved.
        let shed = try await db.addRoom(named: "Shed")
        _ = await events.next()
        try await db.assign(accessoryID: "door", toRoom: shed.id)
        _ = await events.next()
        try await db.adopt([accessory("door", room: "Garage")])
        #expect(await db.home.room(forAccessory: "door") == shed)

        // Forgotten, then seen again: adopted anew.
        try await db.forgetAccessory(id: "door")
        _ = await events.next()
        try await db.adopt([accessory("door", room: "Garage")])
        #expect(await events.next() == .accessoryAssigned(accessoryID: "door", room: garage))
    }

    @Test func inMemoryCopyStartsFromTheGivenHomeAndStaysApart() async throws {
        let dir = try TemporaryDirectory()
        let db = try HomeDatabase(directory: dir.url)
        try await db.addRoom(named: "Porch")
        let before = try dir.bytes()
        let preview = HomeDatabase.inMemory(copying: await db.home)
        #expect(await preview.home == (await db.home))
        try await preview.addRoom(named: "Attic")
        #expect(await preview.home.rooms.map(\.name) == ["Porch", "Attic"])
        #expect(await db.home.rooms.map(\.name) == ["Porch"])
        #expect(try dir.bytes() == before)
    }

    @Test func homeLookups() {
        let kitchen = Room(id: "k", name: "Kitchen")
        let home = Home(
            id: "h", rooms: [kitchen], roomForEntireHome: Room(id: "d", name: "Default Room"),
            assignments: ["a": "k", "b": "gone"])
        #expect(home.room(forAccessory: "a") == kitchen)
        #expect(home.room(forAccessory: "b").id == "d")
        #expect(home.room(forAccessory: "unassigned").id == "d")
        #expect(home.room(named: "KITCHEN") == kitchen)
        #expect(home.room(named: "default room")?.id == "d")
        #expect(home.room(named: "Attic") == nil)
    }

    // MARK: The file

    @Test func corruptFileIsRefusedAndLeftAsItIs() async throws {
        for text in [
            "{not json", "", "[1,2]", #"{"version": 1}"#, #"{"version": 1, "primaryHomeID": "x", "homes": []}"#,
            #"{"version": "1"}"#,
        ] {
            let dir = try TemporaryDirectory()
            try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
            try Data(text.utf8).write(to: dir.databaseFile)
            do {
                _ = try HomeDatabase(directory: dir.url)
                Issue.record("opened a corrupt file: \(text)")
            } catch {
                #expect(error.code.rawValue == "corrupt-database", "\(text)")
                #expect(error.message.contains(dir.databaseFile.path))
            }
            #expect(try dir.bytes() == Data(text.utf8))
        }
    }

    @Test func newerVersionIsRefusedAndLeftAsItIs() async throws {
        let dir = try TemporaryDirectory()
        try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
        let text = #"{"version": 3, "whatever": "the future holds"}"#
        try Data(text.utf8).write(to: dir.databaseFile)
        #expect(throws: ModelError.self) { try HomeDatabase(directory: dir.url) }
        do { _ = try HomeDatabase(directory: dir.url, exclusive: false) } catch {
            #expect(error.code.rawValue == "unsupported-version")
            #expect(error.message.contains(dir.databaseFile.path))
        }
        #expect(try dir.bytes() == Data(text.utf8))
    }

    @Test func reloadEqualsAfterReopen() async throws {
        let dir = try TemporaryDirectory()
        var saved: Home
        do {
            let db = try HomeDatabase(directory: dir.url, exclusive: false)
            try await db.adopt([accessory("x", room: "Study"), accessory("y")])
            try await db.renameAccessory(id: "y", to: "Fan")
            try await db.renameService(accessoryID: "x", iid: 8, to: "Desk")
            saved = await db.home
        }
        let reopened = try HomeDatabase(directory: dir.url)
        #expect(await reopened.home == saved)
    }

    /// A write interrupted before any of its steps (and between every chunk of bytes) leaves a
    /// file that loads as the old home or the new one, never a broken one.
    @Test func interruptedWriteLeavesOldOrNew() async throws {
        // How many steps one change takes, with 16-byte chunks.
        let probeDir = try TemporaryDirectory()
        _ = try await HomeDatabase(directory: probeDir.url, exclusive: false).addRoom(named: "Old")
        let probe = CrashSwitch(crashAt: nil)
        try await HomeDatabase(
            directory: probeDir.url, exclusive: false, writer: AtomicFileWriter(chunkSize: 16, hook: probe.hook)
        )
        .addRoom(named: "New")
        let total = probe.steps.count
        let renameAt = try #require(probe.steps.firstIndex(of: .rename))
        #expect(total > 20) // many byte chunks, so crashes land mid-file too

        var sawLeftover = false
        for crashAt in 0...total {
            let dir = try TemporaryDirectory()
            let old = try await HomeDatabase(directory: dir.url, exclusive: false).addRoom(named: "Old")
            let crash = CrashSwitch(crashAt: crashAt)
            let db = try HomeDatabase(
                directory: dir.url, exclusive: false, writer: AtomicFileWriter(chunkSize: 16, hook: crash.hook))
            var events = db.events().makeAsyncIterator()
            let failed = await code { () async throws(ModelError) in _ = try await db.addRoom(named: "New") } != nil
            #expect(failed == (crashAt < total))
            if failed {
                // The change did not happen in memory either, and no event was sent.
                #expect(await db.home.rooms == [old])
                try await db.renameHome(to: "Probe")
                #expect(await events.next() == .homeRenamed("Probe"))
            }
            sawLeftover = sawLeftover || dir.entries().contains { $0.hasPrefix("home.json.tmp-") }
            // "Restart": the file on disk is old or new, whole.
            let survivor = try HomeDatabase(directory: dir.url)
            let names = await survivor.home.rooms.map(\.name)
            if crashAt <= renameAt {
                #expect(names == ["Old"], "crash at step \(crashAt) of \(total)")
            } else {
                #expect(names == ["Old", "New"], "crash at step \(crashAt) of \(total)")
            }
            // The exclusive open swept up the temporary a crashed writer left.
            #expect(!dir.entries().contains { $0.hasPrefix("home.json.tmp-") })
        }
        #expect(sawLeftover)
    }

    // MARK: Locking

    @Test func secondWriterIsLockedOut() async throws {
        let dir = try TemporaryDirectory()
        let owner = try HomeDatabase(directory: dir.url)
        #expect(
            throws: ModelError(
                code: .locked,
                message:
                    "the home database is in use by another process (\(dir.url.appendingPathComponent("home.lock").path) is locked)"
            )
        ) {
            try HomeDatabase(directory: dir.url)
        }
        // A non-exclusive reader opens fine but cannot change anything while the owner runs.
        let reader = try HomeDatabase(directory: dir.url, exclusive: false)
        #expect(await reader.home == (await owner.home))
        #expect(await code { () async throws(ModelError) in _ = try await reader.addRoom(named: "X") } == "locked")
        try await owner.addRoom(named: "Y")
        try await reader.reload()
        #expect(await reader.home.rooms.map(\.name) == ["Y"])
    }

    @Test func nonExclusiveWritersMergeThroughTheFile() async throws {
        let dir = try TemporaryDirectory()
        let a = try HomeDatabase(directory: dir.url, exclusive: false)
        let b = try HomeDatabase(directory: dir.url, exclusive: false)
        try await a.addRoom(named: "A")
        try await b.addRoom(named: "B") // re-reads under the lock, so A's room survives
        #expect(try await onDisk(dir).rooms.map(\.name) == ["A", "B"])
        #expect(await code { () async throws(ModelError) in _ = try await b.addRoom(named: "a") } == "duplicate-name")
    }

    /// Another process (util-linux `flock`, the same flock(2) lock) holds the lock.
    @Test
    func lockHeldByAnotherProcess() async throws {
        let dir = try TemporaryDirectory()
        try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
        // `-o`: the command does not inherit the lock, so killing flock releases it.
        let holder = try ChildProcess(
            "/usr/bin/flock",
            ["-n", "-o", dir.url.appendingPathComponent("home.lock").path, "/bin/sh", "-c", "echo ready; sleep 30"])
        try await holder.waitForOutput(containing: "ready")
        #expect(throws: ModelError.self) { try HomeDatabase(directory: dir.url) }
        do { _ = try HomeDatabase(directory: dir.url) } catch { #expect(error.code.rawValue == "locked") }
        holder.signal(SIGKILL)
        _ = try await holder.waitForExit()
        _ = try HomeDatabase(directory: dir.url)
    }
}
