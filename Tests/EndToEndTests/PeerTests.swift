import Foundation
import TestSupport
import HomeModel
import Logging
import XCTest
@testable import HAP

/// Collects a source's events for assertions.
final class EventLog: @unchecked Sendable {
    private let lock = NSLock()
    private var events: [SourceEvent] = []
    func append(_ e: SourceEvent) { lock.lock(); events.append(e); lock.unlock() }
    var all: [SourceEvent] { lock.lock(); defer { lock.unlock() }; return events }

    /// Waits until an event after `from` matches; returns its index.
    @discardableResult
    func wait(from: Int = 0, timeout: Double = 20, _ what: String, _ match: (SourceEvent) -> Bool) async throws -> Int {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let list = all
            if from < list.count, let i = list[from...].firstIndex(where: match) { return i }
            try await Task.sleep(nanoseconds: 25_000_000)
        }
        throw PeerFailure(message: "no event: \(what); got \(all.count) events")
    }
}

/// Every peer a test started, stopped in teardown even when the test fails early.
final class PeerList: @unchecked Sendable {
    private let lock = NSLock()
    private var peers: [PeerProcess]
    init(_ first: PeerProcess) { peers = [first] }
    func add(_ p: PeerProcess) { lock.lock(); peers.append(p); lock.unlock() }
    private func snapshot() -> [PeerProcess] { lock.lock(); defer { lock.unlock() }; return peers }
    func stopAll() async { for p in snapshot() { await p.stop() } }
}

final class PeerTests: XCTestCase {
    let setupCode = "031-45-154"

    /// A numeric value update for `address` (HAP-python's Brightness is `int`, door states `uint8`).
    static func isValue(_ e: SourceEvent, _ address: CharacteristicAddress, _ value: Double) -> Bool {
        if case .valueUpdated(let a, let v) = e { return a == address && v.doubleValue == value }
        return false
    }

    func testWrongSetupCodeIsRefused() async throws {
        try PeerProcess.requireVenv()
        let temporary = try TemporaryDirectory()
        let dir = temporary.url
        let peer = try PeerProcess(port: 0, state: dir.appendingPathComponent("peer.state"), keeping: temporary)
        addTeardownBlock { await peer.stop() }
        try await peer.waitReady()
        let controller = HAPController(store: HAPPairingStore(directory: dir.appendingPathComponent("pairings")))
        do {
            _ = try await controller.pair(host: "127.0.0.1", port: peer.port, setupCode: "111-22-333")
            XCTFail("pairing with a wrong setup code succeeded")
        } catch {
            XCTAssertEqual(error.code.rawValue, "wrong-setup-code", error.message)
        }
        do {
            _ = try await controller.pair(host: "127.0.0.1", port: peer.port, setupCode: "12-34")
            XCTFail("a malformed setup code was accepted")
        } catch {
            XCTAssertEqual(error.code.rawValue, "bad-setup-code")
        }
        let got1 = try await controller.pairings().count
        XCTAssertEqual(got1, 0)
        let got2 = try await peer.command("pairings")
        XCTAssertEqual(got2, "PAIRINGS 0")
        await peer.stop()

        // Nothing listens on the port any more.
        do {
            _ = try await controller.pair(host: "127.0.0.1", port: peer.port, setupCode: setupCode)
            XCTFail("pairing with a stopped accessory succeeded")
        } catch {
            XCTAssertEqual(error.code.rawValue, "unreachable", error.message)
        }
    }

    func testPairReadWriteEventsRestartAndUnpair() async throws {
        try PeerProcess.requireVenv()
        let temporary = try TemporaryDirectory()
        let dir = temporary.url
        let state = dir.appendingPathComponent("peer.state")
        var peer = try PeerProcess(port: 0, state: state, keeping: temporary)
        let peers = PeerList(peer)
        addTeardownBlock { await peers.stopAll() }
        try await peer.waitReady()
        let port = peer.port
        let store = HAPPairingStore(directory: dir.appendingPathComponent("pairings"))
        let controller = HAPController(store: store)

        // Pair-setup, then the pairing file is private.
        let pairing = try await HAPPeer.pair(controller, port: port, setupCode: setupCode, name: "Peer Bridge")
        let got3 = try await peer.command("pairings")
        XCTAssertEqual(got3, "PAIRINGS 1")
        let files = try FileManager.default.contentsOfDirectory(atPath: store.directory.path).filter {
            !$0.hasPrefix(".")
        }
        XCTAssertEqual(files.count, 1)
        let attrs = try FileManager.default.attributesOfItem(
            atPath: store.directory.appendingPathComponent(files[0]).path)
        XCTAssertEqual((attrs[.posixPermissions] as? NSNumber)?.intValue, 0o600)
        XCTAssertEqual(try store.all(), [pairing])
        XCTAssertFalse(
            pairing.description.contains(pairing.controllerLTSK), "the secret key must not appear in descriptions")

        // Already paired: a second pair-setup is refused with an actionable error.
        do {
            _ = try await controller.pair(host: "127.0.0.1", port: port, setupCode: setupCode)
            XCTFail("second pairing succeeded")
        } catch {
            XCTAssertEqual(error.code.rawValue, "already-paired", error.message)
        }

        // The accessory's pinned key: a pairing with another key is refused at pair-verify.
        var impostor = pairing
        impostor.accessoryLTPK = HAPCrypto.randomBytes(32).hexString
        do {
            let c = try await controller.connect(impostor)
            await c.close()
            XCTFail("pair-verify accepted a different long-term key")
        } catch {
            XCTAssertEqual(error.code.rawValue, "bad-signature", error.message)
        }

        // /accessories through the controller.
        let listed = try await controller.accessories(of: pairing)
        XCTAssertEqual(listed.count, 5)
        let bridge = try XCTUnwrap(listed.first { $0.aid == 1 })
        XCTAssertEqual(bridge.category, 2)
        XCTAssertEqual(bridge.name, "Peer Bridge")
        XCTAssertEqual(bridge.id, "hap:\(pairing.accessoryPairingID):1")
        let light = try XCTUnwrap(listed.first { $0.name == "Peer Light" })
        XCTAssertEqual(light.bridgeID, bridge.id)
        XCTAssertEqual(light.manufacturer, "HomeMQTT Tests")
        let bulb = try XCTUnwrap(light.services.first { $0.type == StandardUUID.longForm("43") })
        let on = try XCTUnwrap(bulb.characteristic(type: StandardUUID.longForm("25")))
        let brightness = try XCTUnwrap(bulb.characteristic(type: StandardUUID.longForm("8")))
        XCTAssertEqual(brightness.metadata.unit, "percentage")
        XCTAssertEqual(brightness.metadata.maxValue, 100)
        let garage = try XCTUnwrap(listed.first { $0.name == "Peer Garage" })
        let door = try XCTUnwrap(garage.services.first { $0.type == StandardUUID.longForm("41") })
        let target = try XCTUnwrap(door.characteristic(type: StandardUUID.longForm("32")))
        let current = try XCTUnwrap(door.characteristic(type: StandardUUID.longForm("E")))

        // The source: connect, verify, subscribe.
        let source = HAPSource(store: store, pollInterval: 60, backoff: (0.2, 1.5, 2))
        let log = EventLog()
        let stream = source.events()
        let consumer = Task { for await e in stream { log.append(e) } }
        let runner = Task { try await source.run() }
        defer { runner.cancel(); consumer.cancel() }
        try await log.wait("5 accessories added") { _ in
            log.all.filter { if case .accessoryAdded = $0 { true } else { false } }.count == 5
        }
        let got4 = await source.accessories().count
        XCTAssertEqual(got4, 5)
        for _ in 0..<200 where !(await source.isConnected(pairingID: pairing.accessoryPairingID)) {
            try await Task.sleep(nanoseconds: 25_000_000)
        }

        let onAddress = CharacteristicAddress(accessoryID: light.id, iid: on.iid)
        let brightnessAddress = CharacteristicAddress(accessoryID: light.id, iid: brightness.iid)
        let got5 = try await source.read(onAddress)
        XCTAssertEqual(got5, .bool(false))
        try await source.write(onAddress, value: .bool(true))
        let got6 = try await peer.command("get \(light.aid) \(on.iid)")
        XCTAssertEqual(got6, "VALUE \(light.aid) \(on.iid) true")
        let got7 = try await source.read(onAddress)
        XCTAssertEqual(got7, .bool(true))

        // A change inside the accessory arrives as an event.
        var mark = log.all.count
        let got8 = try await peer.command("set \(light.aid) \(brightness.iid) 80")
        XCTAssertEqual(got8, "OK")
        try await log.wait(from: mark, "brightness 80") { Self.isValue($0, brightnessAddress, 80) }

        // Notifications off: a change sends nothing; turned on again, the subscription reads
        // what changed meanwhile.
        _ = await source.setNotifications(enabled: false, for: [brightnessAddress])
        mark = log.all.count
        let got55 = try await peer.command("set \(light.aid) \(brightness.iid) 55")
        XCTAssertEqual(got55, "OK")
        try await Task.sleep(for: .milliseconds(300))
        XCTAssertFalse(log.all[mark...].contains { Self.isValue($0, brightnessAddress, 55) }, "an event while off")
        let refused = await source.setNotifications(enabled: true, for: [brightnessAddress])
        XCTAssertEqual(refused.count, 0, "\(refused)")
        try await log.wait(from: mark, "brightness 55 read on subscribing") { Self.isValue($0, brightnessAddress, 55) }

        // Writing the garage target makes the door's current state follow (an event from the accessory).
        mark = log.all.count
        try await source.write(CharacteristicAddress(accessoryID: garage.id, iid: target.iid), value: .uint(0))
        try await log.wait(from: mark, "garage current state open") {
            Self.isValue($0, CharacteristicAddress(accessoryID: garage.id, iid: current.iid), 0)
        }

        // A value the accessory refuses comes back as its HAP status.
        do {
            try await source.write(CharacteristicAddress(accessoryID: light.id, iid: 99999), value: .bool(true))
            XCTFail("write to a missing characteristic succeeded")
        } catch {
            XCTAssertEqual(error.status, .doesNotExist)
        }

        // The accessory restarts: unreachable, then reachable, and events flow again.
        mark = log.all.count
        await peer.stop()
        try await log.wait(from: mark, "light unreachable") {
            $0 == .reachabilityChanged(id: light.id, isReachable: false)
        }
        do {
            _ = try await source.read(onAddress)
            XCTFail("read from an unreachable accessory succeeded")
        } catch {
            XCTAssertEqual(error.status, .communicationFailure)
        }
        mark = log.all.count
        peer = try PeerProcess(port: port, state: state, keeping: temporary)
        peers.add(peer)
        try await peer.waitReady()
        try await log.wait(from: mark, "light reachable again") {
            $0 == .reachabilityChanged(id: light.id, isReachable: true)
        }
        mark = log.all.count
        let got9 = try await peer.command("set \(light.aid) \(brightness.iid) 33")
        XCTAssertEqual(got9, "OK")
        try await log.wait(from: mark, "brightness 33 after restart") { Self.isValue($0, brightnessAddress, 33) }

        // A configuration change (a new bridged accessory) shows up after the next reconnect.
        let added = try await peer.command("add-switch Extra Switch")
        XCTAssertTrue(added.hasPrefix("OK "), added)
        mark = log.all.count
        let dropped = try await peer.command("drop")
        XCTAssertEqual(dropped, "OK")
        try await log.wait(from: mark, "extra switch added") {
            if case .accessoryAdded(let a) = $0 { a.name == "Extra Switch" } else { false }
        }

        // Identify goes to the accessory's Identify characteristic.
        try await source.identify(accessoryID: light.id)

        runner.cancel()
        _ = await runner.result

        // The accessory's own pairing list, then removal on both sides.
        let entries = try await controller.accessoryPairings(id: pairing.accessoryPairingID)
        XCTAssertEqual(
            entries.map(\.controllerPairingID.localizedUppercase), [pairing.controllerPairingID.uppercased()])
        XCTAssertEqual(entries.first?.isAdmin, true)
        try await controller.unpair(id: pairing.accessoryPairingID)
        let got10 = try await peer.command("pairings")
        XCTAssertEqual(got10, "PAIRINGS 0")
        XCTAssertEqual(try store.all().count, 0)
        await peer.stop()
    }
}
