import Foundation
import HAP
import HAPServer
import HAPServerTestSupport
import HomeModel
import TestSupport
import XCTest

/// What a hostile or broken peer sends gets a clear answer, or its connection closed, and the
/// server goes on serving everyone else.
final class BadInputTests: XCTestCase {
    func testMalformedTLV8IsABadRequestAndTheConnectionStaysUsable() async throws {
        try await ServerHarness.with { h in
            let client = try await h.connect()
            // A type with a length running past the end.
            let bad = try await blocking {
                try client.request("POST", "/pair-setup", body: [6, 9, 1], contentType: "application/pairing+tlv8")
            }
            XCTAssertEqual(bad.status, 400)
            XCTAssertEqual(bad.tlv?[TLVType.error], [1])
            let badVerify = try await blocking {
                try client.request("POST", "/pair-verify", body: [3], contentType: "application/pairing+tlv8")
            }
            XCTAssertEqual(badVerify.status, 400)
            // The same connection pairs afterwards.
            let identity = try await blocking { try client.pairSetup(code: ServerHarness.code.revealed) }
            _ = try await h.session(for: identity)
        }
    }

    func testMalformedHTTPClosesThatConnectionOnly() async throws {
        try await ServerHarness.with { h in
            let (session, _) = try await h.pairedSession()
            for garbage in ["HELLO\r\n\r\n", "GET /accessories HTTP/1.1\r\nContent-Length: x\r\n\r\n"] {
                let client = try await h.connect()
                let answer = try await blocking { () throws -> (RawHAPClient.Message, Bool) in
                    try client.sendRaw(Array(garbage.utf8))
                    return (try client.next(), client.isClosed(within: 10))
                }
                XCTAssertEqual(answer.0.status, 400)
                XCTAssertTrue(answer.1)
            }
            // Bytes that never make a request head: closed once the head is too long.
            let flood = try await h.connect()
            let closed = try await blocking { () throws -> Bool in
                try flood.sendRaw([UInt8](repeating: 0x41, count: 9000))
                return flood.isClosed(within: 10)
            }
            XCTAssertTrue(closed)
            let answer1 = try await session.call("GET", "/characteristics?id=2.10")
            XCTAssertEqual(answer1.status, 200)
        }
    }

    func testGarbageAfterPairVerifyClosesThatSession() async throws {
        try await ServerHarness.with { h in
            let (session, identity) = try await h.pairedSession()
            let victim = try await h.session(for: identity)
            // A frame of plausible length whose tag is wrong.
            let closed = try await blocking { () throws -> Bool in
                try victim.sendRaw([20, 0] + [UInt8](repeating: 0x5A, count: 36))
                return victim.isClosed(within: 10)
            }
            XCTAssertTrue(closed)
            // A frame longer than HAP allows.
            let other = try await h.session(for: identity)
            let closedToo = try await blocking { () throws -> Bool in
                try other.sendRaw([0xFF, 0xFF] + [UInt8](repeating: 1, count: 64))
                return other.isClosed(within: 10)
            }
            XCTAssertTrue(closedToo)
            let answer2 = try await session.call("GET", "/characteristics?id=2.10")
            XCTAssertEqual(answer2.status, 200)
        }
    }

    func testMalformedJSONIsABadRequestInTheSession() async throws {
        try await ServerHarness.with { h in
            let (session, _) = try await h.pairedSession()
            for body in ["{", "[]", "{\"characteristics\": 3}", "{\"characteristics\": [{\"aid\": \"x\"}]}"] {
                let answer = try await blocking {
                    try session.request("PUT", "/characteristics", body: Array(body.utf8))
                }
                XCTAssertEqual(answer.status, 400, body)
                XCTAssertEqual(answer.json?["status"], -70410, body)
            }
            let answer3 = try await session.call("GET", "/characteristics")
            XCTAssertEqual(answer3.status, 400)
            let answer4 = try await session.call("GET", "/characteristics?id=1.x")
            XCTAssertEqual(answer4.status, 400)
            let answer5 = try await session.call("GET", "/nowhere")
            XCTAssertEqual(answer5.status, 404)
            let answer6 = try await session.call("GET", "/characteristics?id=2.10")
            XCTAssertEqual(answer6.status, 200)
        }
    }

    func testRequestsThatNeedASessionAreRefusedWithoutOne() async throws {
        try await ServerHarness.with { h in
            let client = try await h.connect()
            let answer = try await client.call("GET", "/accessories")
            XCTAssertEqual(answer.status, 470)
            XCTAssertEqual(answer.json?["status"], -70401)
            // Before anyone paired, pair-verify has nobody to verify.
            let verify = try await blocking {
                try client.tlv(
                    "/pair-verify", [(TLVType.state, [1]), (TLVType.publicKey, [UInt8](repeating: 9, count: 32))])
            }
            XCTAssertEqual(verify.tlv?[TLVType.error], [2])
        }
    }

    func testAConnectionThatNeverVerifiesIsClosedAndReleasesPairSetup() async throws {
        // The deadline passes when the test says: a refusal while it holds, then a close.
        let deadlines = HeldDeadlines()
        try await ServerHarness.with(configure: { $0.verifyDeadline = deadlines.wait }) { h in
            let stalled = try await h.connect()
            let m2 = try await blocking {
                try stalled.tlv("/pair-setup", [(TLVType.state, [1]), (TLVType.method, [0])])
            }
            XCTAssertNil(m2.tlv?[TLVType.error])
            let other = try await h.connect()
            let busy = try await blocking {
                try other.tlv("/pair-setup", [(TLVType.state, [1]), (TLVType.method, [0])])
            }
            XCTAssertEqual(busy.tlv?[TLVType.error], [7])
            // The stalled one is closed at its deadline (the other one's passes too); the
            // pair-setup is free again.
            try await waitUntil("both connections' deadlines are under way") { deadlines.count == 2 }
            deadlines.pass()
            let closed = try await stalled.closes()
            XCTAssertTrue(closed)
            let third = try await h.connect()
            let free = try await blocking {
                try third.tlv("/pair-setup", [(TLVType.state, [1]), (TLVType.method, [0])])
            }
            XCTAssertEqual(free.tlv?[TLVType.state], [2])
            XCTAssertNil(free.tlv?[TLVType.error])
        }
    }

    func testAWrongSetupCodeIsRefusedAndTheRightOneStillWorks() async throws {
        try await ServerHarness.with { h in
            let client = try await h.connect()
            let failure = try await blocking { () -> TLVError? in
                do {
                    _ = try client.pairSetup(code: "111-22-333")
                    return nil
                } catch let error as TLVError {
                    return error
                }
            }
            XCTAssertEqual(failure, TLVError(step: 4, code: 2))
            XCTAssertFalse(h.server.status.isPaired)
            _ = try await blocking { try client.pairSetup(code: ServerHarness.code.revealed) }
            XCTAssertTrue(h.server.status.isPaired)
        }
    }
}
