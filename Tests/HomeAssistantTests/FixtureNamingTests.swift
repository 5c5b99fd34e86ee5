import Foundation
import HomeModel
import TestSupport
import XCTest

@testable import Gateway
@testable import HomeAssistant

/// Real devices' `/accessories` dumps as the gateway names them: every standard Apple type by
/// its name, vendor characteristics by the vendor catalog's names with units, data values read
/// as the accessory sends them, and Bluetooth GATT services kept out of the user's view.
final class FixtureNamingTests: XCTestCase {
    static func tree(_ file: String, scope: ScopeConfig = ScopeConfig()) throws -> TopicTree {
        try TopicTree(
            base: "home", accessories: HomeAssistantDevicesTests.load(file), home: Home(), scope: ScopeFilter(scope))
    }

    func testNoStandardAppleTypeIsShownByItsUUID() throws {
        var all = ScopeConfig()
        all.userInteractiveOnly = false
        let files = try FileManager.default.contentsOfDirectory(atPath: HomeAssistantDevicesTests.fixtures.path)
            .filter { $0.hasSuffix(".json") }.sorted()
        XCTAssertGreaterThanOrEqual(files.count, 8)
        var raw: [String] = []
        for file in files {
            for accessory in try Self.tree(file, scope: all).accessories {
                for service in accessory.services {
                    if StandardUUID.shortForm(service.service.type) != nil,
                        Catalog.serviceType(uuid: service.service.type) == nil
                    {
                        raw.append("\(file): service \(service.typeName) at \(service.topic)")
                    }
                    for c in service.characteristics
                    where StandardUUID.shortForm(c.characteristic.type) != nil
                        && Catalog.characteristicType(uuid: c.characteristic.type) == nil
                    {
                        raw.append("\(file): \(c.typeName) at \(c.topic)")
                    }
                }
            }
        }
        XCTAssertEqual(raw, [], "standard types without a name")
        // The ones the issue found in real dumps.
        for (uuid, name) in [("A2", "protocol-information"), ("55", "pairing")] {
            XCTAssertEqual(Catalog.serviceType(uuid: uuid)?.name, name)
        }
        XCTAssertEqual(Catalog.characteristicType(uuid: "A5")?.name, "service-signature")
        print(
            "figure: catalog: \(Catalog.characteristicTypes.count) characteristic types, \(Catalog.serviceTypes.count) service types"
        )
    }

    func testEveEnergyReadingsHaveNamedTopicsWithUnits() throws {
        let tree = try Self.tree("eve_energy.json")
        let outlet = try XCTUnwrap(tree.accessories.first?.services.first { $0.typeName == "outlet" })
        var units: [String: String] = [:]
        for c in outlet.characteristics { units[c.slug] = c.characteristic.metadata.unit ?? "" }
        XCTAssertEqual(units["eve-voltage"], "V", "\(units)")
        XCTAssertEqual(units["eve-current"], "A")
        XCTAssertEqual(units["eve-power"], "W")
        XCTAssertEqual(units["eve-total-consumption"], "kWh")
        XCTAssertFalse(units.keys.contains { $0.hasPrefix("custom-e863f1") }, "\(units.keys.sorted())")
        // The `meta` topic says the unit too.
        let power = try XCTUnwrap(outlet.characteristics.first { $0.slug == "eve-power" })
        let meta = ValueCodec.metaJSON(
            type: power.characteristic.type, typeName: power.typeName, metadata: power.characteristic.metadata)
        XCTAssertEqual(meta["unit"], "W")
        XCTAssertEqual(meta["type"], "eve-power")
    }

    func testDataValuesAreReadAsSentAndWhatCannotBeReadIsReported() throws {
        let bytes = try Array(
            Data(contentsOf: HomeAssistantDevicesTests.fixtures.appendingPathComponent("eve_energy.json")))
        var problems: [String] = []
        let accessories = try HAPAccessoryJSON.parse(
            json: JSONValue(parsing: bytes), idPrefix: "eve", problems: &problems)
        XCTAssertEqual(problems, [], "every value of the Eve dump is readable")
        // Eve's history characteristics hold hex: read as bytes, published as base64.
        let history = accessories.flatMap(\.services).flatMap(\.characteristics).filter {
            $0.type.hasPrefix("E863F11E") || $0.type.hasPrefix("E863F116") || $0.type.hasPrefix("E863F131")
        }
        XCTAssertEqual(history.count, 3)
        for c in history { XCTAssertNotNil(c.value, c.type) }
        let first = try XCTUnwrap(history.first { $0.type.hasPrefix("E863F11E") }?.value)
        XCTAssertEqual(
            first,
            .data([
                0x1f, 0x00, 0x01, 0x0e, 0x21, 0x00, 0xb8, 0x04, 0x0a, 0x00, 0x2b, 0x8c, 0x18, 0x4c, 0x87, 0xf7, 0xf1,
                0xf1,
            ]))
        // Base64 (as HAP defines it) still reads as base64, zero bytes included.
        XCTAssertEqual(try HAPAccessoryJSON.convert(.string("AAAA"), format: .data), .data([0, 0, 0]))
        XCTAssertEqual(try HAPAccessoryJSON.convert(.string("AQID"), format: .data), .data([1, 2, 3]))
        // Neither base64 nor hex: the characteristic stays, without a value, and it is said.
        let dump =
            #"[{"aid": 1, "services": [{"iid": 1, "type": "3E", "characteristics": [{"iid": 2, "type": "E863F11E-079E-48FF-8F27-9C2605A29F52", "format": "data", "perms": ["pr"], "value": "not data!"}]}]}]"#
        problems = []
        let odd = try HAPAccessoryJSON.parse(
            json: JSONValue(parsing: Array(dump.utf8)), idPrefix: "x", problems: &problems)
        XCTAssertNil(odd.first?.services.first?.characteristics.first?.value)
        XCTAssertEqual(problems.count, 1)
        XCTAssertTrue(problems.first?.contains("neither base64 nor hex") ?? false, "\(problems)")
    }

    func testBluetoothGATTServicesAreNotUserInteractive() throws {
        let accessories = try HomeAssistantDevicesTests.load("eve_energy.json")
        let gatt = try XCTUnwrap(
            accessories.flatMap(\.services).first { $0.type.hasSuffix("-0000-1000-8000-00805F9B34FB") })
        XCTAssertFalse(gatt.isUserInteractive)
        XCTAssertFalse(try Self.tree("eve_energy.json").accessories.flatMap(\.services).contains { $0.iid == gatt.iid })
        var all = ScopeConfig()
        all.userInteractiveOnly = false
        let shown = try XCTUnwrap(
            try Self.tree("eve_energy.json", scope: all).accessories.flatMap(\.services).first { $0.iid == gatt.iid })
        XCTAssertEqual(shown.typeName, "bluetooth-" + gatt.type.prefix(8).suffix(4).lowercased())
    }
}
