import Foundation
import Gateway
import HAP
import HomeKitBridge
import HAPServer
import HomeKitBridgeTestSupport
import HomeModel
import TestSupport
import XCTest

/// A simulated accessory served standalone (`homekit: standalone` in its file): the Kilgo
/// garage door opener on its own HAP server, paired with its own code by the gateway's own
/// controller; aid 1 is the accessory, the bridge leaves it out, a write moves the simulator,
/// a restart keeps the pairing and the ids, and a reset of it leaves the bridge alone.
final class StandaloneAccessoryTests: XCTestCase {
    static let garage = "sim:garage"

    static func short(_ name: String) -> String {
        let uuid = Catalog.characteristicType(named: name)?.uuid ?? Catalog.serviceType(named: name)?.uuid ?? name
        return StandardUUID.shortForm(uuid) ?? uuid
    }

    /// The HAP address of the characteristic of type `name` in the served document.
    static func address(_ document: JSONValue, _ name: String) throws -> HAP.HAPCharacteristicID {
        for accessory in document["accessories"]?.arrayValue ?? [] {
            for service in accessory["services"]?.arrayValue ?? [] {
                for c in service["characteristics"]?.arrayValue ?? [] where c["type"]?.stringValue == short(name) {
                    return HAP.HAPCharacteristicID(
                        aid: UInt64(accessory["aid"]?.intValue ?? 0), iid: UInt64(c["iid"]?.intValue ?? 0))
                }
            }
        }
        throw TestTimeoutError("no \(name) in \(document.encoded())")
    }

    /// Every accessory's Name in a served document.
    static func names(_ document: JSONValue) -> [String] {
        (document["accessories"]?.arrayValue ?? []).compactMap { accessory in
            accessory["services"]?.arrayValue?.first { $0["type"] == "3E" }?["characteristics"]?.arrayValue?
                .first { $0["type"] == "23" }?["value"]?.stringValue
        }
    }

    func testTheStandaloneGaragePairsWithItsOwnCodeAndOpens() async throws {
        let state = try TemporaryDirectory(prefix: "homekit-standalone")
        let home = try BridgedGateway.standaloneGarageHome(in: state)
        try await BridgedGateway.run(state: state, home: home) { gw in
            let (service, port) = try await gw.standalone(Self.garage)
            XCTAssertNotEqual(port, gw.port)
            // Its own random code (not the bridge's), shown once in the log with its X-HM URI.
            let setup = try XCTUnwrap(service.setup)
            XCTAssertNotEqual(setup.code, BridgedGateway.code)
            let line = try XCTUnwrap(
                gw.logs.lines.first { $0.contains("HomeKit accessory 'Garage Door Opener': pair it") },
                "\(gw.logs.lines)")
            XCTAssertTrue(line.contains(setup.code) && line.contains("setup-uri=\(setup.uri)"), line)
            let files = BridgeFiles(stateDirectory: state.path, homeID: gw.bridge.homeID, standalone: Self.garage)
            XCTAssertEqual(try files.storedSetupCode()?.revealed, setup.code)
            let setupID = try XCTUnwrap(try files.readSetup()?.setupID)
            // Category 4, garage door opener, in the URI and the status (the announcement's `ci`).
            XCTAssertEqual(
                setup.uri, BridgeAdvertisement.setupURI(code: HAPSetupCode(setup.code)!, setupID: setupID, category: 4))
            for file in ["setup.json", "hap-accessory.json"] {
                let attributes = try FileManager.default.attributesOfItem(
                    atPath: files.directory.appendingPathComponent(file).path)
                XCTAssertEqual((attributes[.posixPermissions] as? NSNumber)?.intValue, 0o600, file)
            }

            let (_, connection) = try await Controller.pair(
                port: port, code: setup.code, state: state, folder: "standalone")
            let document = try await connection.accessoriesJSON()
            // aid 1 is the garage door opener itself: its information, its door and its light,
            // and its route (hidden: the loop guard's, `GatewayRoute`).
            XCTAssertEqual(document["accessories"]?.arrayValue?.compactMap { $0["aid"]?.intValue }, [1])
            let services = document["accessories"]?[0]?["services"]?.arrayValue ?? []
            XCTAssertEqual(
                services.compactMap { $0["type"]?.stringValue },
                ["3E", Self.short("garage-door-opener"), "43", GatewayRoute.serviceType])
            XCTAssertEqual(services.last?["hidden"], true)
            XCTAssertEqual(Self.names(document), ["Garage Door Opener"])
            let status = await service.status()
            XCTAssertEqual(status.isPaired, true)
            XCTAssertEqual(status.category, 4)
            XCTAssertEqual(status.accessories, 1)

            // The bridge does not list it (HomeKit would show it twice).
            let (_, bridged) = try await Controller.pair(gw, state: state)
            let bridgeDocument = try await bridged.accessoriesJSON()
            XCTAssertFalse(Self.names(bridgeDocument).contains("Garage Door Opener"), "\(Self.names(bridgeDocument))")
            XCTAssertGreaterThan(Self.names(bridgeDocument).count, 5)
            XCTAssertNil(try IDsFile(state: state).aid(Self.garage))
            await bridged.close()

            // A write moves the simulator: the door opens, with events 1 → 2 → 0.
            let current = try Self.address(document, "current-door-state")
            let target = try Self.address(document, "target-door-state")
            let closed = try await connection.readCharacteristics([current])
            XCTAssertEqual(try closed[current]?.get(), 1)
            let events = StreamCollector(connection.events)
            _ = try await connection.writeCharacteristics([current: ["ev": true]])
            _ = try await connection.writeCharacteristics([target: ["value": 0]])
            try await events.waitFor("opening", timeout: 5) {
                HAPConnection.eventValues($0).contains { $0.0 == current }
            }
            await gw.home.advance(by: 12)
            try await events.waitFor(count: 2, "two door events", timeout: 5) {
                HAPConnection.eventValues($0).contains { $0.0 == current }
            }
            let seen = events.elements.flatMap(HAPConnection.eventValues).filter { $0.0 == current }.map(\.1)
            XCTAssertEqual(seen, [2, 0])
            try await gw.seen.waitFor("the door open on MQTT", timeout: 5) {
                $0.topic.hasSuffix("/garage-door/current-door-state/state") && $0.string == "0"
            }
            await connection.close()
        }
    }

    func testTheStatusAndResetOperationsNameTheAccessory() async throws {
        let state = try TemporaryDirectory(prefix: "homekit-standalone-ops")
        let home = try BridgedGateway.standaloneGarageHome(in: state)
        try await BridgedGateway.run(state: state, home: home) { gw in
            let (service, port) = try await gw.standalone(Self.garage)
            let code = try XCTUnwrap(service.setup?.code)
            _ = try await Controller.pair(gw, state: state)
            let (_, connection) = try await Controller.pair(port: port, code: code, state: state, folder: "alone")
            await connection.close()

            let bridgeOutcome = await gw.gateway.perform(.manage(HomeKitStatusOperation()))
            guard case .data(let bridge) = try bridgeOutcome.get() else { return XCTFail("\(bridgeOutcome)") }
            XCTAssertEqual(bridge["standalone"], [.string(Self.garage)])
            XCTAssertEqual(bridge["category"], 2)
            let outcome = await gw.gateway.perform(.manage(HomeKitStatusOperation(accessory: Self.garage)))
            guard case .data(let alone) = try outcome.get() else { return XCTFail("\(outcome)") }
            XCTAssertEqual(alone["accessory"], .string(Self.garage))
            XCTAssertEqual(alone["category"], 4)
            XCTAssertEqual(alone["port"]?.intValue, port)
            XCTAssertEqual(alone["paired"], true)
            XCTAssertNotEqual(alone["id"], bridge["id"])
            XCTAssertFalse(alone.encoded().contains(code))

            let unknown = await gw.gateway.perform(.manage(HomeKitStatusOperation(accessory: "sim:thermostat")))
            XCTAssertEqual(unknown.failure?.code, .doesNotExist, "\(unknown)")

            // A reset of the accessory: it alone is unpaired, with a new identity.
            let reset = await gw.gateway.perform(.manage(HomeKitResetOperation(accessory: Self.garage)))
            guard case .data(let after) = try reset.get() else { return XCTFail("\(reset)") }
            XCTAssertEqual(after["paired"], false)
            XCTAssertNotEqual(after["id"], alone["id"])
            let bridgeAfter = await gw.bridge.status()
            XCTAssertEqual(bridgeAfter.isPaired, true)
            XCTAssertEqual(bridgeAfter.pairingID, bridge["id"]?.stringValue)
            // The gateway never pairs with its own: the new identity is among them.
            XCTAssertTrue(
                BridgeFiles.ownPairingIDs(stateDirectory: state.path).contains(after["id"]?.stringValue ?? "?"))
        }
    }

    func testARestartKeepsTheStandalonePairingAndIds() async throws {
        let state = try TemporaryDirectory(prefix: "homekit-standalone-restart")
        var pairing: HAPPairing?
        var before: JSONValue = .null
        var code = ""
        try await BridgedGateway.run(state: state, home: try BridgedGateway.standaloneGarageHome(in: state)) { gw in
            let (service, port) = try await gw.standalone(Self.garage)
            code = try XCTUnwrap(service.setup?.code)
            let (paired, connection) = try await Controller.pair(port: port, code: code, state: state, folder: "a")
            pairing = paired
            before = try await connection.accessoriesJSON()
            await connection.close()
        }
        let copy = try TemporaryDirectory(prefix: "homekit-standalone-restart-home")
        try await BridgedGateway.run(state: state, home: try BridgedGateway.standaloneGarageHome(in: copy)) { gw in
            let (service, port) = try await gw.standalone(Self.garage)
            XCTAssertEqual(service.setup?.code, code)
            XCTAssertFalse(gw.logs.lines.contains { $0.contains(code) }, "the code was logged again")
            // The old pairing verifies on the new port, and every aid and iid is where it was.
            let connection = try await Controller.connect(try XCTUnwrap(pairing), port: port)
            let after = try await connection.accessoriesJSON()
            XCTAssertEqual(
                try Self.address(after, "target-door-state"), try Self.address(before, "target-door-state"))
            XCTAssertEqual(Self.shape(after), Self.shape(before))
            let paired = await service.status().isPaired
            XCTAssertEqual(paired, true)
            await connection.close()
        }
    }

    /// Every aid.iid and type served.
    static func shape(_ document: JSONValue) -> [String] {
        (document["accessories"]?.arrayValue ?? []).flatMap { accessory in
            (accessory["services"]?.arrayValue ?? []).flatMap { service in
                (service["characteristics"]?.arrayValue ?? []).map { c in
                    "\(accessory["aid"]?.intValue ?? 0).\(c["iid"]?.intValue ?? 0) \(c["type"]?.stringValue ?? "")"
                }
            }
        }
    }
}
