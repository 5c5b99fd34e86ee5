import Foundation
import Gateway
import HomeModel
import TestSupport
import XCTest

/// The list of homes managed over MQTT with two homes served at once on one rig (the second by
/// the gateway's `HomesService`, on `home-cabin/`): an accessory moved to the other home and
/// back by its name, the answers' counts as they are after each move, and `homes` counting only
/// the accessories a home has now (Home Assistant issue 43, item 10).
final class HomesManagementTests: RigTestCase {
    /// `op` on the gateway's base topic, answered `ok`; its `data`.
    @discardableResult
    func operation(
        _ gw: RiggedGateway, _ op: String, _ fields: [String: JSONValue] = [:], line: UInt = #line
    ) async throws -> JSONValue {
        let answer = try await gw.request(
            "home/$gateway/request/\(op)", JSONValue.object(fields).encoded(), answer: "home/$gateway/response/\(op)")
        XCTAssertEqual(answer["status"], "ok", "\(op) \(fields): \(answer)", line: line)
        return answer["data"] ?? .null
    }

    /// Each home's accessory count, as `homes` answers, by name.
    func counts(_ gw: RiggedGateway) async throws -> [String: Int] {
        let homes = try await operation(gw, "homes").arrayValue ?? []
        var out: [String: Int] = [:]
        for home in homes {
            out[home["name"]?.stringValue ?? "?"] = home["accessories"]?.intValue
        }
        return out
    }

    func testAnAccessoryMovesToAnotherHomeAndBackByNameAndTheCountsAreAfterTheMove() async throws {
        await onEveryRig { gw in
            let all = await gw.home.accessories().count
            let door = try await gw.accessoryID(named: "Garage Door Opener")
            try await withCabin(gw) { cabin in
                let before = try await counts(gw)
                XCTAssertEqual(before, [Home.defaultName: all, "Cabin": 0])

                // To the cabin by the name it has in the first home; the answer counts it there.
                let moved = try await operation(
                    gw, "accessory/home", ["accessory": "garage door opener", "home": "Cabin"])
                XCTAssertEqual(moved["id"], .string(door))
                XCTAssertEqual(moved["home"]?["name"], "Cabin")
                XCTAssertEqual(moved["home"]?["accessories"]?.intValue, 1)
                XCTAssertEqual(moved["from"]?["name"], .string(Home.defaultName))
                XCTAssertEqual(moved["from"]?["accessories"]?.intValue, all - 1)
                try await cabin.seen.waitFor("the door in the cabin", timeout: 10) {
                    $0.topic.hasPrefix("home-cabin/") && $0.topic.contains("/garage-door-opener/")
                }
                let inCabin = try await counts(gw)
                XCTAssertEqual(inCabin, [Home.defaultName: all - 1, "Cabin": 1])

                // The cabin's own request topic does not change the list of homes: it says where to.
                let refused = try await cabinRequest(
                    gw, cabin.seen, "accessory/home",
                    ["accessory": "Garage Door Opener", "home": .string(Home.defaultName)])
                XCTAssertEqual(refused["code"], "insufficient-privileges")
                XCTAssertEqual(
                    refused["message"],
                    "accessory/home changes the list of homes: send it to home/$gateway/request/accessory/home")
                // But it renames the accessory it holds; that name goes with it.
                let renamed = try await cabinRequest(
                    gw, cabin.seen, "accessory/rename", ["accessory": "Garage Door Opener", "name": "Big Door"])
                XCTAssertEqual(renamed["status"], "ok", "\(renamed)")

                // Back by the name it has in the cabin, on the base topic that holds it not.
                let back = try await operation(
                    gw, "accessory/home", ["accessory": "Big Door", "home": .string(Home.defaultName)])
                XCTAssertEqual(back["id"], .string(door))
                XCTAssertEqual(back["home"]?["accessories"]?.intValue, all)
                XCTAssertEqual(back["from"]?["name"], "Cabin")
                XCTAssertEqual(back["from"]?["accessories"]?.intValue, 0)
                try await gw.next("home/$gateway/event") { $0.contains("accessory-joined-home") }
                let tree = try await operation(gw, "tree")
                XCTAssertTrue(tree.encoded().contains("\"Big Door\""), "its name came along: \(tree)")
                let afterBack = try await counts(gw)
                XCTAssertEqual(afterBack, before)

                // And again there and back by the name it has now, as the user sees it.
                try await operation(gw, "accessory/home", ["accessory": "Big Door", "home": "Cabin"])
                try await operation(gw, "accessory/home", ["accessory": "big door", "home": .string(Home.defaultName)])
                let afterRoundTrip = try await counts(gw)
                XCTAssertEqual(afterRoundTrip, before)
                // A name no home's accessory has is still unknown.
                let unknown = try await gw.request(
                    "home/$gateway/request/accessory/home", #"{"accessory": "No Such Door", "home": "Cabin"}"#,
                    answer: "home/$gateway/response/accessory/home")
                XCTAssertEqual(unknown["code"], "unknown-accessory", "\(unknown)")
            }
        }
    }

    func testHomesCountsOnlyTheAccessoriesAHomeHasNow() async throws {
        await onEveryRig { gw in
            let all = await gw.home.accessories().count
            try await withCabin(gw) { cabin in
                try await operation(gw, "accessory/home", ["accessory": "Office Fan Switch", "home": "Cabin"])
                let moved = try await counts(gw)
                XCTAssertEqual(moved, [Home.defaultName: all - 1, "Cabin": 1])

                // Removed from the home by the user: out of the count.
                try await operation(gw, "accessory/remove", ["accessory": "Front Door Lock"])
                let afterRemove = try await counts(gw)
                XCTAssertEqual(afterRemove, [Home.defaultName: all - 2, "Cabin": 1])

                // Gone from its source (a simulated accessory's file deleted), in either home: the
                // database keeps its room and names for its return, but the home holds it not.
                gw.seen.clear()
                let coffee = try await gw.accessoryID(named: "Coffee Maker Outlet")
                let fan = try await gw.accessoryID(named: "Office Fan Switch")
                let removed = await gw.home.remove(accessoryID: coffee)
                let removedFan = await gw.home.remove(accessoryID: fan)
                XCTAssertTrue(removed && removedFan)
                try await gw.next("home/$gateway/event") { $0.contains(coffee) }
                let afterGone = try await counts(gw)
                XCTAssertEqual(afterGone, [Home.defaultName: all - 3, "Cabin": 0])
                let known = await gw.database.homes.map(\.knownAccessoryIDs).joined()
                XCTAssertTrue(known.contains(coffee), "the database still knows it, for its return")
            }
        }
    }

    /// Runs `body` with a second home, Cabin, served on `home-cabin/` (online), and a client
    /// subscribed to all of it since before it was added.
    func withCabin(
        _ gw: RiggedGateway,
        _ body: (_ cabin: (seen: MessageCollector, close: @Sendable () async -> Void)) async throws -> Void
    ) async throws {
        let cabin = try await gw.subscriber("home-cabin/#")
        do {
            try await operation(gw, "home/add", ["name": "Cabin"])
            try await cabin.seen.waitFor("the cabin online", timeout: 10) {
                $0.topic == "home-cabin/$gateway/status" && $0.string == "online"
            }
            try await body(cabin)
        } catch {
            await cabin.close()
            throw error
        }
        await cabin.close()
    }

    /// `op` on the cabin's request topic; its answer on the cabin's response topic.
    func cabinRequest(
        _ gw: RiggedGateway, _ seen: MessageCollector, _ op: String, _ fields: [String: JSONValue]
    ) async throws -> [String: JSONValue] {
        seen.clear()
        try await gw.publish("home-cabin/$gateway/request/\(op)", JSONValue.object(fields).encoded())
        let message = try await seen.waitFor("\(op) answered in the cabin", timeout: 10) {
            $0.topic == "home-cabin/$gateway/response/\(op)"
        }
        return try XCTUnwrap(JSONValue(parsing: message.payload).objectValue, message.string)
    }
}
