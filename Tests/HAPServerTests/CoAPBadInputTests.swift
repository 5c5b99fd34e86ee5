import Crypto
@testable import HAP
import HAPServer
import HomeModel
import XCTest

/// What the HAP-over-CoAP accessory answers to requests it cannot serve: a clear code or
/// status, never a crash, and the session kept when the fault is the request's, not the
/// session's.
final class CoAPBadInputTests: XCTestCase {
    func testUnauthenticatedResources() async throws {
        let peers = try await CoAPPeers()
        let stranger = peers.link.exchange(from: "stranger")
        // No session: `/` is 4.04, whatever comes.
        let got1 = try await stranger.post("/", [1, 2, 3]).code
        XCTAssertEqual(got1, .notFound)
        let got2 = try await stranger.post("/", []).code
        XCTAssertEqual(got2, .notFound)
        let got3 = try await stranger.post("/7", []).code
        XCTAssertEqual(got3, .notFound)
        // Pairing steps that are no TLV: 4.00 with TLV error Unknown.
        for path in ["/1", "/2"] {
            let reply = try await stranger.post(path, [0x06, 0x05, 0x01])
            XCTAssertEqual(reply.code, .badRequest, path)
            XCTAssertEqual(try TLV8.decode(reply.payload)[TLVType.error], [1], path)
        }
        // A pair-verify before anyone paired: refused with Authentication.
        var m1 = TLV8()
        m1.append(TLVType.state, byte: 1)
        m1.append(TLVType.publicKey, [UInt8](repeating: 9, count: 32))
        let refused = try await stranger.post("/2", m1.encoded())
        XCTAssertEqual(refused.code, .changed)
        XCTAssertEqual(try TLV8.decode(refused.payload)[TLVType.error], [2])
        // Identify: while unpaired only.
        let got4 = try await HAPCoAPController.identify(exchange: stranger)
        XCTAssertTrue(got4)
        _ = try await peers.pair()
        let got5 = try await HAPCoAPController.identify(exchange: stranger)
        XCTAssertFalse(got5)
    }

    func testMalformedPDUsAreRefusedAndTheSessionStays() async throws {
        let peers = try await CoAPPeers()
        let controller = peers.controller(try await peers.pair())
        _ = try await controller.attributeDatabase()
        let brightness = peers.database.iid("43", "8")

        // A header cut short, a body past the end: 4.00 naming the fault.
        for bad: [UInt8] in [[0x00, 0x03, 0x01], [0x00, 0x03, 0x01, UInt8(brightness), 0x00, 0x09, 0x00, 0x01]] {
            do {
                _ = try await controller.exchangeSealed(bad)
                XCTFail("a malformed PDU was answered")
            } catch {
                XCTAssertEqual(error.code, .protocolError)
                XCTAssertTrue(error.message.contains("4.00"), error.message)
                XCTAssertTrue(error.message.contains("PDU at byte 0"), error.message)
            }
        }
        // An unknown opcode and a signature read beside a good read: each gets its status.
        let plain: [UInt8] =
            [0x00, 0x7F, 0x11, 0x01, 0x00, 0x00, 0x00]
            + (try CoAPRequestPDU(.serviceSignatureRead, tid: 0x12, iid: 1).encoded())
            + (try CoAPRequestPDU.read(iid: brightness, tid: 0x13).encoded())
            + (try CoAPRequestPDU.write(iid: brightness, tid: 0x14, value: [1, 2, 3, 4, 5]).encoded())
            + (try CoAPRequestPDU.read(iid: brightness, tid: 0x15).encoded())
        let responses = try CoAPResponsePDU.decodeAll(try await controller.exchangeSealed(plain))
        XCTAssertEqual(responses.map(\.tid), [0x11, 0x12, 0x13, 0x14, 0x15])
        XCTAssertEqual(
            responses.map(\.status), [.unsupportedPDU, .unsupportedPDU, .success, .invalidRequest, .success])
        XCTAssertEqual(try responses[2].value(), [80, 0, 0, 0])
        // A body that is no TLV, an execute with nothing prepared.
        let more = try CoAPResponsePDU.decodeAll(
            try await controller.exchangeSealed(
                CoAPRequestPDU(.characteristicWrite, tid: 0x21, iid: brightness, body: [0x01, 0x09]).encoded()
                    + CoAPRequestPDU.executeWrite(iid: brightness, tid: 0x22).encoded()))
        XCTAssertEqual(more.map(\.status), [.invalidRequest, .invalidRequest])
        XCTAssertEqual(peers.database.value(brightness), .int(80))
        // Same session throughout.
        let got6 = try await controller.read(brightness)
        XCTAssertEqual(got6, .int(80))
        let got7 = await controller.verifications
        XCTAssertEqual(got7, 1)
    }

    func testGarbageOnTheSessionEndsItAndANewVerifyReplacesIt() async throws {
        let peers = try await CoAPPeers()
        let controller = peers.controller(try await peers.pair())
        _ = try await controller.attributeDatabase()
        let brightness = peers.database.iid("43", "8")
        XCTAssertEqual(peers.accessory.sessionCount, 1)

        // From the session's address, bytes no counter opens: the session is out of step.
        let raw = peers.link.exchange(from: "controller-a")
        let got8 = try await raw.post("/", [UInt8](repeating: 0xAB, count: 40)).code
        XCTAssertEqual(got8, .notFound)
        let got9 = try await raw.post("/", [1, 2]).code
        XCTAssertEqual(got9, .notFound)
        XCTAssertEqual(peers.accessory.sessionCount, 0)
        let got10 = try await controller.read(brightness)
        XCTAssertEqual(got10, .int(80))
        let got11 = await controller.verifications
        XCTAssertEqual(got11, 2)

        // A pair-verify from the same address replaces its session (one session, new keys).
        try await controller.verify()
        XCTAssertEqual(peers.accessory.sessionCount, 1)
        let got12 = try await controller.read(brightness)
        XCTAssertEqual(got12, .int(80))
        let got13 = await controller.verifications
        XCTAssertEqual(got13, 3)
    }

    func testManyAddressesNeverPushOutASession() async throws {
        let peers = try await CoAPPeers { $0.maxPeers = 2 }
        let pairing = try await peers.pair(from: "controller-a")
        let a = peers.controller(pairing, at: "controller-a")
        try await a.verify()
        var m1 = TLV8()
        m1.append(TLVType.state, byte: 1)
        m1.append(TLVType.publicKey, Array(Curve25519.KeyAgreement.PrivateKey().publicKey.rawRepresentation))
        // A stranger takes the second place, a second stranger pushes it out (it holds nothing).
        for stranger in ["stranger-1", "stranger-2"] {
            let code = try await peers.link.exchange(from: stranger).post("/2", m1.encoded()).code
            XCTAssertEqual(code, .changed, stranger)
        }
        // The same controller from a second address: its session takes the second place.
        let c = peers.controller(pairing, at: "controller-c")
        try await c.verify()
        XCTAssertEqual(peers.accessory.sessionCount, 2)
        // Now every place holds a session: a newcomer is refused, no session is dropped.
        let refused = try await peers.link.exchange(from: "stranger-3").post("/2", m1.encoded()).code
        XCTAssertEqual(refused, .serviceUnavailable)
        let brightness = peers.database.iid("43", "8")
        _ = try await a.attributeDatabase()
        let read = try await a.read(brightness)
        XCTAssertEqual(read, .int(80))
        let verifications = await a.verifications
        XCTAssertEqual(verifications, 1)
        XCTAssertEqual(peers.accessory.sessionCount, 2)
    }

    func testADatabaseThatDoesNotAnswerIsRefusedAtItsDeadline() async throws {
        let peers = try await CoAPPeers()
        let controller = peers.controller(try await peers.pair())
        _ = try await controller.attributeDatabase()
        let brightness = peers.database.iid("43", "8")
        peers.database.stalled = true
        for attempt in ["read", "write"] {
            do {
                if attempt == "read" {
                    _ = try await controller.read(brightness)
                } else {
                    try await controller.write(brightness, .int(10))
                }
                XCTFail("a stalled \(attempt) was answered")
            } catch {
                XCTAssertEqual(error.code, .accessoryStatus, attempt)
                XCTAssertTrue(error.message.contains("maxProcedures"), error.message)
            }
        }
        peers.database.stalled = false
        XCTAssertEqual(peers.database.value(brightness), .int(80))
        let read = try await controller.read(brightness)
        XCTAssertEqual(read, .int(80))
        let verifications = await controller.verifications
        XCTAssertEqual(verifications, 1)
    }
}
