import Foundation
@testable import HAP
import HAPServer
import HomeModel
import TestSupport
import XCTest

/// The attribute database our HAP-over-CoAP accessory serves, read by aiohomekit's own decoder
/// (`Scripts/aiohomekit-thread-database.py`, the venv's aiohomekit): a real controller's view
/// of it, held to the accessory file it was made from. (aiohomekit's CoAP controller itself
/// needs the libcoap transport, not yet here.)
final class CoAPAiohomekitDatabaseTests: XCTestCase {
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
