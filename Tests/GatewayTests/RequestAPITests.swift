import Foundation
import Gateway
import HomeModel
import Logging
import MQTT
import ServiceLifecycle
import Simulator
import TestSupport
import TopicAPI
import XCTest

/// `home/$gateway/request/<op>` → `home/$gateway/response/<op>`, each op end to end through a
/// real broker: its answer, its event, its topic changes, and no ghost retained topics after it.
final class RequestAPITests: RigTestCase {
    let garage = "home/garage/garage-door-opener"

    // MARK: - Rooms

    func testRoomAddMoveRenameRemove() async throws {
        await onEveryRig { gw in

            let added = try await call(gw, "room/add", #"{"name": "Workshop", "id": "r-1"}"#)
            XCTAssertEqual(added["status"], .string("ok"), "\(added)")
            XCTAssertEqual(added["id"], .string("r-1"), "the request's id is echoed")
            XCTAssertEqual(added["data"]?["name"], .string("Workshop"))
            let roomID = try XCTUnwrap(added["data"]?["id"]?.stringValue)
            let roomAdded = try await event(gw, "room-added") { $0["room"]?["name"] == .string("Workshop") }
            XCTAssertEqual(roomAdded["room"]?["id"], .string(roomID))
            let rooms = await gw.database.home.rooms
            XCTAssertTrue(rooms.contains { $0.id == roomID && $0.name == "Workshop" })

            // An accessory into the new room: its topics move.
            let moved = try await call(
                gw, "accessory/move", #"{"accessory": "Garage Door Opener", "room": "workshop"}"#)
            XCTAssertEqual(moved["status"], .string("ok"), "\(moved)")
            XCTAssertEqual(moved["data"]?["room"], .string("Workshop"))
            let movedEvent = try await event(gw, "accessory-moved")
            XCTAssertEqual(movedEvent["old-topic"], .string(garage))
            XCTAssertEqual(movedEvent["accessory"]?["topic"], .string("home/workshop/garage-door-opener"))
            try await assertBrokerMatchesTree(
                gw, gone: "\(garage)/", present: "home/workshop/garage-door-opener/garage-door/target-door-state/state")

            // Renaming the room renames its topic level.
            let renamed = try await call(gw, "room/rename", #"{"room": "Workshop", "name": "Shed"}"#)
            XCTAssertEqual(renamed["status"], .string("ok"), "\(renamed)")
            XCTAssertEqual(renamed["data"]?["old-name"], .string("Workshop"))
            let roomRenamed = try await event(gw, "room-renamed")
            XCTAssertEqual(roomRenamed["old-name"], .string("Workshop"))
            XCTAssertEqual(roomRenamed["room"]?["name"], .string("Shed"))
            try await assertBrokerMatchesTree(
                gw, gone: "home/workshop/", present: "home/shed/garage-door-opener/garage-door/target-door-state/state")

            // Removing it sends its accessories to the default room.
            let removed = try await call(gw, "room/remove", #"{"room": "Shed"}"#)
            XCTAssertEqual(removed["status"], .string("ok"), "\(removed)")
            let roomRemoved = try await event(gw, "room-removed")
            XCTAssertEqual(roomRemoved["room"]?["id"], .string(roomID))
            let back = try await event(gw, "accessory-moved")
            XCTAssertEqual(back["old-topic"], .string("home/shed/garage-door-opener"))
            XCTAssertEqual(back["accessory"]?["room"], .string(Home.defaultRoomName))
            try await assertBrokerMatchesTree(
                gw, gone: "home/shed/",
                present: "home/default-room/garage-door-opener/garage-door/target-door-state/state")
            let home = await gw.database.home
            XCTAssertFalse(home.rooms.contains { $0.id == roomID })
        }
    }

    // MARK: - Accessories and services

    func testAccessoryRenameResetServiceRenameIdentifyRemove() async throws {
        await onEveryRig { gw in
            let doorID = try await gw.accessoryID(named: "Garage Door Opener")

            // By topic (without the base), to a new name.
            var answer = try await call(
                gw, "accessory/rename", #"{"accessory": "garage/garage-door-opener", "name": "Kilgo Door"}"#)
            XCTAssertEqual(answer["status"], .string("ok"), "\(answer)")
            XCTAssertEqual(answer["data"]?["id"], .string(doorID))
            var renamed = try await event(gw, "accessory-renamed")
            XCTAssertEqual(renamed["old-topic"], .string(garage))
            XCTAssertEqual(renamed["accessory"]?["topic"], .string("home/garage/kilgo-door"))
            try await assertBrokerMatchesTree(
                gw, gone: "\(garage)/", present: "home/garage/kilgo-door/garage-door/target-door-state/state")
            let info = try await gw.retained()["home/garage/kilgo-door/$info"]
            XCTAssertEqual(try JSONValue(parsing: XCTUnwrap(info))["name"], .string("Kilgo Door"))

            // By id, with null: its own name again.
            answer = try await call(gw, "accessory/rename", #"{"accessory": "\#(doorID)", "name": null}"#)
            XCTAssertEqual(answer["data"]?["name"], .string("Garage Door Opener"), "\(answer)")
            renamed = try await event(gw, "accessory-renamed")
            XCTAssertEqual(renamed["accessory"]?["topic"], .string(garage))
            try await assertBrokerMatchesTree(
                gw, gone: "home/garage/kilgo-door/", present: "\(garage)/garage-door/target-door-state/state")

            // A service by its slug.
            answer = try await call(
                gw, "service/rename",
                #"{"accessory": "Garage Door Opener", "service": "garage-light", "name": "Work Light"}"#)
            XCTAssertEqual(answer["status"], .string("ok"), "\(answer)")
            XCTAssertEqual(answer["data"]?["name"], .string("Work Light"))
            let serviceEvent = try await event(gw, "service-renamed")
            XCTAssertEqual(serviceEvent["accessory"], .string(doorID))
            XCTAssertEqual(serviceEvent["name"], .string("Work Light"))
            try await assertBrokerMatchesTree(
                gw, gone: "\(garage)/garage-light/", present: "\(garage)/work-light/brightness/state")

            // Identify reaches the accessory.
            answer = try await call(gw, "accessory/identify", #"{"accessory": "\#(garage)"}"#)
            XCTAssertEqual(answer["status"], .string("ok"), "\(answer)")
            let identified = await gw.home.identifyRequests()
            XCTAssertEqual(identified, [doorID])

            // Removing an accessory from the home takes its topics away.
            let lampID = try await gw.accessoryID(named: "Bedroom Lamp")
            answer = try await call(gw, "accessory/remove", #"{"accessory": "Bedroom Lamp"}"#)
            XCTAssertEqual(answer["status"], .string("ok"), "\(answer)")
            XCTAssertEqual(answer["data"]?["id"], .string(lampID))
            let removed = try await event(gw, "accessory-removed")
            XCTAssertEqual(removed["accessory"]?["id"], .string(lampID))
            XCTAssertEqual(removed["accessory"]?["topic"], .string("home/bedroom/bedroom-lamp"))
            try await assertBrokerMatchesTree(gw, gone: "home/bedroom/bedroom-lamp/", present: "\(garage)/$info")
            let tree = try await call(gw, "tree", "")
            XCTAssertFalse(tree.encoded.contains(lampID), "the removed accessory is not in the tree")
            // The removal did not put it anywhere else first.
            XCTAssertFalse(
                gw.seen.elements.contains {
                    $0.topic.hasPrefix("home/default-room/bedroom-lamp") && !$0.payload.isEmpty
                })
        }
    }

    // MARK: - Scope

    func testScopeGetSetIsAppliedAndPersisted() async throws {
        await onEveryRig { gw in
            let initial = try await call(gw, "scope/get", "")
            XCTAssertEqual(initial["status"], .string("ok"), "\(initial)")
            XCTAssertEqual(initial["data"]?["user-interactive-only"], .bool(true))

            let set = try await call(
                gw, "scope/set", #"{"scope": {"manufacturers": {"deny": ["Kilgo Devices, Inc."]}}, "id": 9}"#)
            XCTAssertEqual(set["status"], .string("ok"), "\(set)")
            XCTAssertEqual(set["id"], .int(9))
            XCTAssertEqual(set["data"]?["manufacturers"]?["deny"], .array([.string("Kilgo Devices, Inc.")]))
            _ = try await event(gw, "scope-changed")
            let left = try await event(gw, "accessory-left-scope")
            XCTAssertEqual(left["accessory"]?["topic"], .string(garage))
            try await assertBrokerMatchesTree(gw, gone: "\(garage)/", present: "home/bedroom/bedroom-lamp/$info")

            let after = try await call(gw, "scope/get", "")
            XCTAssertEqual(after["data"], set["data"])
            // A scope left out of a partial document keeps its default.
            XCTAssertEqual(after["data"]?["user-interactive-only"], .bool(true))

            // A new gateway on the same state directory starts with the stored scope.
            await gw.stopGateway()
            // The stopped gateway's database lock lives as long as the rig, so the new gateway
            // gets a copy of the state directory's files.
            let copy = try TemporaryDirectory(prefix: "homemqtt-state-copy")
            for file in [HomeDatabase.fileName, "scope.json"] {
                try FileManager.default.copyItem(atPath: gw.state.file(file), toPath: copy.file(file))
            }
            let second = try await SecondGateway.start(broker: gw.broker, statePath: copy.path)
            do {
                let reply = try await call(gw, "scope/get", "")
                XCTAssertEqual(reply["data"], set["data"], "\(reply)")
                let retained = try await gw.retained()
                XCTAssertFalse(retained.keys.contains { $0.hasPrefix("\(garage)/") }, "\(retained.keys.sorted())")
                XCTAssertNotNil(retained["home/bedroom/bedroom-lamp/$info"])
            } catch {
                await second.stop()
                throw error
            }
            await second.stop()
        }
    }

    // MARK: - tree, republish, health

    func testTreeRepublishHealth() async throws {
        await onEveryRig { gw in

            let tree = try await call(gw, "tree", #"{"id": "t"}"#)
            XCTAssertEqual(tree["status"], .string("ok"), "\(tree)")
            let rooms = try XCTUnwrap(tree["data"]?["rooms"]?.arrayValue)
            let garageRoom = try XCTUnwrap(rooms.first { $0["name"] == .string("Garage") })
            let door = try XCTUnwrap(
                garageRoom["accessories"]?.arrayValue?.first { $0["name"] == .string("Garage Door Opener") })
            XCTAssertEqual(door["topic"], .string(garage))
            try await assertBrokerMatchesTree(gw)

            let health = try await call(gw, "health", "")
            XCTAssertEqual(health["status"], .string("ok"), "\(health)")
            let data = try XCTUnwrap(health["data"])
            XCTAssertGreaterThan(data["uptime"]?.doubleValue ?? -1, 0)
            XCTAssertEqual(data["broker"]?["state"], .string("connected"))
            XCTAssertFalse(data["sources"]?.arrayValue?.isEmpty ?? true)
            let accessoryCount = rooms.reduce(0) { $0 + ($1["accessories"]?.arrayValue?.count ?? 0) }
            XCTAssertEqual(data["counts"]?["accessories"]?.intValue, accessoryCount)
            XCTAssertGreaterThan(data["counts"]?["characteristics"]?.intValue ?? 0, 0)

            // A retained topic lost on the broker comes back with republish.
            let state = "\(garage)/garage-door/target-door-state/state"
            try await gw.publish(state, "", retain: true)
            try await waitUntil("\(state) cleared behind the gateway's back") {
                try await gw.retained()[state] == nil
            }
            let republished = try await call(gw, "republish", "")
            XCTAssertEqual(republished["status"], .string("ok"), "\(republished)")
            XCTAssertGreaterThan(republished["data"]?["topics"]?.intValue ?? 0, 0)
            try await waitUntil("\(state) republished") { try await gw.retained()[state] == "1" }
            try await assertBrokerMatchesTree(gw)
        }
    }

    // MARK: - Bad requests

    func testEveryKindOfBadRequestIsAnswered() async throws {
        await onEveryRig { gw in
            let roomsBefore = await gw.database.home.allRooms
            let cases: [(op: String, payload: String, code: String)] = [
                ("no/such-op", "{}", "unknown-op"),
                ("room/add", #"{"name": "#, "invalid-json"),
                ("room/add", "[1, 2]", "invalid-json"),
                ("room/add", #""Workshop""#, "invalid-json"),
                ("room/add", "{}", "missing-field"),
                ("room/add", #"{"name": 5}"#, "invalid-field"),
                ("room/add", #"{"name": "  "}"#, "invalid-field"),
                ("room/add", #"{"name": "Attic", "colour": "red"}"#, "unknown-field"),
                ("tree", #"{"depth": 2}"#, "unknown-field"),
                ("room/rename", #"{"room": "Nowhere", "name": "Somewhere"}"#, "unknown-room"),
                ("accessory/move", #"{"accessory": "No Such Lamp", "room": "Garage"}"#, "unknown-accessory"),
                ("accessory/move", #"{"accessory": "Garage Door Opener", "room": "Nowhere"}"#, "unknown-room"),
                ("accessory/rename", #"{"accessory": "Garage Door Opener", "name": 3}"#, "invalid-field"),
                (
                    "service/rename",
                    #"{"accessory": "Garage Door Opener", "service": "no-such-service", "name": "X"}"#,
                    "unknown-service"
                ),
                ("room/add", #"{"name": "garage"}"#, "duplicate-name"),
                ("room/rename", #"{"room": "Garage", "name": "Bedroom"}"#, "duplicate-name"),
                ("room/remove", #"{"room": "\#(Home.defaultRoomName)"}"#, "default-room"),
                ("scope/set", "{}", "missing-field"),
                ("scope/set", #"{"scope": 3}"#, "invalid-field"),
                ("scope/set", #"{"scope": {"colour": 1}}"#, "unknown-field"),
                ("scope/set", #"{"scope": {"rooms": {"alow": ["Garage"]}}}"#, "unknown-field"),
                ("scope/set", #"{"scope": {"read-only": "Front Door Lock"}}"#, "invalid-field"),
                ("scope/set", #"{"scope": {"user-interactive-only": "all"}}"#, "invalid-field"),
                ("scope/set", #"{"scope": {"service-types": {"allow": ["no-such-type"]}}}"#, "invalid-scope"),
            ]
            for (op, payload, code) in cases {
                let answer = try await call(gw, op, payload)
                XCTAssertEqual(answer["status"], .string("error"), "\(op) \(payload): \(answer)")
                XCTAssertEqual(answer["code"], .string(code), "\(op) \(payload): \(answer)")
                XCTAssertFalse(answer["message"]?.stringValue?.isEmpty ?? true, "\(op) \(payload)")
            }
            // The config file's older scope key is not a request field; the answer names the one that is.
            let older = try await call(gw, "scope/set", #"{"scope": {"services": "all"}}"#)
            XCTAssertEqual(older["code"], "unknown-field", "\(older)")
            XCTAssertTrue(
                older["message"]?.stringValue?.contains(#""user-interactive-only": false"#) ?? false, "\(older)")
            // The id of a bad request is echoed too.
            let withID = try await call(gw, "room/add", #"{"name": 5, "id": "bad-1"}"#)
            XCTAssertEqual(withID["id"], .string("bad-1"))

            // A retained request is refused, never run, and left to the client that published it.
            gw.seen.clear()
            try await gw.publish(
                "home/$gateway/request/room/add", #"{"name": "Ghost Room", "id": "kept"}"#, retain: true)
            let refused = try JSONValue(parsing: try await gw.next("home/$gateway/response/room/add").payload)
            XCTAssertEqual(refused["code"], .string("retained"), "\(refused)")
            XCTAssertEqual(refused["id"], .string("kept"))
            let left = try await gw.retained()["home/$gateway/request/room/add"]
            XCTAssertEqual(
                left, #"{"name": "Ghost Room", "id": "kept"}"#, "another client's retained request was cleared")
            try await gw.publish("home/$gateway/request/room/add", "", retain: true)

            // Nothing changed, and the gateway still serves.
            let roomsAfter = await gw.database.home.allRooms
            XCTAssertEqual(roomsAfter, roomsBefore)
            let scope = try await call(gw, "scope/get", "")
            XCTAssertEqual(
                scope["data"]?["service-types"]?["allow"], nil, "a refused scope/set changed nothing: \(scope)")
            try await assertBrokerMatchesTree(gw)
        }
    }

    // MARK: - Helpers

    /// Sends a request and returns its answer.
    func call(_ gw: RiggedGateway, _ op: String, _ payload: String) async throws -> [String: JSONValue] {
        try await gw.request("home/$gateway/request/\(op)", payload, answer: "home/$gateway/response/\(op)")
    }

    /// The first `home/$gateway/event` named `name` since the last request.
    /// (Events of the first start, such as `room-added` for the rooms the accessory files
    /// suggest, may still arrive; `matching` tells them apart.)
    func event(
        _ gw: RiggedGateway, _ name: String, matching: @escaping @Sendable (JSONValue) -> Bool = { _ in true },
        file: StaticString = #filePath, line: UInt = #line
    ) async throws -> JSONValue {
        do {
            let message = try await gw.next("home/$gateway/event", timeout: 5) {
                guard let json = try? JSONValue(parsing: $0) else { return false }
                return json["event"] == .string(name) && matching(json)
            }
            return try JSONValue(parsing: message.payload)
        } catch {
            let seen = gw.seen.elements.filter { $0.topic == "home/$gateway/event" }.map(\.string)
            XCTFail("no \(name) event; events since the request: \(seen)", file: file, line: line)
            throw error
        }
    }

    /// What a fresh client sees on `home/#` is exactly what `tree` describes: every retained
    /// `state`/`meta`/`$info`/`$availability` topic belongs to the tree, every `meta`, `$info` and
    /// `$availability` of the tree is there, and the retained `home/$gateway/tree` is the answer to
    /// `tree`. `gone` is a prefix that must have no topic left; `present` a topic that must be there.
    func assertBrokerMatchesTree(
        _ gw: RiggedGateway, gone: String? = nil, present: String? = nil, file: StaticString = #filePath,
        line: UInt = #line
    ) async throws {
        let answer = try await call(gw, "tree", "")
        let tree = try XCTUnwrap(answer["data"], "\(answer)", file: file, line: line)
        var allowed = Set<String>()
        var required = Set<String>()
        for room in tree["rooms"]?.arrayValue ?? [] {
            for accessory in room["accessories"]?.arrayValue ?? [] {
                let topic = accessory["topic"]?.stringValue ?? "?"
                required.formUnion([topic + "/$info", topic + "/$availability"])
                for service in accessory["services"]?.arrayValue ?? [] {
                    for characteristic in service["characteristics"]?.arrayValue ?? [] {
                        let topic = characteristic["topic"]?.stringValue ?? "?"
                        required.insert(topic + "/meta")
                        allowed.insert(topic + "/state")
                    }
                }
            }
        }
        allowed.formUnion(required)
        XCTAssertFalse(required.isEmpty, "the tree lists accessories", file: file, line: line)
        let kinds = ["/state", "/meta", "/$info", "/$availability"]
        var problems: [String] = []
        do {
            try await waitUntil("the broker's retained topics to match the tree", timeout: 5) {
                let retained = try await gw.retained()
                let ours = Set(retained.keys.filter { topic in kinds.contains { topic.hasSuffix($0) } })
                problems = []
                let ghosts = ours.subtracting(allowed)
                if !ghosts.isEmpty { problems.append("ghosts: \(ghosts.sorted())") }
                let missing = required.subtracting(ours)
                if !missing.isEmpty { problems.append("missing: \(missing.sorted().prefix(10))") }
                if let gone, let left = retained.keys.first(where: { $0.hasPrefix(gone) }) {
                    problems.append("left under \(gone): \(left)")
                }
                if let present, retained[present] == nil { problems.append("\(present) is not retained") }
                let published = retained["home/$gateway/tree"].flatMap { try? JSONValue(parsing: $0) }
                if published != tree {
                    problems.append("the retained home/$gateway/tree differs from the answer to tree")
                }
                if retained["home/$gateway/status"] != "online" { problems.append("status is not online") }
                return problems.isEmpty
            }
        } catch {
            XCTFail(problems.joined(separator: "; "), file: file, line: line)
        }
    }
}

extension Dictionary where Key == String, Value == JSONValue {
    fileprivate var encoded: String { JSONValue.object(self).encoded() }
}

/// A second gateway on a given state directory, against the broker of a rig.
struct SecondGateway {
    let group: ServiceGroup
    let runner: Task<Void, any Error>

    static func start(broker: RiggedGateway.Broker, statePath: String) async throws -> SecondGateway {
        if case .memory = broker { TestCensus.record(.memory) } else { TestCensus.record(.mosquitto) }
        let directory = URL(fileURLWithPath: statePath)
        let home = try SimulatedHome.load(
            directory: repositoryRoot.appendingPathComponent("Config/accessories"), clock: .manual)
        var config = GatewayConfig(file: "test.yml", directory: repositoryRoot.appendingPathComponent("Config").path)
        if case .memory = broker {} else { config.mqtt = broker.configuration(nil) }
        config.mqtt.clientID = "second-gateway"
        GatewayConfig.applyGatewayOptions(&config.mqtt)
        config.stateDirectory = statePath
        config.pollInterval = 0
        var logger = Logger(label: "test.second-gateway")
        logger.logLevel = .warning
        let mqtt: any MQTTTransport =
            switch broker {
            case .memory(let memory): memory.transport(configuration: config.mqtt)
            case .mosquitto, .mqttools: MQTTClient(configuration: config.mqtt, logger: logger)
            }
        let gateway = try Gateway(
            config: config, source: home, database: try HomeDatabase(directory: directory), mqtt: mqtt,
            scopeStore: ScopeStore(directory: directory),
            // Made without the composition root: the topic dialect is handed in as its one output.
            outputs: [TopicRequests()], logger: logger)
        let watcher = try await broker.client("second-watcher")
        let seen = MessageCollector(watcher.messages())
        try await watcher.subscribe("home/$gateway/status", qos: .exactlyOnce)
        let group = ServiceGroup(configuration: .init(services: gateway.services, logger: logger))
        let runner = Task { try await group.run() }
        // The first gateway left `offline`; the second says `online` when its tree is out.
        do {
            try await seen.waitFor("second gateway online") { !$0.retain && $0.string == "online" }
        } catch {
            await group.triggerGracefulShutdown()
            _ = await runner.result
            throw error
        }
        await broker.disconnect(watcher)
        await seen.cancel()
        return SecondGateway(group: group, runner: runner)
    }

    func stop() async {
        await group.triggerGracefulShutdown()
        _ = await runner.result
    }
}
