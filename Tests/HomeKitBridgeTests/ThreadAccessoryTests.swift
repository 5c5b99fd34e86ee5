import CoAP
import Foundation
import HAP
import HAPServer
import HAPThread
import HomeKitBridge
import HomeKitBridgeTestSupport
import HomeModel
import Logging
import Simulator
import TestSupport
import XCTest

/// A simulated accessory served as a Thread accessory (`homekit: thread` in its file, issue 42):
/// the Kilgo garage door opener on its own `HAPThreadAccessory` over UDP, paired with its own
/// code by our HAP-over-CoAP controller on ::1; the bridge leaves it out, a controller's write
/// reaches MQTT through the gateway's typed core, and an MQTT `set` reaches the controller as an event.
final class ThreadAccessoryTests: XCTestCase {
    static let garage = "sim:garage"

    static func short(_ name: String) -> String {
        let uuid = Catalog.characteristicType(named: name)?.uuid ?? name
        return StandardUUID.shortForm(uuid) ?? uuid
    }

    /// The iid of the characteristic of type `name` in a tree read over CoAP.
    static func iid(_ tree: [Accessory], _ name: String) throws -> UInt16 {
        for service in tree.first?.services ?? [] {
            for c in service.characteristics where (StandardUUID.shortForm(c.type) ?? c.type) == short(name) {
                return try XCTUnwrap(UInt16(exactly: c.iid))
            }
        }
        throw TestTimeoutError("no \(name) in the tree")
    }

    func testTheThreadGaragePairsOverUDPWritesAndHearsMQTTSets() async throws {
        let state = try TemporaryDirectory(prefix: "homekit-thread")
        let files = try BridgedGateway.standaloneGarageFiles(in: state, how: "thread")
        let home = try SimulatedHome.load(directory: files, clock: .manual)
        try await BridgedGateway.run(state: state, home: home) { gw in
            let found: (service: HomeKitBridgeService, port: Int)
            do {
                found = try await gw.standalone(Self.garage)
            } catch {
                // What the accessory's service logged says why it does not listen.
                throw TestTimeoutError("\(error): \(gw.logs.lines.filter { $0.contains("Garage") })")
            }
            let (service, port) = found
            XCTAssertNotEqual(port, gw.port)
            // Its own random code, not the bridge's, kept marked as Thread for `homekit code`.
            let setup = try XCTUnwrap(service.setup)
            XCTAssertNotEqual(setup.code, BridgedGateway.code)
            let stored = BridgeFiles(stateDirectory: state.path, homeID: gw.bridge.homeID, standalone: Self.garage)
            XCTAssertEqual(try stored.storedSetupCode()?.revealed, setup.code)
            XCTAssertEqual(try stored.readSetup()?.thread, true)
            for file in ["setup.json", "hap-accessory.json"] {
                let attributes = try FileManager.default.attributesOfItem(
                    atPath: stored.directory.appendingPathComponent(file).path)
                XCTAssertEqual((attributes[.posixPermissions] as? NSNumber)?.intValue, 0o600, file)
            }

            // Over UDP on ::1 (it binds `::`): pair-setup with its code, then its tree.
            let address = CoAPPeer(host: "::1", port: UInt16(port))
            let pairClient = try HAPThreadControllerLink.makeClient()
            let pairing: HAPPairing
            do {
                pairing = try await HAPCoAPController.pair(
                    exchange: HAPThreadControllerLink(client: pairClient, accessory: address), host: "::1",
                    port: port, setupCode: setup.code)
                await pairClient.close()
            } catch {
                await pairClient.close()
                throw error
            }
            // `homekit status` of the accessory: its own id, paired now, with our one admin pairing.
            let status = await service.status()
            XCTAssertEqual(status.pairingID, pairing.accessoryPairingID)
            XCTAssertEqual(status.isPaired, true)
            XCTAssertEqual(status.pairings.map(\.id), [pairing.controllerPairingID])
            XCTAssertEqual(status.port, port)
            let client = try HAPThreadControllerLink.makeClient()
            let link = HAPThreadControllerLink(client: client, accessory: address)
            let controller = HAPCoAPController(
                pairing: pairing, exchange: link, logger: Logger(label: "thread-accessory-test"))
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await link.deliverEvents(to: controller) }
                defer { group.cancelAll() }
                do {
                    var problems: [String] = []
                    let tree = try await controller.accessories(problems: &problems)
                    XCTAssertEqual(problems, [])
                    XCTAssertEqual(tree.map(\.name), ["Garage Door Opener"])
                    XCTAssertEqual(tree.map(\.aid), [1])

                    // A write goes through the gateway's typed core: the simulator's target on MQTT.
                    let target = try Self.iid(tree, "target-door-state")
                    try await controller.subscribe([target])
                    try await controller.write(target, .int(0))
                    let open = try await gw.seen.waitFor("the target open on MQTT", timeout: 5) {
                        $0.topic.hasSuffix("/garage-door/target-door-state/state") && $0.string == "0"
                    }
                    // An MQTT `set`: the subscribed controller hears it as an event.
                    let setTopic = String(open.topic.dropLast("state".count)) + "set"
                    try await gw.publish(setTopic, "1")
                    let event = await Self.nextEvent(controller)
                    XCTAssertEqual(event?.iid, target)
                    XCTAssertTrue([.int(1), .uint(1)].contains(event?.value), "\(String(describing: event))")
                } catch {
                    await client.close()
                    throw error
                }
                await client.close()
            }

            // A reset (`homekit reset --accessory`): a new identity, no pairings, a server that
            // listens again; the old pairing is refused, and the same code pairs anew.
            let after = await service.reset()
            XCTAssertNotEqual(after.pairingID, pairing.accessoryPairingID)
            XCTAssertEqual(after.isPaired, false)
            XCTAssertEqual(after.pairings.count, 0)
            let newPort = try XCTUnwrap(after.port)
            let newAddress = CoAPPeer(host: "::1", port: UInt16(newPort))
            let oldClient = try HAPThreadControllerLink.makeClient()
            let stale = HAPCoAPController(
                pairing: pairing, exchange: HAPThreadControllerLink(client: oldClient, accessory: newAddress),
                logger: Logger(label: "thread-accessory-test"))
            do {
                try await stale.verify()
                XCTFail("the pairing of the identity before the reset still verifies")
            } catch {}
            await oldClient.close()
            let again = try HAPThreadControllerLink.makeClient()
            let repaired = try await HAPCoAPController.pair(
                exchange: HAPThreadControllerLink(client: again, accessory: newAddress), host: "::1", port: newPort,
                setupCode: setup.code)
            await again.close()
            XCTAssertEqual(repaired.accessoryPairingID, after.pairingID)

            // The bridge does not list it (HomeKit would show it twice).
            let (_, bridged) = try await Controller.pair(gw, state: state)
            let bridgeDocument = try await bridged.accessoriesJSON()
            XCTAssertFalse(
                StandaloneAccessoryTests.names(bridgeDocument).contains("Garage Door Opener"),
                "\(StandaloneAccessoryTests.names(bridgeDocument))")
            XCTAssertGreaterThan(StandaloneAccessoryTests.names(bridgeDocument).count, 5)
            await bridged.close()
        }
    }

    /// The next event, or nil within 20 s: an event gone astray fails the test, not hangs it.
    static func nextEvent(_ controller: HAPCoAPController) async -> HAPCoAPEvent? {
        await withTaskGroup(of: HAPCoAPEvent?.self) { group in
            group.addTask {
                var iterator = controller.events.makeAsyncIterator()
                return await iterator.next()
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(20))
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }
}
