import Foundation
import HomeModel
import XCTest

final class AccessoryJSONTests: XCTestCase {
    func fixtureFiles() throws -> [URL] {
        let dir = RepoPaths.fixtures
        // The fixtures are part of the repository: missing ones are a failure, never a skip.
        XCTAssertTrue(FileManager.default.fileExists(atPath: dir.path), "no fixtures at \(dir.path)")
        let files = try FileManager.default.contentsOfDirectory(at: dir, includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == "json" }.sorted { $0.path < $1.path }
        XCTAssertFalse(files.isEmpty)
        return files
    }

    func testEveryFixtureParsesIntoTheModel() throws {
        for url in try fixtureFiles() {
            let bytes = Array(try Data(contentsOf: url))
            let raw = try XCTUnwrap(
                try JSONSerialization.jsonObject(with: Data(bytes)) as? [[String: Any]], url.lastPathComponent)
            let accessories = try HAPAccessoryJSON.parse(bytes, idPrefix: "hap:AA:BB")
            XCTAssertEqual(accessories.count, raw.count, url.lastPathComponent)
            for (acc, rawAcc) in zip(accessories, raw) {
                let rawServices = try XCTUnwrap(rawAcc["services"] as? [[String: Any]])
                XCTAssertEqual(acc.services.count, rawServices.count, url.lastPathComponent)
                XCTAssertEqual(acc.id, "hap:AA:BB:\(acc.aid)")
                XCTAssertFalse(acc.name.isEmpty)
                if accessories.count > 1 && acc.aid != 1 {
                    XCTAssertEqual(acc.bridgeID, "hap:AA:BB:1", url.lastPathComponent)
                } else {
                    XCTAssertNil(acc.bridgeID)
                }
                for s in acc.services {
                    XCTAssertEqual(s.type.count, 36, "\(url.lastPathComponent): \(s.type)")
                    XCTAssertEqual(s.type, s.type.uppercased())
                    for c in s.characteristics {
                        XCTAssertEqual(c.type.count, 36)
                        if c.metadata.format == .bool, let v = c.value { XCTAssertNotNil(v.boolValue) }
                    }
                }
                let info = try XCTUnwrap(
                    acc.services.first { $0.type == StandardUUID.accessoryInformation }, url.lastPathComponent)
                if case .string(let n)? = info.characteristic(type: StandardUUID.name)?.value {
                    XCTAssertEqual(acc.name, n)
                }
            }
        }
    }

    func testKoogeekDetails() throws {
        let url = RepoPaths.fixtures.appendingPathComponent("koogeek_ls1.json")
        let acc = try XCTUnwrap(try HAPAccessoryJSON.parse(Array(Data(contentsOf: url)), idPrefix: "hap:K").first)
        XCTAssertEqual(acc.manufacturer, "Koogeek")
        XCTAssertEqual(acc.model, "LS1")
        XCTAssertEqual(acc.category, 1)
        XCTAssertTrue(acc.services.first { $0.iid == 7 }?.isPrimary ?? false)
        XCTAssertTrue(acc.services.first { $0.iid == 15 }?.isHidden ?? false)
        let light = try XCTUnwrap(acc.services.first { $0.iid == 7 })
        let on = try XCTUnwrap(light.characteristic(iid: 8))
        XCTAssertEqual(on.value, .bool(false))
        XCTAssertEqual(on.metadata.permissions, [.read, .write, .notify])
        XCTAssertEqual(on.type, "00000025-0000-1000-8000-0026BB765291")
    }

    func testWrapperObjectBridgeCategoryAndValueConversion() throws {
        let json = """
            {"accessories": [
              {"aid": 1, "services": [{"iid": 1, "type": "3E", "characteristics": [
                {"iid": 2, "type": "23", "format": "string", "perms": ["pr"], "value": "Bridge"}]}]},
              {"aid": 7, "services": [{"iid": 1, "type": "43", "primary": true, "linked": [9], "characteristics": [
                {"iid": 2, "type": "25", "format": "bool", "perms": ["pr", "pw", "ev"], "value": 1},
                {"iid": 3, "type": "8", "format": "int", "perms": ["pr", "pw"], "value": 40, "minValue": 0, "maxValue": 100, "minStep": 1, "unit": "percentage", "description": "Brightness"},
                {"iid": 4, "type": "8E", "format": "uint8", "perms": ["pr"], "value": 2, "valid-values": [0, 1, 2]},
                {"iid": 5, "type": "11111111-2222-3333-4444-555555555555", "format": "data", "perms": ["pr"], "value": "AQID"},
                {"iid": 6, "type": "11", "format": "float", "perms": ["pr"], "value": 21}]}]}
            ]}
            """
        let accs = try HAPAccessoryJSON.parse(Array(json.utf8), idPrefix: "hap:X")
        XCTAssertEqual(accs.map(\.category), [2, 1])
        XCTAssertEqual(accs[1].bridgeID, "hap:X:1")
        XCTAssertEqual(accs[1].name, "Accessory 7")
        let s = accs[1].services[0]
        XCTAssertEqual(s.linkedServices, [9])
        XCTAssertEqual(s.characteristic(iid: 2)?.value, .bool(true))
        XCTAssertEqual(s.characteristic(iid: 3)?.value, .int(40))
        XCTAssertEqual(s.characteristic(iid: 3)?.name, "Brightness")
        XCTAssertEqual(s.characteristic(iid: 3)?.metadata.maxValue, 100)
        XCTAssertEqual(s.characteristic(iid: 4)?.metadata.validValues.keys.sorted(), [0, 1, 2])
        XCTAssertEqual(s.characteristic(iid: 5)?.value, .data([1, 2, 3]))
        XCTAssertEqual(s.characteristic(iid: 5)?.type, "11111111-2222-3333-4444-555555555555")
        XCTAssertEqual(s.characteristic(iid: 6)?.value, .float(21))
        XCTAssertEqual(try HAPAccessoryJSON.parse(Array(json.utf8), idPrefix: "hap:X", category: 5).first?.category, 5)
    }

    func testMalformedInputIsATypedError() {
        for bad in [
            "{", "{\"x\": 1}", "[{\"services\": []}]",
            "[{\"aid\": 1, \"services\": [{\"iid\": 1, \"characteristics\": []}]}]",
            "[{\"aid\": 1, \"services\": [{\"iid\": 1, \"type\": \"3E\", \"characteristics\": [{\"iid\": 2, \"type\": \"23\", \"format\": \"quaternion\", \"perms\": []}]}]}]",
        ] {
            XCTAssertThrowsError(try HAPAccessoryJSON.parse(Array(bad.utf8), idPrefix: "hap:X"), bad) { error in
                XCTAssertFalse((error as? ModelError)?.message.isEmpty ?? true)
            }
        }
    }

    /// HAP request bodies must reach the accessory exactly as Foundation's JSONEncoder writes
    /// them (compact, sorted keys, unescaped slashes, `21` for a whole float), which is what
    /// accessories were always sent.
    func testWriteBodiesMatchFoundationEncoding() throws {
        let writes: [(CharacteristicValue, CharacteristicFormat)] = [
            (.float(21.0), .float), (.float(21.5), .float), (.float(-0.0), .float), (.float(1e20), .float),
            (.float(0.1), .float), (.float(.infinity), .float), (.float(3.6), .uint8), (.uint(UInt64.max), .uint64),
            (.int(-40), .int), (.bool(true), .bool), (.uint(1), .bool), (.bool(true), .uint8),
            (.string("a/b \"q\" \u{1}é"), .string), (.data([0xFB, 0xFF]), .tlv8),
        ]
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let items: [JSONValue] = writes.enumerated().map { n, write in
            .object([
                "aid": .uint(1), "iid": .uint(UInt64(n + 2)),
                "value": HAPAccessoryJSON.json(for: write.0, format: write.1),
            ])
        }
        let body = JSONValue.object(["characteristics": .array(items), "pid": .uint(7)])
        let expected = String(decoding: try encoder.encode(body), as: UTF8.self)
        XCTAssertEqual(body.encoded(wholeDoublesAsIntegers: true), expected)
        // Booleans stay booleans for bool characteristics and become 0/1 for numeric ones.
        XCTAssertEqual(items[9]["value"], .bool(true))
        XCTAssertEqual(items[10]["value"], .bool(true))
        XCTAssertEqual(items[11]["value"], .int(1))
        // The body reads back as the same values (a whole float comes back as an integer, which
        // the float format accepts).
        let back = try JSONValue(parsing: body.encoded(wholeDoublesAsIntegers: true))
        XCTAssertEqual(
            try HAPAccessoryJSON.convert(XCTUnwrap(back["characteristics"]?[0]?["value"]), format: .float), .float(21))
        XCTAssertEqual(back["characteristics"]?[7]?["value"], .uint(UInt64.max))
    }
}
