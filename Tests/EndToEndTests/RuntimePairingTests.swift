import Foundation
import TestSupport
import HomeModel
import Logging
import XCTest
@testable import HAP

/// Pairings added to and removed from a running `HAPSource` (what `pair`/`unpair` over MQTT do),
/// the source running as the gateway's (`homemqtt run` in process, on the memory broker): what
/// the source reports, and what the gateway then publishes of it.
final class RuntimePairingTests: XCTestCase {
    func testAddAndRemoveAPairingWhileRunning() async throws {
        try PeerProcess.requireVenv()
        let temporary = try TemporaryDirectory()
        let dir = temporary.url
        let peer = try PeerProcess(port: 0, state: dir.appendingPathComponent("peer.state"), keeping: temporary)
        addTeardownBlock { await peer.stop() }
        try await peer.waitReady()
        // The source's store, in the state directory: where the controller pairs.
        let store = HAPPairingStore(directory: dir.appendingPathComponent("state/pairings"))
        let controller = HAPController(store: store)
        let config = try InProcessRun.writeConfig(in: temporary, extra: "homeassistant:\n  enabled: false")
        var pairingID = ""
        try await InProcessRun.run(file: config) { run in
            pairingID = try await addAndRemove(try XCTUnwrap(run.source as? HAPSource), run, peer, controller)
        }
        try await controller.unpair(id: pairingID)
    }

    /// Pairs, adds, removes and adds again; returns the pairing's id.
    func addAndRemove(
        _ source: HAPSource, _ run: InProcessRun, _ peer: PeerProcess, _ controller: HAPController
    ) async throws -> String {
        // Running with no pairings: nothing, and run() keeps going, waiting for one.
        let log = EventLog()
        let stream = source.events()
        let consumer = Task { for await e in stream { log.append(e) } }
        defer { consumer.cancel() }
        let none = await source.accessories()
        XCTAssertEqual(none, [])

        let paired = try await HAPPeer.pair(controller, port: peer.port)

        // add: connected, its accessories reported, and usable at once.
        let added = await source.add(pairing: paired)
        XCTAssertEqual(added.count, 5)
        let connected = await source.isConnected(pairingID: paired.accessoryPairingID)
        XCTAssertTrue(connected)
        try await log.wait("5 accessories added") { _ in
            log.all.filter { if case .accessoryAdded = $0 { true } else { false } }.count == 5
        }
        let light = try XCTUnwrap(added.first { $0.name == "Peer Light" })
        let bulb = try XCTUnwrap(light.services.first { $0.type == StandardUUID.longForm("43") })
        let on = try XCTUnwrap(bulb.characteristic(type: StandardUUID.longForm("25")))
        let onAddress = CharacteristicAddress(accessoryID: light.id, iid: on.iid)
        try await source.write(onAddress, value: .bool(true))
        let inside = try await peer.command("get \(light.aid) \(on.iid)")
        XCTAssertEqual(inside, "VALUE \(light.aid) \(on.iid) true")
        XCTAssertEqual(HAPSource.pairingID(forAccessoryID: light.id), paired.accessoryPairingID)
        XCTAssertNil(HAPSource.pairingID(forAccessoryID: "sim:garage"))
        // The gateway serves what the source added.
        let isPeerLight: ([String: String]) -> Bool = { $0.keys.contains { $0.contains("/peer-light/") } }
        try await run.retained("home/#", until: "the Peer Light's topics", isPeerLight)

        // remove: disconnected, every accessory reported removed, no longer writable.
        var mark = log.all.count
        await source.remove(pairingID: paired.accessoryPairingID)
        let removedIDs = {
            Set(log.all[mark...].compactMap { if case .accessoryRemoved(let id) = $0 { id } else { nil } })
        }
        try await log.wait(from: mark, "5 accessories removed") { _ in removedIDs().count >= 5 }
        XCTAssertEqual(removedIDs(), Set(added.map(\.id)))
        let left = await source.accessories()
        XCTAssertEqual(left, [])
        let stillConnected = await source.isConnected(pairingID: paired.accessoryPairingID)
        XCTAssertFalse(stillConnected)
        do {
            try await source.write(onAddress, value: .bool(false))
            XCTFail("a removed accessory was written")
        } catch {
            XCTAssertEqual(error.status, .doesNotExist)
        }
        // And the gateway clears its topics.
        try await run.retained("home/#", until: "the Peer Light's topics cleared") { !isPeerLight($0) }

        // The same pairing added again is served again, events included.
        mark = log.all.count
        let again = await source.add(pairing: paired)
        XCTAssertEqual(Set(again.map(\.id)), Set(added.map(\.id)))
        let brightness = try XCTUnwrap(bulb.characteristic(type: StandardUUID.longForm("8")))
        let set = try await peer.command("set \(light.aid) \(brightness.iid) 61")
        XCTAssertEqual(set, "OK")
        try await log.wait(from: mark, "brightness 61 after adding again") {
            if case .valueUpdated(let a, let v) = $0 {
                a == CharacteristicAddress(accessoryID: light.id, iid: brightness.iid) && v.doubleValue == 61
            } else {
                false
            }
        }
        return paired.accessoryPairingID
    }
}
