import Foundation
@testable import HAP
import HAPServer
import HomeModel
import Synchronization
import TestSupport
import XCTest

/// Our HAP-over-CoAP accessory held to aiohomekit 4.0.1 (the venv's), a real controller: its
/// pairing state machines, session keys, encryption, PDUs and event parsing, carried over stdio
/// by `Scripts/aiohomekit-coap-stdio.py` (CoAPUDPAiohomekitTests runs them over UDP); and
/// the attribute database it serves, read by aiohomekit's own decoder
/// (`Scripts/aiohomekit-thread-database.py`) and held to the accessory file it was made from.
final class CoAPAiohomekitTests: XCTestCase {
    func testAiohomekitPairsReadsWritesAndHearsEvents() async throws {
        if let reason = HAPPeer.unavailableReason {
            if HAPPeer.isRequired { XCTFail(reason) }
            throw XCTSkip(reason)
        }
        let peers = try await CoAPPeers()
        let brightness = peers.database.iid("43", "8")
        let events = Collected()
        peers.link.register(
            events: { payload in
                events.items.withLock { $0.append(payload) }
                return .valid
            }, at: "aiohomekit")
        let script = HAPPeer.repositoryRoot.appendingPathComponent("Scripts/aiohomekit-coap-stdio.py").path
        let child = try ChildProcess(
            HAPPeer.python.path, [script, CoAPPeers.code.revealed, String(brightness), "33"], standardInput: true)
        let exchange = peers.link.exchange(from: "aiohomekit")
        let hex = { (b: [UInt8]) in b.isEmpty ? "-" : b.map { String(format: "%02x", $0) }.joined() }
        var seen = 0
        var results: [String] = []
        // Its requests answered one by one, in the order it makes them.
        carrying: while true {
            var line = ""
            try await waitUntil("aiohomekit's next line", timeout: 60, pollInterval: 0.02) {
                let lines = child.outputLines
                if lines.count > seen {
                    line = lines[seen]
                    seen += 1
                    return true
                }
                if !child.isRunning { throw ProcessError("aiohomekit exited: \(child.standardError)") }
                return false
            }
            let words = line.split(separator: " ").map(String.init)
            switch words.first {
            case "POST":
                let payload = words[2] == "-" ? [] : try XCTUnwrap([UInt8](hex: words[2]))
                let reply = try await exchange.post(words[1], payload)
                try child.write("\(reply.code) \(hex(reply.payload))\n")
            case "EVENTS?":
                // Its write arrived; then a change from inside while it is subscribed: the
                // event it was PUT, handed over.
                XCTAssertEqual(peers.database.value(brightness), .int(33))
                let reached = await peers.database.set(brightness, .int(44))
                XCTAssertEqual(reached, 1)
                let sent = events.items.withLock { $0 }
                try child.write((["EVENTS"] + sent.map(hex)).joined(separator: " ") + "\n")
            case "DONE":
                break carrying
            default:
                results.append(line)
            }
        }
        let status = try await child.waitForExit(timeout: 30)
        XCTAssertEqual(status, 0, child.standardError)

        XCTAssertEqual(results.first, "PAIRED \(peers.accessory.status.pairingID)")
        XCTAssertEqual(peers.accessory.pairings.count, 1)
        let database = try XCTUnwrap(results.first { $0.hasPrefix("DATABASE ") })
        let services = try JSONValue(parsing: Array(database.dropFirst("DATABASE ".count).utf8))
        XCTAssertEqual(
            services.arrayValue?.compactMap { $0["type"]?.stringValue },
            peers.database.model.services.map(\.type) + [StandardUUID.longForm("55")])
        XCTAssertEqual(
            Array(results.dropFirst(2)),
            [
                "READ \(brightness) 80", "WROTE \(brightness) SUCCESS", "SUBSCRIBED \(brightness) SUCCESS",
                "EVENT \(brightness) 44",
            ])
        XCTAssertEqual(peers.database.value(brightness), .int(44))
    }

    func testAiohomekitReadsTheServedDatabaseAsTheFileDescribesIt() async throws {
        if let reason = HAPPeer.unavailableReason {
            if HAPPeer.isRequired { XCTFail(reason) }
            throw XCTSkip(reason)
        }
        let peers = try await CoAPPeers()
        let controller = peers.controller(try await peers.pair())
        let body = try await controller.sendOne(.attributeDatabase(tid: 1), what: "the attribute database").body
        let directory = try TemporaryDirectory(prefix: "coap-database")
        let path = directory.path + "/garage.hex"
        try body.map { String(format: "%02x", $0) }.joined().write(toFile: path, atomically: true, encoding: .utf8)
        let script = HAPPeer.repositoryRoot.appendingPathComponent("Scripts/aiohomekit-thread-database.py").path
        let result = try await runChecked(HAPPeer.python.path, [script, path], timeout: 60)
        let theirs = try JSONValue(parsing: result.standardOutput)

        let accessories = try XCTUnwrap(theirs["garage.hex"]?.arrayValue, result.standardOutput)
        XCTAssertEqual(accessories.count, 1)
        XCTAssertEqual(accessories.first?["aid"], .int(1))
        let services = accessories.first?["services"]?.arrayValue ?? []
        let file = peers.database.model
        // The file's services, then the Pairing service (0x55) with its Pairings (0x50).
        XCTAssertEqual(
            services.compactMap { $0["type"]?.stringValue }, file.services.map(\.type) + [StandardUUID.longForm("55")])
        XCTAssertEqual(
            services.last?["characteristics"]?.arrayValue?.compactMap { $0["type"]?.stringValue },
            [StandardUUID.longForm("50")])
        for (service, want) in zip(services, file.services) {
            XCTAssertEqual(service["iid"]?.int64Value, Int64(want.iid))
            XCTAssertEqual((service["properties"]?.int64Value ?? 0) & 1 == 1, want.isPrimary, want.type)
            let chars = service["characteristics"]?.arrayValue ?? []
            XCTAssertEqual(chars.compactMap { $0["iid"]?.int64Value }, want.characteristics.map { Int64($0.iid) })
            XCTAssertEqual(chars.compactMap { $0["type"]?.stringValue }, want.characteristics.map(\.type))
            for (got, c) in zip(chars, want.characteristics) {
                let m = c.metadata
                let perms = ["pr", "pw", "ev", "aa", "tw", "hd"].filter { code in
                    CharacteristicPermissions.codes.contains { $0.0 == code && m.permissions.contains($0.1) }
                }
                XCTAssertEqual(
                    Set(got["perms"]?.arrayValue?.compactMap(\.stringValue) ?? []), Set(perms), "perms of \(c.type)")
                XCTAssertEqual(got["format"]?.stringValue, Self.kind(m.format), "format of \(c.type)")
                XCTAssertEqual(got["min"]?.doubleValue, m.minValue, "min of \(c.type)")
                XCTAssertEqual(got["max"]?.doubleValue, m.maxValue, "max of \(c.type)")
                XCTAssertEqual(got["step"]?.doubleValue, m.minStep, "step of \(c.type)")
                XCTAssertEqual(got["description"]?.stringValue, c.name, "description of \(c.type)")
            }
        }
    }

    final class Collected: Sendable {
        let items = Mutex<[[UInt8]]>([])
    }

    /// aiohomekit's kinds of format (`data_type_str`).
    static func kind(_ format: CharacteristicFormat) -> String {
        switch format {
        case .bool: "bool"
        case .uint8, .uint16, .uint32, .uint64, .int: "int"
        case .float: "float"
        case .string: "string"
        case .tlv8, .data: "data"
        }
    }
}
