import Foundation
import HomeModel
import Testing

@testable import HAP
import TestSupport

/// The captures of real Thread devices decoded by aiohomekit itself
/// (`Scripts/aiohomekit-thread-database.py`, the venv's aiohomekit) and by HAP: the same
/// accessories, services and characteristics, with the same types, iids, permissions, formats,
/// units, ranges, steps, valid values and descriptions in the model a user sees.
@Suite(.enabled(if: HAPPeer.unavailableReason == nil || HAPPeer.isRequired, "needs the venv's aiohomekit"))
struct ThreadFixtureTests {
    @Test func everyCaptureDecodesAsAiohomekitDecodesIt() async throws {
        let paths = ThreadDatabaseTests.fixtures.map {
            RepoPaths.root.appendingPathComponent("Tests/Fixtures/thread/\($0).hex").path
        }
        let script = RepoPaths.root.appendingPathComponent("Scripts/aiohomekit-thread-database.py").path
        let result = try await runChecked(HAPPeer.python.path, [script] + paths, timeout: 60)
        let theirs = try JSONValue(parsing: result.standardOutput)
        for name in ThreadDatabaseTests.fixtures {
            let expected = try #require(theirs["\(name).hex"], "aiohomekit printed no \(name)")
            let db = try ThreadAttributeDatabase.decode(ThreadDatabaseTests.fixture(name))
            var problems: [String] = []
            let model = try db.accessories(idPrefix: name, problems: &problems)
            #expect(problems == [], "\(name)")
            let ours = Self.shape(db: db, model: model)
            // Service by service, so a difference names its place.
            let theirAccessories = expected.arrayValue ?? []
            #expect(ours.count == theirAccessories.count, "\(name): accessories")
            for (a, (mine, their)) in zip(ours, theirAccessories).enumerated() {
                #expect(mine["aid"] == their["aid"], "\(name) accessory #\(a)")
                let myServices = mine["services"]?.arrayValue ?? []
                let theirServices = their["services"]?.arrayValue ?? []
                #expect(myServices.count == theirServices.count, "\(name) accessory #\(a): services")
                let iids = Set(myServices.compactMap { $0["iid"] })
                var misread = 0
                for (m, t) in zip(myServices, theirServices) {
                    var t = t
                    // aiohomekit reads the u16 list of linked services as TLV items, so one link
                    // whose low byte is 0x00 (0x2000 = 8192) reads as a separator: [0]. Ours is
                    // the iid of a service of the accessory; aiohomekit's answer is taken as ours
                    // only there, and counted.
                    if t["linked"] == .array([.int(0)]), let mine = m["linked"]?.arrayValue, mine.count == 1,
                        let link = mine[0].int64Value, link & 0xFF == 0, iids.contains(mine[0]),
                        case .object(var o) = t
                    {
                        o["linked"] = .array(mine)
                        t = .object(o)
                        misread += 1
                    }
                    #expect(m == t, "\(name) service \(t["iid"].map { "\($0)" } ?? "?")")
                }
                // The Schlage's lock management, access code and NFC access services link to its
                // lock mechanism (8192); no other capture has such a link.
                #expect(misread == (name == "schlage-encode-plus" ? 3 : 0), "\(name)")
            }
            #expect(!theirAccessories.isEmpty, "\(name): aiohomekit read no accessories")
        }
    }

    /// Ours in the script's shape: the model's view (types, perms, format kind, unit, range, step,
    /// valid values, names, primary/hidden, links) beside the raw codes the tree read.
    static func shape(db: ThreadAttributeDatabase, model: [Accessory]) -> [JSONValue] {
        zip(db.accessories, model).map { tree, accessory in
            let services = zip(tree.services, accessory.services).map { ts, s -> JSONValue in
                let chars = zip(ts.characteristics, s.characteristics).map { tc, c -> JSONValue in
                    characteristic(tc, c)
                }
                // aiohomekit keeps the raw service properties; the model keeps primary and hidden.
                let p = ts.properties
                #expect(s.isPrimary == ((p ?? 0) & 1 != 0) && s.isHidden == ((p ?? 0) & 2 != 0))
                return .object([
                    "iid": .int(Int64(s.iid)), "type": .string(s.type),
                    "properties": p.map { .int(Int64($0)) } ?? .null,
                    "linked": .array(s.linkedServices.map { .int(Int64($0)) }), "characteristics": .array(chars),
                ])
            }
            return .object(["aid": .int(Int64(accessory.aid)), "services": .array(services)])
        }
    }

    static func characteristic(_ tc: ThreadAttributeDatabase.Characteristic, _ c: Characteristic) -> JSONValue {
        let m = c.metadata
        let kind: String =
            switch m.format {
            case .bool: "bool"
            case .uint8, .uint16, .uint32, .uint64, .int: "int"
            case .float: "float"
            case .string: "string"
            case .tlv8, .data: "data"
            }
        let pf = tc.presentationFormat
        let unitCode = pf.map { Int64($0[2]) | Int64($0[3]) << 8 }
        func number(_ d: Double?) -> JSONValue {
            guard let d else { return .null }
            return m.format.isInteger ? .int(Int64(d)) : .double(d)
        }
        return .object([
            "iid": .int(Int64(c.iid)), "type": .string(c.type), "properties": .int(Int64(tc.properties)),
            "perms": .array(
                ["pr", "pw", "ev", "aa", "tw", "hd"].filter { code in
                    CharacteristicPermissions.codes.contains { $0.0 == code && m.permissions.contains($0.1) }
                }.map { .string($0) }),
            "format_code": pf.map { .int(Int64($0[0])) } ?? .null, "format": .string(kind),
            "unit_code": unitCode.map { .int($0) } ?? .null,
            "unit": .string(m.unit ?? (unitCode == 0x2700 ? "unitless" : "unknown")),
            "min": number(m.minValue), "max": number(m.maxValue), "step": number(m.minStep),
            "valid_values": m.validValues.isEmpty ? .null : .array(m.validValues.keys.sorted().map { .int($0) }),
            "valid_values_range": tc.validValuesRanges.map { .array($0.map { .int(Int64($0)) }) } ?? .null,
            "description": c.name.map { .string($0) } ?? .null,
        ])
    }
}
