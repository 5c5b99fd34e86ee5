import Crypto
import HAP
import HAPServer
import HomeModel
import XCTest

/// Our HAP-over-CoAP controller and accessory (issue 42) in one process, over the memory
/// link: what a user of either side sees, from pairing to events and a session lost.
final class CoAPPeersTests: XCTestCase {
    func testPairsAndReadsTheTreeTheFileDescribes() async throws {
        let peers = try await CoAPPeers()
        XCTAssertFalse(peers.accessory.status.isPaired)
        let pairing = try await peers.pair()
        XCTAssertEqual(pairing.accessoryPairingID, peers.accessory.status.pairingID)
        XCTAssertEqual(peers.accessory.pairings.map(\.id), [pairing.controllerPairingID])
        XCTAssertTrue(peers.accessory.status.isPaired)

        let controller = peers.controller(pairing)
        var problems: [String] = []
        let tree = try await controller.accessories(problems: &problems)
        XCTAssertEqual(problems, [])
        XCTAssertEqual(tree.count, 1)
        let served = try XCTUnwrap(tree.first)
        XCTAssertEqual(served.name, "Garage Door Opener")
        XCTAssertEqual(served.manufacturer, "Kilgo Devices, Inc.")
        // Every service and characteristic of the file, with its type, format and value; the
        // Pairing service (0x55) follows them.
        let file = peers.database.model
        XCTAssertEqual(served.services.map(\.type), file.services.map(\.type) + [StandardUUID.longForm("55")])
        for (got, want) in zip(served.services, file.services) {
            XCTAssertEqual(got.iid, want.iid)
            XCTAssertEqual(got.isPrimary, want.isPrimary, "service \(want.type)")
            XCTAssertEqual(got.characteristics.map(\.iid), want.characteristics.map(\.iid))
            XCTAssertEqual(got.characteristics.map(\.type), want.characteristics.map(\.type))
            for (g, w) in zip(got.characteristics, want.characteristics) {
                XCTAssertEqual(g.metadata.format, w.metadata.format, "characteristic \(w.type)")
                XCTAssertEqual(g.metadata.permissions, w.metadata.permissions, "characteristic \(w.type)")
                XCTAssertEqual(g.metadata.unit, w.metadata.unit, "characteristic \(w.type)")
                XCTAssertEqual(g.metadata.minValue, w.metadata.minValue, "characteristic \(w.type)")
                XCTAssertEqual(g.metadata.maxValue, w.metadata.maxValue, "characteristic \(w.type)")
                guard w.metadata.permissions.contains(.read) else { continue }
                if w.metadata.format == .float {
                    // HAP-BLE carries a float in 32 bits.
                    XCTAssertEqual(
                        try XCTUnwrap(g.value?.doubleValue), try XCTUnwrap(w.value?.doubleValue), accuracy: 1e-6,
                        "characteristic \(w.type)")
                } else {
                    XCTAssertEqual(g.value, w.value, "characteristic \(w.type)")
                }
            }
        }
        let light = try XCTUnwrap(served.services.first { $0.type == StandardUUID.longForm("43") })
        let fade = try XCTUnwrap(light.characteristics.first { $0.name == "Fade Rate" })
        XCTAssertEqual(fade.type, "7E536242-341C-4862-BE90-272CE15BD633")
        XCTAssertEqual(fade.value?.doubleValue, 1.0)
        // Pair-setup's three steps on /1, pair-verify's two on /2, then the session on /.
        XCTAssertEqual(peers.link.posts(from: "controller-a"), ["/1", "/1", "/1", "/2", "/2", "/", "/"])
    }

    func testReadsWritesAndTimedWrites() async throws {
        let peers = try await CoAPPeers()
        let controller = peers.controller(try await peers.pair())
        _ = try await controller.attributeDatabase()
        let brightness = peers.database.iid("43", "8")
        let on = peers.database.iid("43", "25")
        let targetDoor = peers.database.iid("41", "32")

        let got1 = try await controller.read(brightness)
        XCTAssertEqual(got1, .int(80))
        try await controller.write(brightness, .int(30))
        XCTAssertEqual(peers.database.value(brightness), .int(30))
        let got2 = try await controller.read(brightness)
        XCTAssertEqual(got2, .int(30))

        try await controller.timedWrite(on, .bool(true))
        XCTAssertEqual(peers.database.value(on), .bool(true))
        let got3 = try await controller.read(on)
        XCTAssertEqual(got3, .bool(true))
        try await controller.timedWrite(targetDoor, .uint(0))
        XCTAssertEqual(peers.database.value(targetDoor), .int(0))

        // Several at once, one refused: the others still answer.
        let results = try await controller.read([on, brightness, 999])
        XCTAssertEqual(try results[on]?.get(), .bool(true))
        XCTAssertEqual(try results[brightness]?.get(), .int(30))
        XCTAssertThrowsError(try results[999]?.get()) { error in
            XCTAssertEqual((error as? HAPError)?.code, .accessoryStatus)
            XCTAssertTrue("\(error)".contains("invalidInstanceID"), "\(error)")
        }
        // Out of range (brightness is 0-100): refused, the value unchanged.
        do {
            try await controller.write(brightness, .int(101))
            XCTFail("a brightness of 101 was accepted")
        } catch {
            XCTAssertEqual(error.code, .accessoryStatus)
            XCTAssertTrue(error.message.contains("invalidRequest"), error.message)
        }
        XCTAssertEqual(peers.database.value(brightness), .int(30))
    }

    func testEventsReachSubscribersButNotTheWriter() async throws {
        let peers = try await CoAPPeers()
        let pairing = try await peers.pair()
        // The same controller identity from two addresses: two sessions.
        let a = peers.controller(pairing, at: "controller-a")
        let b = peers.controller(pairing, at: "controller-b")
        _ = try await a.attributeDatabase()
        _ = try await b.attributeDatabase()
        let brightness = peers.database.iid("43", "8")
        try await a.subscribe([brightness])
        try await b.subscribe([brightness])
        var aEvents = a.events.makeAsyncIterator()
        var bEvents = b.events.makeAsyncIterator()

        try await a.write(brightness, .int(55))
        let seenByB = await bEvents.next()
        XCTAssertEqual(seenByB?.iid, brightness)
        XCTAssertEqual(seenByB?.value, .int(55))

        // From inside: both hear it; the first A hears is this one, not its own write.
        let reached = await peers.database.set(brightness, .int(12))
        XCTAssertEqual(reached, 2)
        let seenByA = await aEvents.next()
        XCTAssertEqual(seenByA?.value, .int(12))
        let got4 = await bEvents.next()?.value
        XCTAssertEqual(got4, .int(12))

        // Unsubscribed: no longer.
        try await b.subscribe([brightness], false)
        let got5 = await peers.database.set(brightness, .int(13))
        XCTAssertEqual(got5, 1)
        let got6 = await aEvents.next()?.value
        XCTAssertEqual(got6, .int(13))
    }

    func testAWrongSetupCodeIsRefused() async throws {
        let peers = try await CoAPPeers()
        do {
            _ = try await peers.pair(code: "271-82-818")
            XCTFail("paired with a wrong setup code")
        } catch let error as HAPError {
            XCTAssertEqual(error.code, .wrongSetupCode)
        }
        XCTAssertFalse(peers.accessory.status.isPaired)
        XCTAssertEqual(peers.accessory.pairings, [])
        // The right code still pairs.
        let pairing = try await peers.pair()
        XCTAssertEqual(peers.accessory.pairings.map(\.id), [pairing.controllerPairingID])
        // And once paired, nobody else does.
        do {
            _ = try await peers.pair(from: "controller-b")
            XCTFail("paired twice")
        } catch let error as HAPError {
            XCTAssertEqual(error.code, .alreadyPaired)
        }
    }

    func testASessionTheAccessoryForgotIsVerifiedAgain() async throws {
        let peers = try await CoAPPeers()
        let controller = peers.controller(try await peers.pair())
        _ = try await controller.attributeDatabase()
        let brightness = peers.database.iid("43", "8")
        let got7 = try await controller.read(brightness)
        XCTAssertEqual(got7, .int(80))
        let got8 = await controller.verifications
        XCTAssertEqual(got8, 1)

        peers.accessory.forgetSessions()
        XCTAssertEqual(peers.accessory.sessionCount, 0)
        let got9 = try await controller.read(brightness)
        XCTAssertEqual(got9, .int(80))
        let got10 = await controller.verifications
        XCTAssertEqual(got10, 2)
        XCTAssertEqual(peers.accessory.sessionCount, 1)
        // The read that got 4.04, pair-verify's two steps, the read again.
        XCTAssertEqual(Array(peers.link.posts(from: "controller-a").suffix(4)), ["/", "/2", "/2", "/"])
    }

    func testALostAnswerOrRequestDoesNotEndTheSession() async throws {
        let peers = try await CoAPPeers()
        let controller = peers.controller(try await peers.pair())
        _ = try await controller.attributeDatabase()
        let brightness = peers.database.iid("43", "8")

        // The accessory answered (its counter moved), the answer never came.
        peers.link.loseNextAnswer(to: "controller-a")
        do {
            _ = try await controller.read(brightness)
            XCTFail("a lost answer read a value")
        } catch {
            XCTAssertEqual(error.code, .timeout)
        }
        let got11 = try await controller.read(brightness)
        XCTAssertEqual(got11, .int(80))
        // The request never came (our counter moved).
        peers.link.loseNextRequest(from: "controller-a")
        do {
            try await controller.write(brightness, .int(20))
            XCTFail("a lost request wrote")
        } catch {
            XCTAssertEqual(error.code, .timeout)
        }
        XCTAssertEqual(peers.database.value(brightness), .int(80))
        try await controller.write(brightness, .int(21))
        XCTAssertEqual(peers.database.value(brightness), .int(21))
        // All on the first session.
        let got12 = await controller.verifications
        XCTAssertEqual(got12, 1)
        XCTAssertEqual(peers.link.posts(from: "controller-a").filter { $0 == "/2" }.count, 2)
    }

    func testPairingsAreListedAndRemoved() async throws {
        let peers = try await CoAPPeers()
        let pairing = try await peers.pair()
        let controller = peers.controller(pairing)
        let listed = try await controller.listPairings()
        XCTAssertEqual(listed.map(\.controllerPairingID), [pairing.controllerPairingID])
        XCTAssertEqual(listed.map(\.isAdmin), [true])
        XCTAssertEqual(listed.first.flatMap { [UInt8](hex: $0.publicKey) }, [UInt8](hex: pairing.controllerLTPK))

        try await controller.removePairing(pairing.controllerPairingID)
        XCTAssertFalse(peers.accessory.status.isPaired)
        XCTAssertEqual(peers.accessory.sessionCount, 0)
        // The accessory no longer knows us: a request ends in a refused pair-verify.
        do {
            _ = try await controller.read(peers.database.iid("43", "8"))
            XCTFail("read after the pairing was removed")
        } catch {
            XCTAssertEqual(error.code, .authentication, error.message)
        }
    }

    func testOnlyAnAdminManagesPairings() async throws {
        let peers = try await CoAPPeers()
        let adminPairing = try await peers.pair()
        let admin = peers.controller(adminPairing)
        let key = Curve25519.Signing.PrivateKey()
        let hex = { (b: [UInt8]) in b.map { String(format: "%02x", $0) }.joined() }
        try await admin.addPairing("guest", publicKey: Array(key.publicKey.rawRepresentation), isAdmin: false)
        XCTAssertEqual(peers.accessory.pairings.map(\.id), [adminPairing.controllerPairingID, "guest"])
        XCTAssertEqual(peers.accessory.pairings.map(\.isAdmin), [true, false])

        var guestPairing = adminPairing
        guestPairing.controllerPairingID = "guest"
        guestPairing.controllerLTSK = hex(Array(key.rawRepresentation))
        guestPairing.controllerLTPK = hex(Array(key.publicKey.rawRepresentation))
        let guest = peers.controller(guestPairing, at: "controller-b")
        _ = try await guest.attributeDatabase()
        let brightness = peers.database.iid("43", "8")
        let read = try await guest.read(brightness)
        XCTAssertEqual(read, .int(80))
        // Not an admin: no listing, no removing; nothing changed.
        do {
            _ = try await guest.listPairings()
            XCTFail("a guest listed the pairings")
        } catch {
            XCTAssertEqual(error.code, .insufficientPrivileges, error.message)
        }
        do {
            try await guest.removePairing(adminPairing.controllerPairingID)
            XCTFail("a guest removed the admin")
        } catch {
            XCTAssertEqual(error.code, .insufficientPrivileges, error.message)
        }
        XCTAssertEqual(peers.accessory.pairings.map(\.id), [adminPairing.controllerPairingID, "guest"])

        // The admin removes the guest: the guest's session ends, the admin's stays.
        try await admin.removePairing("guest")
        XCTAssertEqual(peers.accessory.pairings.map(\.id), [adminPairing.controllerPairingID])
        XCTAssertEqual(peers.accessory.sessionCount, 1)
        do {
            _ = try await guest.read(brightness)
            XCTFail("a removed guest read")
        } catch {
            XCTAssertEqual(error.code, .unknownPairing, error.message)
        }
        let still = try await admin.read(brightness)
        XCTAssertEqual(still, .int(80))
        let verifications = await admin.verifications
        XCTAssertEqual(verifications, 1)
    }
}
