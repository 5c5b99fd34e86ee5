import Crypto
import Foundation
import HAP
import HAPServer
import HAPServerTestSupport
import HomeModel
import Synchronization
import TestSupport
import XCTest

/// The server over real sockets with a controller written byte by byte (`RawHAPClient`): the
/// endpoints, their HAP status codes, sessions and events, pairings, and a restart.
final class AccessoryServerTests: XCTestCase {
    func testPairReadWriteAndTheStatusCodes() async throws {
        try await ServerHarness.with { h in
            XCTAssertEqual(h.server.status.statusFlags, 1)
            let (session, _) = try await h.pairedSession()
            XCTAssertTrue(h.server.status.isPaired)
            XCTAssertEqual(h.server.status.statusFlags, 0)

            let tree = try await session.call("GET", "/accessories")
            XCTAssertEqual(tree.status, 200)
            let accessories = try XCTUnwrap(tree.json?["accessories"]?.arrayValue)
            XCTAssertEqual(accessories.compactMap { $0["aid"]?.intValue }, [1, 2, 3, 4])
            let brightness = try XCTUnwrap(accessories[1]["services"]?[1]?["characteristics"]?[1])
            XCTAssertEqual(brightness["unit"], "percentage")
            XCTAssertEqual(brightness["maxValue"], 100)
            XCTAssertEqual(brightness["perms"], ["pr", "pw", "ev"])
            XCTAssertEqual(brightness["value"], 50)
            // A write-only characteristic has no value in the tree.
            XCTAssertNil(accessories[0]["services"]?[0]?["characteristics"]?[0]?["value"])

            let read = try await session.call("GET", "/characteristics?id=2.10,3.9&meta=1&perms=1&type=1&ev=1")
            XCTAssertEqual(read.status, 200)
            XCTAssertEqual(read.json?["characteristics"]?[0]?["value"], 50)
            XCTAssertEqual(read.json?["characteristics"]?[0]?["ev"], false)
            XCTAssertEqual(read.json?["characteristics"]?[1]?["unit"], "celsius")
            XCTAssertEqual(read.json?["characteristics"]?[1]?["type"], "11")
            XCTAssertNil(read.json?["characteristics"]?[0]?["status"])

            let write = try await session.call(
                "PUT", "/characteristics", ["characteristics": [["aid": 2, "iid": 10, "value": 75]]])
            XCTAssertEqual(write.status, 204)
            XCTAssertEqual(h.bridge.value(TestBridge.brightness), 75)

            // Not found, write-only, read-only, out of range, unreachable: 207 with each status.
            h.bridge.setUnreachable(3)
            let mixed = try await session.call("GET", "/characteristics?id=2.10,9.9,1.2,3.9")
            XCTAssertEqual(mixed.status, 207)
            XCTAssertEqual(
                mixed.json?["characteristics"]?.arrayValue?.map { $0["status"]?.intValue ?? 1 },
                [0, -70409, -70405, -70402])
            XCTAssertEqual(mixed.json?["characteristics"]?[0]?["value"], 75)
            let refused = try await session.call(
                "PUT", "/characteristics",
                [
                    "characteristics": [
                        ["aid": 1, "iid": 3, "value": "x"], ["aid": 2, "iid": 10, "value": 101],
                        ["aid": 2, "iid": 9, "value": true], ["aid": 7, "iid": 1, "value": 1],
                        ["aid": 3, "iid": 9, "ev": true],
                    ]
                ])
            XCTAssertEqual(refused.status, 207)
            XCTAssertEqual(
                refused.json?["characteristics"]?.arrayValue?.map { $0["status"]?.intValue ?? 1 },
                [-70404, -70410, 0, -70409, 0])
            XCTAssertEqual(h.bridge.value(TestBridge.lampOn), true)
            XCTAssertEqual(h.bridge.value(TestBridge.brightness), 75)
        }
    }

    func testTimedWrites() async throws {
        try await ServerHarness.with { h in
            let (session, _) = try await h.pairedSession()
            let target: JSONValue = ["characteristics": [["aid": 4, "iid": 10, "value": 0]]]
            // A characteristic that needs a timed write refuses a plain one.
            let plain = try await session.call("PUT", "/characteristics", target)
            XCTAssertEqual(plain.json?["characteristics"]?[0]?["status"], -70410)
            let prepared = try await session.call("PUT", "/prepare", ["ttl": 5000, "pid": 42])
            XCTAssertEqual(prepared.status, 200)
            XCTAssertEqual(prepared.json?["status"], 0)
            // Another pid does not count, and uses the preparation up.
            let wrong: JSONValue = ["characteristics": [["aid": 4, "iid": 10, "value": 0]], "pid": 41]
            let answer1 = try await session.call("PUT", "/characteristics", wrong)
            XCTAssertEqual(answer1.json?["characteristics"]?[0]?["status"], -70410)
            _ = try await session.call("PUT", "/prepare", ["ttl": 5000, "pid": 43])
            let timed = try await session.call(
                "PUT", "/characteristics", ["characteristics": [["aid": 4, "iid": 10, "value": 0]], "pid": 43])
            XCTAssertEqual(timed.status, 204)
            XCTAssertEqual(h.bridge.value(TestBridge.lockTarget), 0)
            // Once only.
            let again = try await session.call(
                "PUT", "/characteristics", ["characteristics": [["aid": 4, "iid": 10, "value": 1]], "pid": 43])
            XCTAssertEqual(again.json?["characteristics"]?[0]?["status"], -70410)
            let answer2 = try await session.call("PUT", "/prepare", ["ttl": "soon"])
            XCTAssertEqual(answer2.json?["status"], -70410)
        }
    }

    func testADatabaseThatDoesNotAnswerIsATimeout() async throws {
        try await ServerHarness.with(configure: { $0.databaseTimeout = .milliseconds(300) }) { h in
            let (session, _) = try await h.pairedSession()
            h.bridge.setStalled(true)
            let read = try await session.call("GET", "/characteristics?id=2.10")
            XCTAssertEqual(read.status, 207)
            XCTAssertEqual(read.json?["characteristics"]?[0]?["status"], -70408)
            let write = try await session.call(
                "PUT", "/characteristics", ["characteristics": [["aid": 2, "iid": 10, "value": 1]]])
            XCTAssertEqual(write.json?["characteristics"]?[0]?["status"], -70408)
            h.bridge.setStalled(false)
            let answer3 = try await session.call("GET", "/characteristics?id=2.10")
            XCTAssertEqual(answer3.status, 200)
        }
    }

    func testIdentifyOnlyWhileUnpaired() async throws {
        try await ServerHarness.with { h in
            let first = try await h.connect()
            let identify = try await first.call("POST", "/identify")
            XCTAssertEqual(identify.status, 204)
            var identifies = h.bridge.identifies.makeAsyncIterator()
            _ = await identifies.next()
            _ = try await h.pairedSession()
            let refused = try await first.call("POST", "/identify")
            XCTAssertEqual(refused.status, 400)
            XCTAssertEqual(refused.json?["status"], -70401)
        }
    }

    func testEventsReachTheOtherSessionsNotTheWriter() async throws {
        try await ServerHarness.with { h in
            let (writer, identity) = try await h.pairedSession()
            let listener = try await h.session(for: identity)
            let bystander = try await h.session(for: identity)
            let subscribe: JSONValue = ["characteristics": [["aid": 2, "iid": 9, "ev": true]]]
            let answer4 = try await writer.call("PUT", "/characteristics", subscribe)
            XCTAssertEqual(answer4.status, 204)
            let answer5 = try await listener.call("PUT", "/characteristics", subscribe)
            XCTAssertEqual(answer5.status, 204)
            let flags = try await listener.call("GET", "/characteristics?id=2.9&ev=1")
            XCTAssertEqual(flags.json?["characteristics"]?[0]?["ev"], true)
            let wrote = try await writer.call(
                "PUT", "/characteristics", ["characteristics": [["aid": 2, "iid": 9, "value": 1]]])
            XCTAssertEqual(wrote.status, 204)
            let heard = try await listener.event()
            XCTAssertEqual(heard.json, ["characteristics": [["aid": 2, "iid": 9, "value": true]]])
            // A change from the accessory's side reaches both subscribers; it is the writer's
            // first event, so its own write sent it none.
            XCTAssertEqual(h.bridge.set(TestBridge.lampOn, .bool(false)), 2)
            let answer6 = try await writer.event()
            XCTAssertEqual(answer6.json?["characteristics"]?[0]?["value"], false)
            let answer7 = try await listener.event()
            XCTAssertEqual(answer7.json?["characteristics"]?[0]?["value"], false)
            // The bystander, never subscribed, got nothing: its next message is its own response.
            let response = try await bystander.call("GET", "/characteristics?id=2.9")
            XCTAssertEqual(response.status, 200)
            XCTAssertTrue(bystander.pendingEvents.isEmpty)
        }
    }

    func testNineSessionsAtOnce() async throws {
        try await ServerHarness.with { h in
            let (first, identity) = try await h.pairedSession()
            var sessions: [RawHAPClient] = [first]
            for _ in 0..<9 { sessions.append(try await h.session(for: identity)) }
            XCTAssertEqual(h.server.connectionCount.verified, 10)
            for session in sessions {
                let answer8 = try await session.call("GET", "/characteristics?id=2.10")
                XCTAssertEqual(answer8.status, 200)
            }
        }
    }

    func testPairingsAreForAdminsAndTheLastAdminTakesEveryoneWithIt() async throws {
        let changes = Mutex<[Bool]>([])
        try await ServerHarness.with(onStatusChange: { s in changes.withLock { $0.append(s.isPaired) } }) { h in
            let (admin, adminIdentity) = try await h.pairedSession()
            let userKey = Curve25519.Signing.PrivateKey()
            let userPublic = Array(userKey.publicKey.rawRepresentation)
            let add = try await blocking {
                try admin.tlv(
                    "/pairings",
                    [
                        (TLVType.state, [1]), (TLVType.method, [3]), (TLVType.identifier, Array("user-1".utf8)),
                        (TLVType.publicKey, userPublic), (TLVType.permissions, [0]),
                    ])
            }
            XCTAssertEqual(add.tlv?[TLVType.state], [2])
            XCTAssertNil(add.tlv?[TLVType.error])
            var userIdentity = adminIdentity
            userIdentity.id = "user-1"
            userIdentity.secretKey = userKey
            let user = try await h.session(for: userIdentity)
            let refused = try await blocking {
                try user.tlv(
                    "/pairings",
                    [
                        (TLVType.state, [1]), (TLVType.method, [3]), (TLVType.identifier, Array("user-2".utf8)),
                        (TLVType.publicKey, userPublic), (TLVType.permissions, [1]),
                    ])
            }
            XCTAssertEqual(refused.tlv?[TLVType.error], [2])
            let listed = try await blocking {
                try admin.tlv("/pairings", [(TLVType.state, [1]), (TLVType.method, [5])])
            }
            let records = try XCTUnwrap(listed.tlv).records()
            XCTAssertEqual(
                records.map { String(decoding: $0[TLVType.identifier] ?? [], as: UTF8.self) },
                [adminIdentity.id, "user-1"])
            XCTAssertEqual(records.map { $0[TLVType.permissions] ?? [] }, [[1], [0]])
            XCTAssertEqual(h.server.pairings.count, 2)

            let removed = try await blocking {
                try admin.tlv(
                    "/pairings",
                    [(TLVType.state, [1]), (TLVType.method, [4]), (TLVType.identifier, Array(adminIdentity.id.utf8))])
            }
            XCTAssertEqual(removed.tlv?[TLVType.state], [2])
            let adminClosed = try await admin.closes()
            let userClosed = try await user.closes()
            XCTAssertTrue(adminClosed)
            XCTAssertTrue(userClosed)
            XCTAssertFalse(h.server.status.isPaired)
            XCTAssertEqual(h.server.pairings, [])
        }
        XCTAssertEqual(changes.withLock { $0 }, [true, false])
    }

    func testARestartKeepsIdentityAndPairings() async throws {
        let directory = try TemporaryDirectory(prefix: "hap-server-restart")
        let identity = Mutex<RawHAPClient.Identity?>(nil)
        try await ServerHarness.with(stateDirectory: directory.path) { h in
            let (_, paired) = try await h.pairedSession()
            identity.withLock { $0 = paired }
        }
        let attributes = try FileManager.default.attributesOfItem(atPath: directory.path + "/hap-accessory.json")
        XCTAssertEqual((attributes[.posixPermissions] as? NSNumber)?.intValue, 0o600)
        let text = try String(contentsOfFile: directory.path + "/hap-accessory.json", encoding: .utf8)
        XCTAssertFalse(text.contains("314-15-926") || text.contains("31415926"))
        try await ServerHarness.with(stateDirectory: directory.path) { h in
            let paired = try XCTUnwrap(identity.withLock { $0 })
            XCTAssertEqual(h.server.status.pairingID, paired.accessoryID)
            let session = try await h.session(for: paired)
            let answer9 = try await session.call("GET", "/characteristics?id=2.10")
            XCTAssertEqual(answer9.status, 200)
        }
    }

    func testTheConfigurationNumberFollowsTheTreesShape() async throws {
        try await ServerHarness.with { h in
            XCTAssertEqual(h.server.status.configurationNumber, 1)
            h.bridge.set(TestBridge.brightness, .int(3))
            try await h.server.databaseChanged()
            XCTAssertEqual(h.server.status.configurationNumber, 1)
            h.bridge.add(HAPAccessory(aid: 5, services: [TestBridge.information(name: "Extra", model: "Extra")]))
            try await h.server.databaseChanged()
            XCTAssertEqual(h.server.status.configurationNumber, 2)
        }
    }

    func testTheDefaultListensOnIPv4AndIPv6AtOnePort() async throws {
        try await ServerHarness.with(configure: { $0.bindAddresses = ["0.0.0.0", "::"] }) { h in
            let port = h.port
            let v4 = try await blocking { try RawHAPClient(port: port, host: "127.0.0.1") }
            let overV4 = try await v4.call("GET", "/accessories")
            XCTAssertEqual(overV4.status, 470)
            let v6: RawHAPClient
            do {
                v6 = try await blocking { try RawHAPClient(port: port, host: "::1") }
            } catch {
                throw XCTSkip("no IPv6 loopback here: \(error)")
            }
            let overV6 = try await v6.call("GET", "/accessories")
            XCTAssertEqual(overV6.status, 470)
        }
    }
}
