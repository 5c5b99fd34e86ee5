import Foundation
import HomeModel
import Testing

@testable import HAP

/// The 0x09 attribute database: the captures of real Thread devices (Tests/Fixtures/thread/)
/// decoded into the gateway's model, encoded back byte for byte, and a model through a
/// database and back.
@Suite struct ThreadDatabaseTests {
    static let fixtures = ["eve-energy", "nanoleaf-bulb", "schlage-encode-plus", "wemo-stage"]

    static func fixture(_ name: String) throws -> [UInt8] {
        let url = RepoPaths.root.appendingPathComponent("Tests/Fixtures/thread/\(name).hex")
        let text = try String(contentsOf: url, encoding: .utf8)
        return try #require([UInt8](hex: text.filter { !$0.isWhitespace }))
    }

    /// Decoding then encoding gives the device's bytes again: the field order, the fragments
    /// and the short type UUIDs are the device's.
    @Test(arguments: fixtures) func capturesEncodeBackToTheirBytes(name: String) throws {
        let bytes = try Self.fixture(name)
        let db = try ThreadAttributeDatabase.decode(bytes)
        #expect(db.encoded() == bytes)
    }

    /// What the Nanoleaf bulb's database says, as a user sees it in the model (aiohomekit's
    /// `test_coap_pdu09_decode_1` checks the same things of its decode).
    @Test func nanoleafBulbIsALightbulbInTheModel() throws {
        let db = try ThreadAttributeDatabase.decode(Self.fixture("nanoleaf-bulb"))
        var problems: [String] = []
        let values: [UInt16: [UInt8]] = [
            5: Array("Nanoleaf Bulb".utf8), 51: [1], 52: [100, 0, 0, 0], 53: [0, 0, 0xB4, 0x43],
            54: [0, 0, 0xC8, 0x42],
        ]
        let accessories = try db.accessories(idPrefix: "AA:BB", category: 5, problems: &problems) { aid, iid in
            aid == 1 ? values[iid] : nil
        }
        #expect(problems == [])
        let accessory = try #require(accessories.first)
        #expect(accessories.count == 1)
        #expect(accessory.id == "AA:BB:1")
        #expect(accessory.name == "Nanoleaf Bulb")
        #expect(accessory.category == 5)
        #expect(accessory.services.map(\.iid) == [1, 16, 32, 48, 112, 2560])
        let light = accessory.services[3]
        #expect(light.type == StandardUUID.longForm("43"))
        #expect(light.isPrimary)
        #expect(!light.isHidden)
        let on = try #require(light.characteristic(type: StandardUUID.longForm("25")))
        #expect(on.iid == 51)
        #expect(on.value == .bool(true))
        #expect(on.metadata.format == .bool)
        #expect(on.metadata.permissions == [.read, .write, .notify])
        let brightness = try #require(light.characteristics.first { $0.iid == 52 })
        #expect(brightness.value == .int(100))
        #expect(brightness.metadata.unit == "percentage")
        #expect(brightness.metadata.minValue == 0)
        #expect(brightness.metadata.maxValue == 100)
        let hue = try #require(light.characteristics.first { $0.iid == 53 })
        #expect(hue.value == .float(360))
        #expect(hue.metadata.format == .float)
        #expect(hue.metadata.unit == "arcdegrees")
        #expect(hue.metadata.maxValue == 360)
        #expect(hue.metadata.minStep == 1)
        // The custom Nanoleaf characteristic keeps its 128-bit type; hidden from the user.
        let custom = try #require(light.characteristics.first { $0.iid == 60 })
        #expect(custom.type == "A28E1902-CFA1-4D37-A10F-0071CEEEEEBD")
        #expect(custom.metadata.permissions.contains(.hidden))
        // The pairing characteristics (plain, unsecured read/write) are not readable in a session.
        let pairing = try #require(accessory.services.first { $0.type == StandardUUID.longForm("55") })
        #expect(pairing.characteristics.first { $0.iid == 34 }?.metadata.permissions == [])
        // Pairing pairings is data in HAP-BLE, tlv8 in the catalog: the model says tlv8, as over IP.
        #expect(pairing.characteristics.first { $0.iid == 37 }?.metadata.format == .tlv8)
    }

    /// The Wemo Stage's buttons are linked to its service label; the Schlage's lock to its
    /// lock management service; the Eve Energy's descriptions are the characteristics' names.
    @Test func linksAndDescriptionsReachTheModel() throws {
        var problems: [String] = []
        let wemo = try ThreadAttributeDatabase.decode(Self.fixture("wemo-stage"))
            .accessories(idPrefix: "W", problems: &problems)[0]
        let buttons = wemo.services.filter { $0.type == StandardUUID.longForm("89") }
        #expect(buttons.count == 3)
        #expect(buttons.allSatisfy { $0.linkedServices == [48] })
        let event = try #require(buttons[0].characteristic(type: StandardUUID.programmableSwitchEvent))
        #expect(event.metadata.validValues.keys.sorted() == [0, 1, 2])
        let schlage = try ThreadAttributeDatabase.decode(Self.fixture("schlage-encode-plus"))
            .accessories(idPrefix: "S", problems: &problems)[0]
        let lock = try #require(schlage.services.first { $0.iid == 8192 })
        #expect(lock.linkedServices == [64080])
        let target = try #require(lock.characteristics.first { $0.iid == 8196 })
        #expect(target.metadata.permissions == [.read, .write, .notify, .timedWrite])
        let eve = try ThreadAttributeDatabase.decode(Self.fixture("eve-energy"))
            .accessories(idPrefix: "E", problems: &problems)[0]
        #expect(eve.services.flatMap(\.characteristics).contains { $0.name == "Target_temperature" })
        #expect(problems == [])
    }

    /// A model served as a database and read back is the same model, but for what HAP-BLE
    /// does not carry (values, maxLen, `wr`; see ThreadAttributeDatabase+Model.swift).
    @Test func aModelThroughADatabaseIsTheSameModel() throws {
        func c(
            _ iid: UInt64, _ type: String, _ f: CharacteristicFormat, _ perms: CharacteristicPermissions,
            unit: String? = nil, min: Double? = nil, max: Double? = nil, step: Double? = nil,
            valid: [Int64] = [], name: String? = nil
        ) -> Characteristic {
            Characteristic(
                iid: iid, type: StandardUUID.longForm(type), value: nil,
                metadata: CharacteristicMetadata(
                    format: f, unit: unit, minValue: min, maxValue: max, minStep: step,
                    validValues: Dictionary(uniqueKeysWithValues: valid.map { ($0, String($0)) }), permissions: perms),
                name: name)
        }
        let services = [
            AccessoryService(
                iid: 1, type: StandardUUID.accessoryInformation,
                characteristics: [c(2, "14", .bool, [.write]), c(3, "23", .string, [.read])]),
            AccessoryService(
                iid: 16, type: StandardUUID.longForm("4A"), isPrimary: true, linkedServices: [32],
                characteristics: [
                    c(17, "11", .float, [.read, .notify], unit: "celsius", min: -10, max: 40, step: 0.5),
                    c(18, "33", .uint8, [.read, .write, .notify], min: 0, max: 3, valid: [0, 1, 3]),
                    c(19, "D3E5F6A7-0000-4000-8000-ABCDEF012345", .uint16, [.read, .hidden], name: "Vendor"),
                    c(20, "19", .tlv8, [.write, .timedWrite]),
                    c(
                        21, "7C", .int, [.read, .additionalAuthorization],
                        min: -5, max: 5, step: 1),
                    c(22, "500", .uint32, [.read], unit: "seconds"), c(23, "501", .uint64, [.read]),
                    c(24, "502", .data, [.read]),
                ]),
            AccessoryService(
                iid: 32, type: StandardUUID.longForm("CC"), isHidden: true,
                characteristics: [c(33, "CD", .uint8, [.read], unit: "percentage", min: 0, max: 100)]),
        ]
        let model = [
            Accessory(id: "T:1", aid: 1, name: "Accessory 1", category: 9, services: services)
        ]
        let bytes = try ThreadAttributeDatabase(model).encoded()
        var problems: [String] = []
        let back = try ThreadAttributeDatabase.decode(bytes).accessories(
            idPrefix: "T", category: 9, problems: &problems)
        #expect(problems == [])
        #expect(back == model)
    }

    /// Real captures with bytes changed at random: each reads or is an error, and whatever
    /// reads is written and read back to the same tree.
    @Test(arguments: fixtures) func mutatedCapturesReadOrFailCleanly(name: String) throws {
        let bytes = try Self.fixture(name)
        var rng = SplitMix(seed: UInt64(bytes.count))
        var read = 0
        for _ in 0..<250 {
            var mutated = bytes
            for _ in 0..<Int(rng.next() % 4 + 1) {
                mutated[Int(rng.next() % UInt64(mutated.count))] = UInt8(truncatingIfNeeded: rng.next())
            }
            guard let db = try? ThreadAttributeDatabase.decode(mutated) else { continue }
            read += 1
            #expect(try ThreadAttributeDatabase.decode(db.encoded()) == db)
            var problems: [String] = []
            _ = try? db.accessories(idPrefix: "m", problems: &problems)
        }
        // A change inside a value (a type, an iid, a unit) still reads: some of them did.
        #expect(read > 0)
    }

    @Test func brokenDatabasesAreNamedErrors() throws {
        // A characteristic without its iid.
        let noIID = ThreadAttributeDatabase.encodeForTest(characteristic: [0x04, 0x01, 0x25, 0x0A, 0x02, 0x10, 0x00])
        #expect(
            throws: CoAPCodecError.badTLV(
                "accessory #0 service #0 characteristic #0 lacks its iid (0x05) or type (0x04)")
        ) {
            try ThreadAttributeDatabase.decode(noIID)
        }
        // No accessory list at all: not a database.
        #expect(throws: CoAPCodecError.badTLV("attribute database: no accessory list (0x18)")) {
            try ThreadAttributeDatabase.decode([0x01, 0x01, 0x01])
        }
        #expect(throws: CoAPCodecError.self) { try ThreadAttributeDatabase.decode([]) }
        // A 5-byte type UUID.
        let badType = ThreadAttributeDatabase.encodeForTest(characteristic: [0x05, 0x01, 9, 0x04, 0x05, 1, 2, 3, 4, 5])
        #expect(throws: CoAPCodecError.self) { try ThreadAttributeDatabase.decode(badType) }
        // A presentation format of 6 bytes.
        let badFormat = ThreadAttributeDatabase.encodeForTest(
            characteristic: [0x05, 0x01, 9, 0x04, 0x01, 0x25, 0x0C, 0x06, 1, 0, 0, 0x27, 1, 0])
        #expect(throws: CoAPCodecError.self) { try ThreadAttributeDatabase.decode(badFormat) }
        // A range of the wrong size for its format: the tree reads, the model does not.
        let badRange = ThreadAttributeDatabase.encodeForTest(
            characteristic: [0x05, 0x01, 9, 0x04, 0x01, 0x25, 0x0C, 0x07, 0x04, 0, 0, 0x27, 1, 0, 0, 0x0D, 0x01, 5])
        var problems: [String] = []
        #expect(throws: CoAPCodecError.self) {
            try ThreadAttributeDatabase.decode(badRange).accessories(idPrefix: "x", problems: &problems)
        }
        // Every prefix of a real capture is an error or a smaller tree, never a crash or a misread.
        let bulb = try Self.fixture("nanoleaf-bulb")
        for n in stride(from: 1, to: bulb.count, by: 7) {
            #expect(throws: CoAPCodecError.self) { try ThreadAttributeDatabase.decode(Array(bulb.prefix(n))) }
        }
        // A value that does not fit its format is left out and reported, as over IP.
        let db = try ThreadAttributeDatabase.decode(bulb)
        let accessory = try db.accessories(idPrefix: "x", problems: &problems) { _, iid in iid == 51 ? [1, 2] : nil }
        #expect(accessory[0].services[3].characteristics.first { $0.iid == 51 }?.value == nil)
        #expect(problems.count == 1)
    }
}

extension ThreadAttributeDatabase {
    /// A database of one accessory with one service holding one characteristic of `inner`.
    static func encodeForTest(characteristic inner: [UInt8]) -> [UInt8] {
        var c: [UInt8] = []
        HAPBLETLV.append(0x13, inner, to: &c)
        var s: [UInt8] = [0x07, 0x02, 0x01, 0x00, 0x06, 0x01, 0x43]
        HAPBLETLV.append(0x14, c, to: &s)
        var services: [UInt8] = []
        HAPBLETLV.append(0x15, s, to: &services)
        var a: [UInt8] = [0x1A, 0x02, 0x01, 0x00]
        HAPBLETLV.append(0x16, services, to: &a)
        var element: [UInt8] = []
        HAPBLETLV.append(0x19, a, to: &element)
        var out: [UInt8] = []
        HAPBLETLV.append(0x18, element, to: &out)
        return out
    }
}
