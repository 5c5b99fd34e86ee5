import Foundation
import Gateway
import HAP
import HomeKitBridge
import HomeKitBridgeTestSupport
import HomeMQTTApp
import HomeModel
import Logging
import TestSupport
import XCTest

/// What the bridge keeps: pairings, aids and iids across restarts (never reused), `c#` on a
/// change of shape, the setup code shown once, the reset, and the refusals (its own bridge, more
/// than 150 accessories, a bad `homekit:` section).
final class BridgeStateTests: XCTestCase {
    static func lamp(_ id: String = "sim:test-lamp") -> Accessory {
        let on = Catalog.characteristicType(named: "power-state")!
        let bulb = Catalog.serviceType(named: "lightbulb")!
        return Accessory(
            id: id, name: "Test Lamp", manufacturer: "Test", model: "L1", serialNumber: "T1", firmwareRevision: "1.0",
            services: [
                AccessoryService(
                    iid: 9, type: bulb.uuid,
                    characteristics: [
                        Characteristic(iid: 10, type: on.uuid, value: .bool(false), metadata: on.metadata)
                    ])
            ],
            suggestedRoom: "Office")
    }

    /// aid and every iid of `/accessories`, by aid.
    static func shape(_ json: JSONValue) -> [Int: [Int]] {
        var out: [Int: [Int]] = [:]
        for accessory in json["accessories"]?.arrayValue ?? [] {
            var iids: [Int] = []
            for service in accessory["services"]?.arrayValue ?? [] {
                iids.append(service["iid"]?.intValue ?? -1)
                for c in service["characteristics"]?.arrayValue ?? [] { iids.append(c["iid"]?.intValue ?? -1) }
            }
            out[accessory["aid"]?.intValue ?? -1] = iids
        }
        return out
    }

    func testRestartKeepsPairingAidsAndIidsAndShapeChangesRaiseTheConfigurationNumber() async throws {
        let state = try TemporaryDirectory(prefix: "homekit-restart")
        var pairing: HAPPairing?
        var before: [Int: [Int]] = [:]
        var lampAID = 0
        try await BridgedGateway.run(state: state) { gw in
            let (paired, connection) = try await Controller.pair(gw, state: state)
            pairing = paired
            before = Self.shape(try await connection.accessoriesJSON())
            let initial = await gw.bridge.status()
            let first = try XCTUnwrap(initial.configurationNumber)

            // An accessory added: c# rises, and it has an aid.
            await gw.home.add(Self.lamp())
            try await waitUntil("c# to rise", timeout: 5) { await gw.bridge.status().configurationNumber ?? 0 > first }
            lampAID = try gw.aid(of: "sim:test-lamp")
            let withLamp = Self.shape(try await connection.accessoriesJSON())
            XCTAssertNotNil(withLamp[lampAID])
            let addedStatus = await gw.bridge.status()
            let added = try XCTUnwrap(addedStatus.configurationNumber)
            // Removed: c# rises again, and the aid is gone from the tree (not from the file).
            await gw.home.remove(accessoryID: "sim:test-lamp")
            try await waitUntil("c# to rise again", timeout: 5) {
                await gw.bridge.status().configurationNumber ?? 0 > added
            }
            let withoutLamp = Self.shape(try await connection.accessoriesJSON())
            XCTAssertNil(withoutLamp[lampAID])
            let removed = await gw.bridge.status().configurationNumber
            // A value changing is no change of shape.
            try await gw.publish("home/garage/garage-door-opener/garage-light/brightness/set", "33")
            try await gw.seen.waitFor("33", timeout: 5) { $0.string == "33" && $0.topic.hasSuffix("brightness/state") }
            _ = try await connection.accessoriesJSON()
            let after = await gw.bridge.status().configurationNumber
            XCTAssertEqual(after, removed)
            await connection.close()
        }
        // Restarted: the same controller verifies; every aid and iid is where it was.
        try await BridgedGateway.run(state: state) { gw in
            let connection = try await Controller.connect(try XCTUnwrap(pairing), gw)
            let restarted = Self.shape(try await connection.accessoriesJSON())
            XCTAssertEqual(restarted, before)
            XCTAssertEqual(gw.bridge.listeningPort, gw.port)
            // The lamp comes back under its old aid; a new accessory never takes a used one.
            await gw.home.add(Self.lamp())
            await gw.home.add(Self.lamp("sim:other-lamp"))
            try await waitUntil("both lamps in the tree", timeout: 5) {
                Self.shape((try? await connection.accessoriesJSON()) ?? .null).count == before.count + 2
            }
            XCTAssertEqual(try gw.aid(of: "sim:test-lamp"), lampAID)
            XCTAssertEqual(try gw.aid(of: "sim:other-lamp"), lampAID + 1)
            await connection.close()
        }
    }

    func testARandomSetupCodeIsLoggedOnceAndKeptPrivately() async throws {
        let state = try TemporaryDirectory(prefix: "homekit-code")
        var code = ""
        try await BridgedGateway.run(state: state, setupCode: nil) { gw in
            let line = try XCTUnwrap(gw.logs.lines.first { $0.contains("setup code") }, "\(gw.logs.lines)")
            let files = BridgeFiles(stateDirectory: state.path, homeID: gw.bridge.homeID)
            code = try XCTUnwrap(try files.storedSetupCode()).revealed
            XCTAssertTrue(line.contains(code), line)
            let attributes = try FileManager.default.attributesOfItem(
                atPath: files.directory.appendingPathComponent("setup.json").path)
            XCTAssertEqual((attributes[.posixPermissions] as? NSNumber)?.intValue, 0o600)
            // The code pairs.
            let (_, connection) = try await Controller.pair(gw, state: state, code: code)
            await connection.close()
        }
        try await BridgedGateway.run(state: state, setupCode: nil) { gw in
            XCTAssertFalse(gw.logs.lines.contains { $0.contains(code) }, "the code was logged again")
            let files = BridgeFiles(stateDirectory: state.path, homeID: gw.bridge.homeID)
            XCTAssertEqual(try files.storedSetupCode()?.revealed, code)
        }
    }

    func testResetUnpairsAndGivesANewIdentity() async throws {
        let state = try TemporaryDirectory(prefix: "homekit-reset")
        try await BridgedGateway.run(state: state) { gw in
            let (pairing, connection) = try await Controller.pair(gw, state: state)
            let before = await gw.bridge.status()
            XCTAssertEqual(before.isPaired, true)
            let outcome = await gw.gateway.perform(.manage(HomeKitResetOperation()))
            let data = try outcome.get()
            guard case .data(let status) = data else { return XCTFail("\(data)") }
            XCTAssertEqual(status["paired"], false)
            XCTAssertNotEqual(status["id"]?.stringValue, before.pairingID)
            XCTAssertEqual(status["sf"], 1)
            _ = await connection.close()
            // The old pairing no longer verifies; the same code pairs again.
            let port = try XCTUnwrap(gw.bridge.listeningPort)
            var moved = pairing
            moved.port = port
            do {
                let stale = try await HAPController(
                    store: HAPPairingStore(directory: state.url.appendingPathComponent("x")), logger: Controller.logger
                ).connect(moved)
                await stale.close()
                XCTFail("the old pairing still verifies")
            } catch {}
            let again = try await HAPController(
                store: HAPPairingStore(directory: state.url.appendingPathComponent("again")),
                logger: Controller.logger
            ).pair(host: "127.0.0.1", port: port, setupCode: BridgedGateway.code)
            XCTAssertEqual(again.accessoryPairingID, status["id"]?.stringValue)
        }
    }

    func testTheGatewayRefusesToPairWithItsOwnBridge() async throws {
        let state = try TemporaryDirectory(prefix: "homekit-loop")
        var config = GatewayConfig(file: "test.yml", directory: state.path)
        config.stateDirectory = state.path
        let pairings = HomeMQTTApp.offlinePairings(config, logger: Controller.logger)
        try await BridgedGateway.run(state: state, options: HomeMQTTApp.Options(pairings: pairings)) { gw in
            let outcome = await gw.gateway.perform(
                .manage(HAPPair(host: "127.0.0.1", port: gw.port, code: BridgedGateway.code, name: nil)))
            let failure = try XCTUnwrap(outcome.failure, "\(outcome)")
            XCTAssertTrue(failure.message.contains("own HomeKit bridge"), failure.message)
            let status = await gw.bridge.status()
            XCTAssertEqual(status.isPaired, false, "the bridge was paired")
            XCTAssertEqual(BridgeFiles.ownPairingIDs(stateDirectory: state.path), [status.pairingID ?? "?"])
        }
    }

    func testStatusOperationAnswersWithoutTheCode() async throws {
        let state = try TemporaryDirectory(prefix: "homekit-status")
        try await BridgedGateway.run(state: state) { gw in
            let outcome = await gw.gateway.perform(.manage(HomeKitStatusOperation()))
            guard case .data(let status) = try outcome.get() else { return XCTFail("\(outcome)") }
            XCTAssertEqual(status["port"]?.intValue, gw.port)
            XCTAssertEqual(status["category"], 2)
            XCTAssertEqual(status["c#"], 1)
            XCTAssertEqual(status["setup-id"]?.stringValue?.count, 4)
            XCTAssertFalse(status.encoded().contains(BridgedGateway.code))
            XCTAssertFalse(status.encoded().contains(BridgedGateway.code.filter { $0 != "-" }))
        }
    }
}

/// A bridge per home: a home added gets a bridge of its own (its own identity, a free port),
/// and an accessory moved to it leaves the first home's bridge for the new one's.
final class BridgePerHomeTests: XCTestCase {
    func testEachHomeIsABridgeOfItsOwn() async throws {
        let state = try TemporaryDirectory(prefix: "homekit-homes")
        try await BridgedGateway.run(state: state) { gw in
            _ = try await gw.gateway.perform(.manage(HomeAdd(name: "Cabin"))).get()
            var cabin: HomeKitBridgeService?
            try await waitUntil("the cabin's bridge to listen", timeout: 10) {
                cabin = HomeKitBridges.running.first {
                    $0.stateDirectory == state.path && $0.homeID != gw.bridge.homeID && $0.listeningPort != nil
                }
                return cabin != nil
            }
            let second = try XCTUnwrap(cabin)
            let first = await gw.bridge.status()
            var status = await second.status()
            XCTAssertNotEqual(status.pairingID, first.pairingID)
            XCTAssertNotEqual(status.port, first.port)
            XCTAssertEqual(status.homeName, "Cabin")
            XCTAssertEqual(status.accessories, 1, "the bridge alone")

            _ = try await gw.gateway.perform(.manage(AccessoryHome(accessory: "sim:garage", home: "Cabin"))).get()
            try await waitUntil("the garage on the cabin's bridge", timeout: 10) {
                await second.status().accessories == 2
            }
            try await waitUntil("the garage off the first bridge", timeout: 10) {
                await gw.bridge.status().accessories == first.accessories - 1
            }
            // Paired with the cabin's bridge, a controller sees the garage there.
            let cabinPort = try XCTUnwrap(second.listeningPort)
            let controller = HAPController(
                store: HAPPairingStore(directory: state.url.appendingPathComponent("cabin-controller")),
                logger: Controller.logger)
            let pairing = try await controller.pair(host: "127.0.0.1", port: cabinPort, setupCode: BridgedGateway.code)
            let connection = try await controller.connect(pairing)
            let listed = try await connection.accessoriesJSON()["accessories"]?.arrayValue ?? []
            XCTAssertEqual(listed.count, 2)
            status = await second.status()
            XCTAssertEqual(status.isPaired, true)
            let firstNow = await gw.bridge.status()
            XCTAssertEqual(firstNow.isPaired, false)
            await connection.close()
        }
    }
}
