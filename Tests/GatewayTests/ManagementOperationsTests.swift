import Foundation
import Gateway
import HomeModel
import TestSupport
import XCTest

@testable import homemqtt

/// The running gateway and the CLI without it (`OfflineHome`) perform the management operations
/// through one list: the same names, read the same way, answered with the same data.
final class ManagementOperationsTests: RigTestCase {
    func testTheGatewayAndTheCLIWithoutItListAndReadTheSameOperations() async throws {
        await onEveryRig(operations: Setup.sourceOperations) { gw in
            let names = gw.gateway.operations.map { $0.name }
            XCTAssertEqual(names, OfflineHome.operations.map { $0.name })
            XCTAssertEqual(
                names,
                [
                    "tree", "republish", "health", "room/add", "room/rename", "room/remove", "accessory/rename",
                    "accessory/move", "accessory/remove", "accessory/identify", "service/rename", "scope/get",
                    "scope/set", "homes", "home/add", "home/rename", "home/remove", "home/primary", "home/base-topic",
                    "accessory/home", "source/home", "pair", "pairings", "unpair", "discover", "homekit-status",
                    "homekit-reset",
                ])
            XCTAssertEqual(Set(names).count, names.count, "a name listed twice")

            // Every name is an operation of both, refused the same way for a field none reads.
            let offline = try await OfflineCopy(of: gw)
            for name in names {
                let live = try await call(gw, name, #"{"probe": true}"#)
                let there = await offline.answer(name, ["probe": .bool(true)])
                XCTAssertNotEqual(live["code"], .string("unknown-op"), name)
                XCTAssertEqual(live["code"], there["code"], "\(name): \(live) \(there)")
            }
            let unknown = await offline.answer("no/such-op", [:])
            XCTAssertEqual(unknown["code"], .string("unknown-op"))
            XCTAssertEqual(
                unknown["message"],
                .string("unknown operation 'no/such-op'; known: \(names.joined(separator: ", "))"))
        }
    }

    /// One script, run by the gateway over MQTT and on a copy of its home database without it:
    /// every answer is the same, errors included.
    func testAnOperationAnswersTheSameWithOrWithoutTheGateway() async throws {
        await onEveryRig(operations: Setup.sourceOperations) { gw in
            let offline = try await OfflineCopy(of: gw)
            let script: [(op: String, fields: [String: JSONValue])] = [
                ("room/rename", ["room": "Garage", "name": "Workshop"]),
                ("accessory/move", ["accessory": "Garage Door Opener", "room": "Bedroom"]),
                ("accessory/rename", ["accessory": "Garage Door Opener", "name": "Big Door"]),
                ("service/rename", ["accessory": "Big Door", "service": "garage-door", "name": "Main Door"]),
                ("service/rename", ["accessory": "Big Door", "service": "garage-door", "name": .null]),
                ("accessory/rename", ["accessory": "Big Door", "name": .null]),
                ("room/remove", ["room": "Workshop"]),
                ("scope/get", [:]),
                ("scope/set", ["scope": ["manufacturers": ["deny": ["Thermal Dynamics Co."]]]]),
                ("scope/get", [:]),
                ("scope/set", ["scope": ["service-types": ["allow": ["no-such-type"]]]]),
                ("scope/set", [:]),
                ("room/rename", ["room": "Nowhere", "name": "Somewhere"]),
                ("room/add", ["name": "bedroom"]),
                ("room/remove", ["room": .string(Home.defaultRoomName)]),
                ("accessory/move", ["accessory": "No Such Lamp", "room": "Bedroom"]),
                ("accessory/rename", ["accessory": "Garage Door Opener", "name": 3]),
                ("service/rename", ["accessory": "Garage Door Opener", "service": "no-such-service", "name": "X"]),
                ("accessory/remove", ["accessory": "Garage Door Opener"]),
                ("accessory/identify", ["accessory": "Garage Door Opener"]),
            ]
            for (op, fields) in script {
                let live = try await call(gw, op, JSONValue.object(fields).encoded())
                let there = await offline.answer(op, fields)
                if op == "accessory/identify" {
                    XCTAssertEqual(live["status"], .string("error"), "removed: \(live)")
                    XCTAssertEqual(there["code"], .string("needs-gateway"), "\(there)")
                    continue
                }
                XCTAssertEqual(live["status"], there["status"], "\(op) \(fields)")
                XCTAssertEqual(live["data"], there["data"], "\(op) \(fields)")
                XCTAssertEqual(live["code"], there["code"], "\(op) \(fields)")
                XCTAssertEqual(live["message"], there["message"], "\(op) \(fields)")
            }
            // A new room gets its own id in each database; the rest of the answer is the same.
            let added = try await call(gw, "room/add", #"{"name": "Attic"}"#)
            let addedThere = await offline.answer("room/add", ["name": "Attic"])
            XCTAssertEqual(added["data"]?["name"], addedThere["data"]?["name"])
            XCTAssertEqual(added["data"]?.objectValue?.keys.sorted(), addedThere["data"]?.objectValue?.keys.sorted())
        }
    }

    /// Sends a request to the running gateway and returns its answer.
    func call(_ gw: RiggedGateway, _ op: String, _ payload: String) async throws -> [String: JSONValue] {
        try await gw.request("home/$gateway/request/\(op)", payload, answer: "home/$gateway/response/\(op)")
    }
}

/// The gateway's home database copied to another state directory, edited as the CLI edits it
/// when no gateway runs: each command opens it afresh.
struct OfflineCopy {
    let state: TemporaryDirectory
    let database: HomeDatabase
    let accessories: [Accessory]

    init(of gw: RiggedGateway) async throws {
        state = try TemporaryDirectory(prefix: "homemqtt-offline-copy")
        try FileManager.default.copyItem(
            atPath: gw.state.path + "/" + HomeDatabase.fileName, toPath: state.path + "/" + HomeDatabase.fileName)
        database = try HomeDatabase(directory: state.url)
        accessories = await gw.home.accessories()
    }

    /// The answer as the gateway sends it, read back: `status`, and `data` or `code` and `message`.
    func answer(_ op: String, _ fields: [String: JSONValue]) async -> [String: JSONValue] {
        let config = GatewayConfig(file: "test.yml", directory: repositoryRoot.appendingPathComponent("Config").path)
        let scopeStore = ScopeStore(directory: state.url)
        do throws(GatewayFailure) {
            let scope = (try? scopeStore.load()) ?? config.scope
            let filter: ScopeFilter
            do {
                filter = try ScopeFilter(scope, file: config.file)
            } catch {
                throw GatewayFailure(code: .invalidScope, message: "\(error)")
            }
            let home = await database.home
            let offline = OfflineHome(
                config: config, database: database, home: home,
                tree: TopicTree(base: config.baseTopic, accessories: accessories, home: home, scope: filter),
                scopeStore: scopeStore, scope: scope, accessories: accessories)
            let data = try await offline.perform(op, fields: fields)
            // As it reads on the wire, where a number has no sign of its own.
            return ["status": "ok", "data": (try? JSONValue(parsing: Array(data.encoded().utf8))) ?? data]
        } catch {
            return ["status": "error", "code": .string(error.code.rawValue), "message": .string(error.message)]
        }
    }
}
