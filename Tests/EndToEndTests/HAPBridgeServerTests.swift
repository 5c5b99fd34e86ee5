import Crypto
import Foundation
import HAPServer
import HAPServerTestSupport
import HomeModel
import Logging
import Synchronization
import TestSupport
import XCTest

/// HomeMQTT's HAP accessory server against an independent controller: aiohomekit 4.0.1 (PyPI,
/// as Home Assistant uses it), driven line by line (`aiohomekit_bridge_controller.py`), pairing
/// with the setup code at 127.0.0.1 and a port (found over mDNS: `HomeKitAnnouncementTests`).
final class HAPBridgeServerTests: XCTestCase {
    static let code = HAPSetupCode("314-15-926")!

    /// The script as a child process: a command per line, its answer and events as JSON lines.
    final class AioHomeKit: @unchecked Sendable {
        static let script = HAPPeer.repositoryRoot.appendingPathComponent(
            "Tests/HAPTests/peer/aiohomekit_bridge_controller.py"
        ).path
        let child: ChildProcess
        private let sequence = Mutex(0)
        /// How many output lines were taken as events already.
        private let eventsSeen = Mutex(0)

        init() async throws {
            child = try ChildProcess(HAPPeer.python.path, ["-u", Self.script], standardInput: true)
            try await child.waitForOutput(containing: "\"ready\"", timeout: 30)
        }

        func stop() async {
            child.closeInput()
            await child.terminate()
        }

        var lines: [JSONValue] { child.outputLines.compactMap { try? JSONValue(parsing: $0) } }

        /// Sends a command and waits for its answer.
        func send(_ op: String, _ fields: [String: JSONValue] = [:], timeout: Double = 30) async throws -> JSONValue {
            let seq = sequence.withLock { n -> Int in
                n += 1
                return n
            }
            var command = fields
            command["op"] = .string(op)
            command["seq"] = .int(Int64(seq))
            try child.write(JSONValue.object(command).encoded() + "\n")
            var answer: JSONValue?
            try await waitUntil("aiohomekit's answer to \(op)", timeout: timeout, pollInterval: 0.02) {
                answer = lines.first { $0["reply"]?.intValue == seq }
                if answer == nil && !child.isRunning {
                    throw ProcessError("aiohomekit exited: \(child.standardError)")
                }
                return answer != nil
            }
            return answer ?? .null
        }

        /// Sends a command that must succeed.
        func ok(_ op: String, _ fields: [String: JSONValue] = [:]) async throws -> JSONValue {
            let answer = try await send(op, fields)
            guard answer["ok"] == true else {
                throw ProcessError("aiohomekit \(op) failed: \(answer.encoded())\n\(child.standardError.suffix(3000))")
            }
            return answer
        }

        /// Waits for the next event line of pairing `name` that names `id`.
        func event(_ name: String, _ id: HAPCharacteristicID, timeout: Double = 20) async throws -> JSONValue {
            var found: JSONValue?
            try await waitUntil("an event of \(id) for \(name)", timeout: timeout, pollInterval: 0.02) {
                let all = lines.filter { $0["event"] != nil }
                let start = eventsSeen.withLock { $0 }
                for (n, line) in all.enumerated().dropFirst(start)
                where line["event"]?.stringValue == name && line["data"]?[id.description] != nil {
                    eventsSeen.withLock { $0 = n + 1 }
                    found = line["data"]?[id.description]
                    return true
                }
                return false
            }
            return found ?? .null
        }

        /// The events received so far for `name`.
        func events(_ name: String) -> [JSONValue] {
            lines.filter { $0["event"]?.stringValue == name }.compactMap { $0["data"] }
        }
    }

    func requirePeer() throws {
        if let reason = HAPPeer.unavailableReason {
            if HAPPeer.isRequired { throw ProcessError("\(reason) (CI=true: the HAP tests must run)") }
            throw XCTSkip(reason)
        }
    }

    /// A server on 127.0.0.1 serving a `TestBridge`, for the body.
    func withServer(
        stateDirectory: String, _ body: (HAPAccessoryServer, TestBridge, Int) async throws -> Void
    ) async throws {
        var configuration = HAPAccessoryServer.Configuration(
            stateDirectory: URL(fileURLWithPath: stateDirectory), setupCode: Self.code)
        configuration.bindAddresses = ["127.0.0.1"]
        let bridge = TestBridge()
        var logger = Logger(label: "hap-bridge-e2e")
        logger.logLevel = .info
        let server = try HAPAccessoryServer(configuration: configuration, database: bridge, logger: logger)
        bridge.attach(server)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await server.run() }
            let port = try await server.listeningPort()
            do {
                try await body(server, bridge, port)
            } catch {
                group.cancelAll()
                throw error
            }
            group.cancelAll()
        }
    }

    func testAiohomekitPairsReadsWritesAndHearsEvents() async throws {
        try requirePeer()
        let directory = try TemporaryDirectory(prefix: "hap-bridge-aiohomekit")
        let aio = try await AioHomeKit()
        addTeardownBlock { await aio.stop() }
        let pairingFile = directory.file("pairing.json")
        try await withServer(stateDirectory: directory.file("state")) { server, bridge, port in
            // A wrong setup code is refused, and does not pair.
            let wrong = try await aio.send(
                "pair",
                ["host": "127.0.0.1", "port": .int(Int64(port)), "pin": "111-22-333", "file": .string(pairingFile)])
            XCTAssertEqual(wrong["ok"], false)
            XCTAssertEqual(wrong["error"], "AuthenticationError")
            XCTAssertFalse(server.status.isPaired)

            let paired = try await aio.ok(
                "pair",
                [
                    "host": "127.0.0.1", "port": .int(Int64(port)), "pin": .string(Self.code.revealed),
                    "file": .string(pairingFile),
                ])
            XCTAssertEqual(paired["accessory"]?.stringValue, server.status.pairingID)
            XCTAssertTrue(server.status.isPaired)
            XCTAssertEqual(server.pairings.map(\.id), [paired["controller"]?.stringValue ?? "?"])
            // Paired now: another pair-setup is Unavailable.
            let again = try await aio.send(
                "pair",
                [
                    "host": "127.0.0.1", "port": .int(Int64(port)), "pin": .string(Self.code.revealed),
                    "file": .string(directory.file("second.json")),
                ])
            XCTAssertEqual(again["error"], "UnavailableError")

            _ = try await aio.ok("open", ["name": "a", "file": .string(pairingFile)])
            let tree = try await aio.ok("accessories", ["name": "a"])
            let accessories = try XCTUnwrap(tree["accessories"]?.arrayValue)
            XCTAssertEqual(accessories.compactMap { $0["aid"]?.intValue }, [1, 2, 3, 4])
            // aiohomekit normalises the short types to full UUIDs.
            let lightbulb = try XCTUnwrap(accessories[1]["services"]?[1])
            XCTAssertEqual(lightbulb["type"], "00000043-0000-1000-8000-0026BB765291")
            let brightness = try XCTUnwrap(lightbulb["characteristics"]?[1])
            XCTAssertEqual(brightness["type"], "00000008-0000-1000-8000-0026BB765291")
            XCTAssertEqual(brightness["format"], "int")
            XCTAssertEqual(brightness["unit"], "percentage")
            XCTAssertEqual(brightness["minValue"], 0)
            XCTAssertEqual(brightness["maxValue"], 100)
            XCTAssertEqual(brightness["minStep"], 1)
            let temperature = try XCTUnwrap(accessories[2]["services"]?[1]?["characteristics"]?[0])
            XCTAssertEqual(temperature["format"], "float")
            XCTAssertEqual(temperature["unit"], "celsius")
            XCTAssertEqual(accessories[0]["services"]?[1]?["type"], "000000A2-0000-1000-8000-0026BB765291")

            // A read.
            let read = try await aio.ok("get", ["name": "a", "ids": [[2, 10], [3, 9]]])
            XCTAssertEqual(read["values"]?["2.10"]?["value"], 50)
            XCTAssertEqual(read["values"]?["3.9"]?["value"], 21.5)

            // A write reaches the database's write callback.
            var writes = bridge.writes.makeAsyncIterator()
            let wrote = try await aio.ok("put", ["name": "a", "values": [[2, 10, 80]]])
            XCTAssertEqual(wrote["statuses"], [:])
            let write = await writes.next()
            XCTAssertEqual(write?.id, TestBridge.brightness)
            XCTAssertEqual(write?.value, 80)

            // An event after a change pushed from the server's side.
            _ = try await aio.ok("subscribe", ["name": "a", "ids": [[2, 9], [3, 9]]])
            try await waitUntil("the subscription to reach the server", timeout: 10) {
                bridge.set(TestBridge.temperature, .double(22.5)) > 0
            }
            let heard = try await aio.event("a", TestBridge.temperature)
            XCTAssertEqual(heard["value"], 22.5)

            // A timed write.
            let timed = try await aio.ok("timed", ["name": "a", "aid": 4, "iid": 10, "value": 0, "pid": 7])
            XCTAssertEqual(timed["prepare"]?["status"], 0)
            XCTAssertEqual(timed["write"], [:])
            XCTAssertEqual(bridge.value(TestBridge.lockTarget), 0)

            // -70402 for an unreachable accessory, in a read and in a write.
            bridge.setUnreachable(3)
            let unreachable = try await aio.ok("get", ["name": "a", "ids": [[3, 9], [2, 10]]])
            XCTAssertEqual(unreachable["values"]?["3.9"]?["status"], -70402)
            XCTAssertEqual(unreachable["values"]?["2.10"]?["value"], 80)
            bridge.setUnreachable(3, false)

            // A second session hears of the first one's write; the writer does not.
            _ = try await aio.ok("open", ["name": "b", "file": .string(pairingFile)])
            _ = try await aio.ok("subscribe", ["name": "b", "ids": [[2, 9]]])
            _ = try await aio.ok("put", ["name": "a", "values": [[2, 9, true]]])
            let relayed = try await aio.event("b", TestBridge.lampOn)
            XCTAssertEqual(relayed["value"], true)
            // A round trip on the writer's session: an event sent to it would have come first.
            _ = try await aio.ok("get", ["name": "a", "ids": [[2, 9]]])
            XCTAssertFalse(
                aio.events("a").contains { $0["2.9"] != nil }, "the writer got an event of its own write")

            // A non-admin pairing cannot add pairings.
            let userFile = directory.file("user.json")
            var user = try JSONValue(parsing: Array(try Data(contentsOf: URL(fileURLWithPath: pairingFile))))
            let userKey = ControllerKeys.newKeyPair()
            if case .object(var fields) = user {
                fields["iOSPairingId"] = .string("user-\(UUID().uuidString)")
                fields["iOSDeviceLTSK"] = .string(userKey.secret)
                fields["iOSDeviceLTPK"] = .string(userKey.public)
                user = .object(fields)
            }
            try Data(user.encoded().utf8).write(to: URL(fileURLWithPath: userFile))
            _ = try await aio.ok(
                "add_pairing",
                ["name": "a", "id": user["iOSPairingId"] ?? "", "key": .string(userKey.public), "permissions": "User"])
            let listed = try await aio.ok("list_pairings", ["name": "a"])
            XCTAssertEqual(
                listed["pairings"]?.arrayValue?.compactMap { $0["controllerType"]?.stringValue }.sorted(),
                ["admin", "regular"])
            _ = try await aio.ok("open", ["name": "user", "file": .string(userFile)])
            let userRead = try await aio.ok("get", ["name": "user", "ids": [[2, 10]]])
            XCTAssertEqual(userRead["values"]?["2.10"]?["value"], 80)
            let refused = try await aio.send(
                "add_pairing",
                ["name": "user", "id": "intruder", "key": .string(userKey.public), "permissions": "Admin"])
            XCTAssertEqual(refused["ok"], false)
            XCTAssertEqual(refused["error"], "AuthenticationError")
            XCTAssertEqual(server.pairings.count, 2)
            for name in ["a", "b", "user"] { _ = try await aio.ok("close", ["name": .string(name)]) }
        }

        // A restart keeps the pairing: the same controller verifies and reads.
        try await withServer(stateDirectory: directory.file("state")) { server, _, port in
            XCTAssertTrue(server.status.isPaired)
            var data = try JSONValue(parsing: Array(try Data(contentsOf: URL(fileURLWithPath: pairingFile))))
            if case .object(var fields) = data {
                fields["AccessoryPort"] = .int(Int64(port))
                data = .object(fields)
            }
            try Data(data.encoded().utf8).write(to: URL(fileURLWithPath: pairingFile))
            _ = try await aio.ok("open", ["name": "again", "file": .string(pairingFile)])
            let read = try await aio.ok("get", ["name": "again", "ids": [[2, 10]]])
            XCTAssertEqual(read["values"]?["2.10"]?["value"], 50)
            _ = try await aio.ok("close", ["name": "again"])
        }
    }
}

/// A controller's Ed25519 key pair in hex, as aiohomekit stores it.
enum ControllerKeys {
    static func newKeyPair() -> (secret: String, public: String) {
        let key = Curve25519.Signing.PrivateKey()
        let hex = { (bytes: Data) in bytes.map { String(format: "%02x", $0) }.joined() }
        return (hex(key.rawRepresentation), hex(key.publicKey.rawRepresentation))
    }
}
