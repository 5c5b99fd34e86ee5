import CoAP
import HAP
import HAPServer
import HAPThread
import HomeModel
import XCTest

/// Our HAP-over-CoAP controller and accessory (issue 42) over real UDP on ::1, each on libcoap
/// (HAPThread's adapters on the CoAP module): CoAPPeersTests' assertions, held over the wire.
final class CoAPUDPPeersTests: XCTestCase {
    func testPairsAndReadsTheTreeTheFileDescribes() async throws {
        let peers = try CoAPUDPPeers()
        try await peers.serve { served in
            XCTAssertFalse(served.accessory.status.isPaired)
            let pairing = try await CoAPUDPPeers.pair(served.address)
            XCTAssertEqual(pairing.accessoryPairingID, served.accessory.status.pairingID)
            XCTAssertEqual(served.accessory.pairings.map(\.id), [pairing.controllerPairingID])
            XCTAssertTrue(served.accessory.status.isPaired)
            // Recorded as the accessory's address, as over IP.
            XCTAssertEqual(pairing.host, "::1")
            XCTAssertEqual(pairing.port, Int(served.address.port))

            try await CoAPUDPPeers.withController(pairing, served.address) { c in
                var problems: [String] = []
                let tree = try await c.controller.accessories(problems: &problems)
                XCTAssertEqual(problems, [])
                try assertServesTheFile(tree, peers.database.model)
                // Pair-verify's two steps on /2, then the session on /.
                XCTAssertEqual(c.posts, ["/2", "/2", "/", "/"])
            }
        }
    }

    func testReadsWritesAndTimedWrites() async throws {
        let peers = try CoAPUDPPeers()
        let database = peers.database
        try await peers.serve { served in
            let pairing = try await CoAPUDPPeers.pair(served.address)
            try await CoAPUDPPeers.withController(pairing, served.address) { c in
                let controller = c.controller
                _ = try await controller.attributeDatabase()
                let brightness = database.iid("43", "8")
                let on = database.iid("43", "25")
                let targetDoor = database.iid("41", "32")

                let got1 = try await controller.read(brightness)
                XCTAssertEqual(got1, .int(80))
                try await controller.write(brightness, .int(30))
                XCTAssertEqual(database.value(brightness), .int(30))
                let got2 = try await controller.read(brightness)
                XCTAssertEqual(got2, .int(30))

                try await controller.timedWrite(on, .bool(true))
                XCTAssertEqual(database.value(on), .bool(true))
                let got3 = try await controller.read(on)
                XCTAssertEqual(got3, .bool(true))
                try await controller.timedWrite(targetDoor, .uint(0))
                XCTAssertEqual(database.value(targetDoor), .int(0))

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
                } catch let error as HAPError {
                    XCTAssertEqual(error.code, .accessoryStatus)
                    XCTAssertTrue(error.message.contains("invalidRequest"), error.message)
                }
                XCTAssertEqual(database.value(brightness), .int(30))
            }
        }
    }

    func testEventsReachSubscribersButNotTheWriter() async throws {
        let peers = try CoAPUDPPeers()
        let database = peers.database
        try await peers.serve { served in
            let pairing = try await CoAPUDPPeers.pair(served.address)
            // The same controller identity from two clients (two ports): two sessions.
            try await CoAPUDPPeers.withController(pairing, served.address) { ca in
                try await CoAPUDPPeers.withController(pairing, served.address) { cb in
                    let (a, b) = (ca.controller, cb.controller)
                    _ = try await a.attributeDatabase()
                    _ = try await b.attributeDatabase()
                    XCTAssertEqual(served.accessory.sessionCount, 2)
                    let brightness = database.iid("43", "8")
                    try await a.subscribe([brightness])
                    try await b.subscribe([brightness])

                    try await a.write(brightness, .int(55))
                    let seenByB = await b.nextEvent()
                    XCTAssertEqual(seenByB?.iid, brightness)
                    XCTAssertEqual(seenByB?.value, .int(55))

                    // From inside: both hear it; the first A hears is this one, not its own write.
                    let reached = await database.set(brightness, .int(12))
                    XCTAssertEqual(reached, 2)
                    let seenByA = await a.nextEvent()
                    XCTAssertEqual(seenByA?.value, .int(12))
                    let got4 = await b.nextEvent()?.value
                    XCTAssertEqual(got4, .int(12))

                    // Unsubscribed: no longer.
                    try await b.subscribe([brightness], false)
                    let got5 = await database.set(brightness, .int(13))
                    XCTAssertEqual(got5, 1)
                    let got6 = await a.nextEvent()?.value
                    XCTAssertEqual(got6, .int(13))
                }
            }
        }
    }

    func testAWrongSetupCodeIsRefused() async throws {
        let peers = try CoAPUDPPeers()
        try await peers.serve { served in
            do {
                _ = try await CoAPUDPPeers.pair(served.address, code: "271-82-818")
                XCTFail("paired with a wrong setup code")
            } catch let error as HAPError {
                XCTAssertEqual(error.code, .wrongSetupCode)
            }
            XCTAssertFalse(served.accessory.status.isPaired)
            XCTAssertEqual(served.accessory.pairings, [])
            // The right code still pairs.
            let pairing = try await CoAPUDPPeers.pair(served.address)
            XCTAssertEqual(served.accessory.pairings.map(\.id), [pairing.controllerPairingID])
            // And once paired, nobody else does.
            do {
                _ = try await CoAPUDPPeers.pair(served.address)
                XCTFail("paired twice")
            } catch let error as HAPError {
                XCTAssertEqual(error.code, .alreadyPaired)
            }
        }
    }

    /// The accessory restarted: a new server on the same port and state directory. It knows
    /// the pairing and no session: the controller's next request gets 4.04, it verifies again.
    func testARestartedAccessoryIsVerifiedAgain() async throws {
        let peers = try CoAPUDPPeers()
        let brightness = peers.database.iid("43", "8")
        let (pairing, port) = try await peers.serve { served in
            (try await CoAPUDPPeers.pair(served.address), served.address.port)
        }
        let accessory = CoAPPeer(host: "::1", port: port)
        try await CoAPUDPPeers.withController(pairing, accessory) { c in
            let controller = c.controller
            try await peers.serve(port: port) { served in
                _ = try await controller.attributeDatabase()
                let got7 = try await controller.read(brightness)
                XCTAssertEqual(got7, .int(80))
                let got8 = await controller.verifications
                XCTAssertEqual(got8, 1)
                XCTAssertEqual(served.accessory.sessionCount, 1)
            }
            try await peers.serve(port: port) { served in
                XCTAssertEqual(served.accessory.pairings.map(\.id), [pairing.controllerPairingID])
                XCTAssertEqual(served.accessory.sessionCount, 0)
                let got9 = try await controller.read(brightness)
                XCTAssertEqual(got9, .int(80))
                let got10 = await controller.verifications
                XCTAssertEqual(got10, 2)
                XCTAssertEqual(served.accessory.sessionCount, 1)
                // The read that got 4.04, pair-verify's two steps, the read again.
                XCTAssertEqual(Array(c.posts.suffix(4)), ["/", "/2", "/2", "/"])
            }
        }
    }
}
