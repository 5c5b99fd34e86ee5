import Foundation
import Testing
import TestSupport
@testable import HomeModel

private func accessory(_ id: String, room: String? = nil) -> Accessory {
    Accessory(
        id: id, name: "Accessory \(id)",
        services: [AccessoryService(iid: 8, type: StandardUUID.longForm("43"), name: "Light", characteristics: [])],
        suggestedRoom: room)
}

private func code(_ body: () async throws(ModelError) -> Void) async -> String? {
    do { try await body(); return nil } catch { return error.code.rawValue }
}

/// Several homes in one database: each served on its own base topic, each accessory in one home.
@Suite struct HomesTests {
    @Test func aNewHomeGetsItsOwnBaseTopicAndEveryHomeHearsOfIt() async throws {
        let dir = try TemporaryDirectory()
        let db = try HomeDatabase(directory: dir.url)
        var events = db.events().makeAsyncIterator()
        let cabin = try await db.addHome(named: "The Cabin", baseTopic: nil, gatewayBase: "home")
        #expect(cabin.baseTopic == "home-the-cabin")
        #expect(await events.next() == .homes(.added(cabin)))
        let office = try await db.addHome(named: "Office", baseTopic: "work/office", gatewayBase: "home")
        #expect(office.baseTopic == "work/office")

        // Names are unique; base topics never overlap another home's, the first home's included.
        #expect(
            await code { () async throws(ModelError) in
                _ = try await db.addHome(named: "the cabin", baseTopic: nil, gatewayBase: "home")
            } == "duplicate-name")
        for clash in ["home", "home/garage", "work", "work/office/desk", "home-the-cabin"] {
            #expect(
                await code { () async throws(ModelError) in
                    _ = try await db.addHome(named: "X \(clash)", baseTopic: clash, gatewayBase: "home")
                }
                    == "invalid-base-topic", "\(clash)")
        }
        for (index, bad) in [
            "", "a/+/b", "a/#", "$SYS/x", "/lead", "trail/", "a//b", "a b", "x\ntopic readwrite #", "tab\there",
        ].enumerated() {
            #expect(
                await code { () async throws(ModelError) in
                    _ = try await db.addHome(named: "Y \(index)", baseTopic: bad, gatewayBase: "home")
                }
                    == "invalid-base-topic", "\(bad)")
        }
        // Nor the gateway's other prefixes (Home Assistant's discovery, Homie).
        #expect(
            await code { () async throws(ModelError) in
                _ = try await db.addHome(
                    named: "HA", baseTopic: "homeassistant/x", gatewayBase: "home", reserved: ["homeassistant"])
            } == "invalid-base-topic")
        // A second home of the same name's slug is numbered rather than refused.
        let second = try await db.addHome(named: "The-Cabin!", baseTopic: nil, gatewayBase: "home")
        #expect(second.baseTopic == "home-the-cabin-2")

        let reopened = try HomeDatabase(directory: dir.url, exclusive: false)
        #expect(await reopened.homes.map(\.name) == ["My Home", "The Cabin", "Office", "The-Cabin!"])
        #expect(await reopened.homes.first?.baseTopic == nil)
    }

    @Test func eachAccessoryIsInOneHomeAndMovesWithItsNames() async throws {
        let db = HomeDatabase.inMemory()
        let cabin = try await db.addHome(named: "Cabin", baseTopic: nil, gatewayBase: "home")
        let first = db.view(homeID: db.baseHomeID)
        let second = db.view(homeID: cabin.id)
        var firstEvents = first.events().makeAsyncIterator()
        var secondEvents = second.events().makeAsyncIterator()

        // New accessories go to the primary home unless their source is assigned elsewhere.
        try await db.assignSource(prefix: "hap:AA:", toHome: cabin.id)
        #expect(first.serves(accessoryID: "sim:lamp"))
        #expect(!second.serves(accessoryID: "sim:lamp"))
        #expect(second.serves(accessoryID: "hap:AA:1"))
        try await first.adopt([accessory("sim:lamp", room: "Kitchen"), accessory("hap:AA:1")])
        try await second.adopt([accessory("sim:lamp"), accessory("hap:AA:1", room: "Porch")])
        #expect(await first.home.knownAccessoryIDs == ["sim:lamp"])
        #expect(await second.home.knownAccessoryIDs == ["hap:AA:1"])
        #expect(await firstEvents.next() == .roomAdded(await first.home.rooms[0]))
        _ = await firstEvents.next() // assigned to Kitchen
        _ = await secondEvents.next() // Porch added
        _ = await secondEvents.next() // assigned to Porch

        // Moved: names go along, and the room where the other home has one of that name.
        try await first.renameAccessory(id: "sim:lamp", to: "Reading Lamp")
        try await first.renameService(accessoryID: "sim:lamp", iid: 8, to: "Bulb")
        try await second.addRoom(named: "kitchen")
        _ = await firstEvents.next()
        _ = await firstEvents.next()
        _ = await secondEvents.next()
        try await first.moveAccessory(id: "sim:lamp", toHome: cabin.id)
        #expect(await firstEvents.next() == .accessoryLeft(accessoryID: "sim:lamp", toHome: cabin.id))
        #expect(await secondEvents.next() == .accessoryJoined(accessoryID: "sim:lamp"))
        let moved = await second.home
        #expect(moved.knownAccessoryIDs == ["hap:AA:1", "sim:lamp"])
        #expect(moved.accessoryNames["sim:lamp"] == "Reading Lamp")
        #expect(moved.serviceNames["sim:lamp#8"] == "Bulb")
        #expect(moved.room(forAccessory: "sim:lamp").name == "kitchen")
        let left = await first.home
        #expect(!left.holds(accessoryID: "sim:lamp") && left.accessoryNames.isEmpty && left.serviceNames.isEmpty)
        #expect(second.serves(accessoryID: "sim:lamp") && !first.serves(accessoryID: "sim:lamp"))
        #expect(
            await code { () async throws(ModelError) in
                _ = try await first.moveAccessory(id: "sim:nothing", toHome: cabin.id)
            } == "unknown-accessory")
    }

    @Test func aHomeWithAccessoriesIsRemovedOnlyWhenToldWhereTheyGo() async throws {
        let db = HomeDatabase.inMemory()
        let baseID = db.baseHomeID
        let cabin = try await db.addHome(named: "Cabin", baseTopic: nil, gatewayBase: "home")
        let second = db.view(homeID: cabin.id)
        try await db.assignSource(prefix: "sim:cabin", toHome: cabin.id)
        try await second.adopt([accessory("sim:cabin-light")])

        #expect(
            await code { () async throws(ModelError) in _ = try await db.removeHome(id: cabin.id, movingTo: nil) }
                == "home-not-empty")
        #expect(
            await code { () async throws(ModelError) in _ = try await db.removeHome(id: baseID, movingTo: cabin.id) }
                == "protected-home")
        try await db.setPrimary(homeID: cabin.id)
        #expect(
            await code { () async throws(ModelError) in _ = try await db.removeHome(id: cabin.id, movingTo: baseID) }
                == "protected-home")
        try await db.setPrimary(homeID: baseID)

        var events = db.view(homeID: baseID).events().makeAsyncIterator()
        try await db.removeHome(id: cabin.id, movingTo: baseID)
        #expect(await events.next() == .accessoryJoined(accessoryID: "sim:cabin-light"))
        guard case .homes(.removed(let removed)) = await events.next() else {
            Issue.record("no home-removed event")
            return
        }
        #expect(removed.id == cabin.id && removed.knownAccessoryIDs == ["sim:cabin-light"])
        let home = await db.home
        #expect(await db.homes.count == 1)
        #expect(home.knownAccessoryIDs == ["sim:cabin-light"])
        #expect(home.sourcePrefixes == ["sim:cabin"])
    }

    @Test func thePrimaryFlagMovesWithoutMovingTopics() async throws {
        let dir = try TemporaryDirectory()
        let db = try HomeDatabase(directory: dir.url)
        let first = try #require(await db.homes.first)
        let cabin = try await db.addHome(named: "Cabin", baseTopic: nil, gatewayBase: "home")
        var events = db.view(homeID: cabin.id).events().makeAsyncIterator()
        try await db.setPrimary(homeID: cabin.id)
        #expect(await events.next() == .homes(.primaryChanged(cabin, previous: first)))
        let reopened = try HomeDatabase(directory: dir.url, exclusive: false)
        #expect(await reopened.primaryHomeID == cabin.id)
        #expect(await reopened.home.id == cabin.id) // a view opened without a home follows the primary one
        #expect(await reopened.homes.map(\.baseTopic) == [nil, "home-cabin"])
        #expect(reopened.baseHomeID == first.id)
    }

    @Test func aVersionOneDatabaseReadsAsOneHomeOnTheGatewaysBaseTopic() async throws {
        let dir = try TemporaryDirectory()
        try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
        let text = """
            {"version": 1, "primaryHomeID": "H", "homes": [{"id": "H", "name": "Flat",
             "roomForEntireHome": {"id": "D", "name": "Default Room"}, "rooms": [{"id": "K", "name": "Kitchen"}],
             "assignments": {"sim:lamp": "K"}, "knownAccessoryIDs": ["sim:lamp"]}]}
            """
        try Data(text.utf8).write(to: dir.url.appendingPathComponent(HomeDatabase.fileName))
        let file = dir.url.appendingPathComponent(HomeDatabase.fileName)
        // The state format's migration rewrites it as version 2, once.
        try HomeDatabase.upgradeFile(in: dir.url)
        let upgraded = try Data(contentsOf: file)
        #expect(try JSONValue(parsing: Array(upgraded))["version"] == 2)
        try HomeDatabase.upgradeFile(in: dir.url)
        #expect(try Data(contentsOf: file) == upgraded)
        let db = try HomeDatabase(directory: dir.url)
        let home = await db.home
        #expect(await db.homes.count == 1)
        #expect(home.name == "Flat" && home.baseTopic == nil && home.sourcePrefixes.isEmpty)
        #expect(home.room(forAccessory: "sim:lamp").name == "Kitchen")
        #expect(db.serves(accessoryID: "sim:anything"))
        try await db.addRoom(named: "Hall")
        let json = try JSONValue(
            parsing: Array(try Data(contentsOf: dir.url.appendingPathComponent(HomeDatabase.fileName))))
        #expect(json["version"] == 2)
    }
}
