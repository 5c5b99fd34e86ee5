import Foundation
import Testing
import TestSupport
@testable import HomeModel

/// HAP-python's catalog as the repository keeps it (`Tests/Fixtures/hap-catalog`, see its README).
enum SharedCatalog {
    static let repo = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let directory = repo.appendingPathComponent("Tests/Fixtures/hap-catalog")

    static func load(_ name: String) throws -> [String: [String: Any]] {
        let data = try Data(contentsOf: directory.appendingPathComponent(name))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: [String: Any]])
    }

    /// HAP-python's table with the types HAP-NodeJS and aiohomekit add (`more-<name>`).
    static func merged(_ name: String) throws -> [String: [String: Any]] {
        try load(name).merging(load("more-" + name)) { a, _ in a }
    }

    static func double(_ any: Any?) -> Double? { (any as? NSNumber)?.doubleValue }
}

@Suite struct CatalogTests {
    /// `^[a-z0-9]+(-[a-z0-9]+)*$`
    static func isKebab(_ s: String) -> Bool {
        !s.isEmpty
            && s.split(separator: "-", omittingEmptySubsequences: false).allSatisfy { part in
                !part.isEmpty && part.allSatisfy { ("a"..."z").contains($0) || ("0"..."9").contains($0) }
            }
    }

    @Test func everyCharacteristicMatchesTheSharedCatalog() throws {
        let source = try SharedCatalog.merged("characteristics.json")
        #expect(try SharedCatalog.load("characteristics.json").count == 149)
        #expect(source.count == 257)
        #expect(Catalog.characteristicTypes.count == source.count)
        for (hapName, spec) in source {
            let uuid = try #require(spec["UUID"] as? String)
            let type = try #require(Catalog.characteristicType(uuid: uuid), "\(hapName) missing")
            #expect(type.hapName == hapName)
            #expect(type.uuid == uuid.uppercased())
            #expect(type.metadata.format.rawValue == spec["Format"] as? String, "\(hapName) format")
            let perms = try CharacteristicPermissions(parsing: spec["Permissions"] as? [String] ?? [])
            #expect(type.metadata.permissions == perms, "\(hapName) permissions")
            #expect(type.metadata.unit == spec["unit"] as? String, "\(hapName) unit")
            #expect(type.metadata.minValue == SharedCatalog.double(spec["minValue"]), "\(hapName) min")
            #expect(type.metadata.maxValue == SharedCatalog.double(spec["maxValue"]), "\(hapName) max")
            #expect(
                type.metadata.minStep == SharedCatalog.double(spec["minStep"] ?? spec["stepValue"]), "\(hapName) step")
            #expect(type.metadata.maxLength == (spec["MaximumLength"] as? NSNumber)?.intValue, "\(hapName) max length")
            let values = (spec["ValidValues"] as? [String: NSNumber] ?? [:]).values.map(\.int64Value)
            #expect(Set(type.metadata.validValues.keys) == Set(values), "\(hapName) valid values")
            #expect(
                Set(type.metadata.validValues.values).count == type.metadata.validValues.count,
                "\(hapName) value names unique")
            for name in type.metadata.validValues.values {
                #expect(Self.isKebab(name), "\(hapName) value name \(name)")
            }
        }
    }

    @Test func everyServiceMatchesTheSharedCatalog() throws {
        let chars = try SharedCatalog.merged("characteristics.json")
        let source = try SharedCatalog.merged("services.json")
        #expect(try SharedCatalog.load("services.json").count == 44)
        #expect(source.count == 77)
        #expect(Catalog.serviceTypes.count == source.count)
        func uuids(_ names: Any?) throws -> [String] {
            try (names as? [String] ?? []).map { try #require(chars[$0]?["UUID"] as? String) }
        }
        for (hapName, spec) in source {
            let type = try #require(Catalog.serviceType(named: hapName), "\(hapName) missing")
            #expect(type.uuid == (spec["UUID"] as? String)?.uppercased())
            #expect(type.requiredCharacteristics == (try uuids(spec["RequiredCharacteristics"])), "\(hapName) required")
            #expect(type.optionalCharacteristics == (try uuids(spec["OptionalCharacteristics"])), "\(hapName) optional")
        }
    }

    @Test func namesAreUniqueKebabCaseAndResolve() throws {
        for types in [
            Catalog.characteristicTypes.map { ($0.name, $0.hapName, $0.uuid) },
            Catalog.serviceTypes.map { ($0.name, $0.hapName, $0.uuid) },
        ] {
            #expect(Set(types.map(\.0)).count == types.count)
            for (name, _, _) in types { #expect(Self.isKebab(name), "\(name)") }
        }
        for type in Catalog.characteristicTypes {
            #expect(Catalog.characteristicType(named: type.name) == type)
            #expect(Catalog.characteristicType(named: type.hapName.uppercased()) == type)
            #expect(Catalog.characteristicType(uuid: type.uuid.lowercased()) == type)
            let short = try #require(StandardUUID.shortForm(type.uuid))
            #expect(Catalog.characteristicType(uuid: short) == type)
        }
        for type in Catalog.serviceTypes {
            #expect(Catalog.serviceType(named: type.name) == type)
            #expect(Catalog.serviceType(named: type.hapName) == type)
        }
        // HAP gives the television speaker the speaker's UUID.
        #expect(Catalog.serviceType(uuid: "113")?.name == "speaker")
        #expect(Catalog.characteristicType(named: "no-such-type") == nil)
        #expect(Catalog.characteristicType(uuid: "FFFFFF") == nil)
        #expect(Catalog.serviceType(uuid: "12345678-0000-0000-0000-000000000000") == nil)
    }

    @Test(arguments: [
        ("On", "power-state"), ("Brightness", "brightness"), ("TargetDoorState", "target-door-state"),
        ("CurrentDoorState", "current-door-state"), ("ObstructionDetected", "obstruction-detected"),
        ("CurrentTemperature", "current-temperature"), ("TargetHeatingCoolingState", "target-heating-cooling"),
        ("LockTargetState", "target-lock-mechanism-state"), ("LockCurrentState", "current-lock-mechanism-state"),
        ("Name", "name"), ("Identify", "identify"), ("Manufacturer", "manufacturer"),
        ("FirmwareRevision", "firmware-version"), ("PM2.5Density", "pm2-5-density"),
    ])
    func characteristicNamesFollowHomeKit(hapName: String, name: String) throws {
        let type = try #require(Catalog.characteristicType(named: hapName))
        #expect(type.name == name)
    }

    @Test func hapSpellingsResolveAsAliases() {
        #expect(Catalog.characteristicType(named: "on")?.name == "power-state")
        #expect(Catalog.characteristicType(named: "target-heating-cooling-state")?.name == "target-heating-cooling")
        #expect(Catalog.characteristicType(named: "lock-target-state")?.name == "target-lock-mechanism-state")
        #expect(Catalog.serviceType(named: "fanv2")?.name == "ventilation-fan")
        #expect(Catalog.serviceType(named: "battery-service")?.name == "battery")
    }

    @Test(arguments: [
        ("GarageDoorOpener", "garage-door-opener"), ("Lightbulb", "lightbulb"),
        ("AccessoryInformation", "accessory-information"),
        ("Switch", "switch"), ("Outlet", "outlet"), ("Thermostat", "thermostat"), ("LockMechanism", "lock-mechanism"),
    ])
    func serviceNamesFollowHomeKit(hapName: String, name: String) throws {
        #expect(try #require(Catalog.serviceType(named: hapName)).name == name)
    }

    @Test func validValueNames() throws {
        let door = try #require(Catalog.characteristicType(named: "target-door-state"))
        #expect(door.metadata.validValues == [0: "open", 1: "closed"])
        let heating = try #require(Catalog.characteristicType(named: "target-heating-cooling"))
        #expect(heating.metadata.validValues == [0: "off", 1: "heat", 2: "cool", 3: "auto"])
    }

    @Test func categories() {
        #expect(Set(Catalog.categories.keys) == Set(1...33))
        #expect(Set(Catalog.categories.values).count == 33)
        for (number, name) in Catalog.categories {
            #expect(Catalog.category(named: name) == number)
            #expect(Catalog.category(named: name.uppercased()) == number)
            #expect(Self.isKebab(name))
        }
        #expect(Catalog.categories[2] == "bridge")
        #expect(Catalog.categories[4] == "garage-door-opener")
        #expect(Catalog.categories[33] == "wifi-router")
        #expect(Catalog.category(named: "alarm-system") == 11)
        #expect(Catalog.category(named: "7") == 7)
        #expect(Catalog.category(named: "toaster") == nil)
        #expect(Catalog.category(named: "99") == nil)
    }

    /// The committed generated source is what the script makes from the shared catalog now.
    @Test
    func generatedSourceIsUpToDate() async throws {
        // TestSupport's spawner, not Foundation's Process: the latter reaps children it does not
        // own and so breaks other tests' process handling when suites run in parallel.
        let result = try await runProcess(
            "/usr/bin/python3",
            [
                SharedCatalog.repo.appendingPathComponent("Scripts/generate-catalog.py").path,
                "--catalog", SharedCatalog.directory.path, "--check",
            ])
        #expect(result.status == 0, "\(result.standardError)")
    }
}

/// `StandardUUID.longForm` returns an upper-case long form as it is: it must say what it said
/// when it upper-cased every input.
@Suite struct LongFormTests {
    @Test func everyInputGetsTheFormItGotBefore() {
        let inputs = [
            "00000025-0000-1000-8000-0026BB765291", "00000025-0000-1000-8000-0026bb765291",
            "E863F10A-079E-48FF-8F27-9C2605A29F52", "e863f10a-079e-48ff-8f27-9c2605a29f52",
            "E863f10A-079E-48FF-8F27-9C2605A29F52", "25", "8", "a2", "3E", "1234abcd",
            // 36 bytes that are not ASCII: upper-casing changes them (ß becomes SS).
            "0000002ß-0000-1000-8000-0026BB76529", "é0000025-0000-1000-8000-0026BB76529",
            "not a uuid at all, but 36 bytes long", "NOT A UUID AT ALL, BUT 36 BYTES LONG", "",
        ]
        for input in inputs {
            let before =
                input.uppercased().count <= 8 && input.uppercased().allSatisfy(\.isHexDigit)
                ? String(repeating: "0", count: 8 - input.uppercased().count) + input.uppercased()
                    + StandardUUID.baseSuffix
                : input.uppercased()
            #expect(StandardUUID.longForm(input) == before, "\(input)")
        }
        #expect(StandardUUID.longForm("25") == "00000025-0000-1000-8000-0026BB765291")
        #expect(Catalog.characteristicType(uuid: "00000008-0000-1000-8000-0026bb765291")?.name == "brightness")
    }
}
