import Foundation
import TestSupport
import HomeModel
import Testing
@testable import Simulator

@Suite struct FixtureImportTests {
    static let fixtureNames: [String] = {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: Paths.fixtures.path)) ?? []
        return names.filter { $0.hasSuffix(".json") }.sorted()
    }()

    @Test func thereAreFixtures() {
        #expect(Self.fixtureNames.count >= 8)
    }

    /// Every accessory, service and characteristic of the dump is there under its aid and iid
    /// with its type, custom types included; readable ones have a value.
    @Test(arguments: fixtureNames)
    func fixtureLoadsCompletely(name: String) async throws {
        let url = Paths.fixtures.appendingPathComponent(name)
        let home = try SimulatedHome.load(files: [url], clock: .manual)
        let loaded = await home.accessories()
        let raw = try JSONSerialization.jsonObject(with: Data(contentsOf: url))
        let list = try #require(
            (raw as? [[String: Any]]) ?? ((raw as? [String: Any])?["accessories"] as? [[String: Any]]))
        let stem = url.deletingPathExtension().lastPathComponent

        #expect(loaded.count == list.count)
        var customSeen = 0
        for rawAccessory in list {
            let aid = try #require((rawAccessory["aid"] as? NSNumber)?.uint64Value)
            let accessory = try #require(loaded.first { $0.aid == aid })
            #expect(accessory.id == "sim:\(stem):\(aid)")
            let rawServices = try #require(rawAccessory["services"] as? [[String: Any]])
            #expect(accessory.services.count == rawServices.count)
            for rawService in rawServices {
                let siid = try #require((rawService["iid"] as? NSNumber)?.uint64Value)
                let service = try #require(accessory.services.first { $0.iid == siid })
                let serviceType = StandardUUID.longForm(try #require(rawService["type"] as? String))
                #expect(service.type.count == 36)
                #expect(
                    service.type.replacingOccurrences(of: "-", with: "")
                        == serviceType.replacingOccurrences(of: "-", with: ""))
                let rawChars = try #require(rawService["characteristics"] as? [[String: Any]])
                #expect(service.characteristics.count == rawChars.count)
                for rawChar in rawChars {
                    let iid = try #require((rawChar["iid"] as? NSNumber)?.uint64Value)
                    let c = try #require(service.characteristic(iid: iid), "\(name) \(aid).\(iid) missing")
                    let type = StandardUUID.longForm(try #require(rawChar["type"] as? String))
                    // Some devices send UUIDs without dashes; the model always has the dashed form.
                    #expect(c.type.count == 36)
                    #expect(
                        c.type.replacingOccurrences(of: "-", with: "") == type.replacingOccurrences(of: "-", with: ""))
                    if StandardUUID.shortForm(type) == nil { customSeen += 1 }
                    if let format = rawChar["format"] as? String {
                        #expect(c.metadata.format.rawValue == format)
                    }
                    let perms = (rawChar["perms"] as? [String]) ?? []
                    #expect(c.metadata.permissions.contains(.read) == perms.contains("pr"))
                    if perms.contains("pr") {
                        let value = try await home.read(CharacteristicAddress(accessoryID: accessory.id, iid: iid))
                        if let rawValue = rawChar["value"] as? NSNumber, c.metadata.format.isNumeric {
                            #expect(value.doubleValue == rawValue.doubleValue, "\(name) \(aid).\(iid)")
                        } else if let rawValue = rawChar["value"] as? String, c.metadata.format == .string {
                            #expect(value == .string(rawValue))
                        }
                    }
                }
            }
        }
        let rawCustom = list.flatMap { ($0["services"] as? [[String: Any]]) ?? [] }
            .flatMap { ($0["characteristics"] as? [[String: Any]]) ?? [] }
            .filter { StandardUUID.shortForm(StandardUUID.longForm(($0["type"] as? String) ?? "")) == nil }
        #expect(customSeen == rawCustom.count)
    }

    @Test func missingFormatsComeFromTheCatalog() async throws {
        let home = try SimulatedHome.load(
            files: [Paths.fixtures.appendingPathComponent("idevices_switch.json")], clock: .manual)
        let accessory = try #require(await home.accessories().first)
        let hue = try #require(
            accessory.services.flatMap(\.characteristics).first { $0.type == StandardUUID.longForm("13") })
        #expect(hue.metadata.format == .float)
        #expect(hue.value == .float(261))
        let on = try #require(
            accessory.services.flatMap(\.characteristics).first { $0.type == StandardUUID.longForm("25") })
        #expect(on.metadata.format == .bool)
    }

    @Test func dumpsWriteAndNotifyLikeTheirDevice() async throws {
        let home = try SimulatedHome.load(
            files: [Paths.fixtures.appendingPathComponent("koogeek_ls1.json")], clock: .manual)
        let bulb = try #require(await home.accessories().first)
        let on = try #require(bulb.address(service: "lightbulb", characteristic: "on"))
        _ = await home.setNotifications(enabled: true, for: [on])
        let log = EventLog(home)
        try await home.write(on, value: .bool(true))
        #expect(await log.values(for: on) == [.bool(true)])
    }

    @Test func importFromYAMLSetsRoomsAndCategory() async throws {
        let dir = try TemporaryDirectory()
        let dump = try Data(contentsOf: Paths.fixtures.appendingPathComponent("home_assistant_bridge_fan.json"))
        try dir.write("dumps/fans.json", String(decoding: dump, as: UTF8.self))
        let yml = try dir.write(
            "fans.yml",
            """
            import: dumps/fans.json
            room: Living Room
            rooms: { 766313939: Bedroom }
            reachable: false
            """)
        let home = try SimulatedHome.load(files: [yml], clock: .manual)
        let all = await home.accessories()
        #expect(all.map(\.id) == ["sim:fans:1", "sim:fans:1256851357", "sim:fans:766313939"])
        #expect(all.map(\.suggestedRoom) == ["Living Room", "Living Room", "Bedroom"])
        #expect(all.allSatisfy { !$0.isReachable })
        #expect(all[0].category == Catalog.category(named: "bridge"))
        #expect(all[1].category == Catalog.category(named: "fan"))
        #expect(all[1].bridgeID == "sim:fans:1")
    }
}

@Suite struct ShippedConfigTests {
    @Test func shippedAccessoriesLoadAndCoverEveryFilter() async throws {
        let home = try SimulatedHome.load(directory: Paths.config, clock: .manual)
        let all = await home.accessories()

        let garage = try #require(all.first { $0.manufacturer == "Kilgo Devices, Inc." })
        #expect(garage.suggestedRoom == "Garage")
        #expect(garage.category == Catalog.category(named: "garage-door-opener"))
        #expect(
            garage.services.map(\.type)
                == ["accessory-information", "garage-door-opener", "lightbulb"].compactMap {
                    Catalog.serviceType(named: $0)?.uuid
                })
        let fade = try #require(garage.services[2].characteristic(type: "7E536242-341C-4862-BE90-272CE15BD633"))
        #expect(fade.name == "Fade Rate")
        #expect(fade.metadata.format == .float)
        #expect(fade.metadata.permissions == [.read, .write, .notify])
        #expect(garage.services[0].iid == 1)
        #expect(garage.services[0].characteristics.first?.iid == 2)

        let bridges = all.filter { $0.category == Catalog.category(named: "bridge") && !$0.isBridged }
        #expect(bridges.contains { bridge in all.filter { $0.bridgeID == bridge.id }.count >= 2 })
        for kind in [
            "thermostat", "lock-mechanism", "temperature-sensor", "humidity-sensor", "motion-sensor", "contact-sensor",
            "switch", "outlet", "lightbulb",
        ] {
            let uuid = try #require(Catalog.serviceType(named: kind)?.uuid)
            #expect(all.contains { $0.services.contains { $0.type == uuid } }, "no \(kind)")
        }
        #expect(Set(all.compactMap(\.suggestedRoom)).count >= 5)
        #expect(Set(all.map(\.manufacturer)).count >= 5)
        #expect(Set(all.map(\.category)).count >= 6)
        #expect(all.contains { $0.manufacturer == "Elgato" }, "the imported Eve Energy dump")
        #expect(Set(all.map(\.id)).count == all.count)

        // The shipped garage door works with its configured travel time.
        let target = try #require(garage.address(service: "garage-door-opener", characteristic: "target-door-state"))
        let current = try #require(garage.address(service: "garage-door-opener", characteristic: "current-door-state"))
        try await home.write(target, value: .uint(0))
        await home.advance(by: 11.9)
        #expect(try await home.read(current) == .uint(2))
        await home.advance(by: 0.1)
        #expect(try await home.read(current) == .uint(0))
    }

    @Test func idsAndIidsAreStableAcrossLoads() async throws {
        let first = await (try SimulatedHome.load(directory: Paths.config, clock: .manual)).accessories()
        let second = await (try SimulatedHome.load(directory: Paths.config, clock: .manual)).accessories()
        #expect(first == second)
        #expect(first.contains { $0.id == "sim:garage" })
        #expect(first.contains { $0.id == "sim:lumen-bridge:2" })
    }

    @Test func requiredCharacteristicsGetDefaultsInsideTheirMetadata() async throws {
        let (home, dir) = try makeHome(
            """
            name: Bare
            services:
              - type: thermostat
              - type: battery
              - type: garage-door-opener
            """)
        _ = dir
        let bare = try #require(await home.accessories().first)
        for service in bare.services.dropFirst() {
            let type = try #require(Catalog.serviceType(uuid: service.type))
            #expect(type.requiredCharacteristics.allSatisfy { service.characteristic(type: $0) != nil })
            for c in service.characteristics where c.metadata.permissions.contains(.read) {
                let value = try #require(c.value)
                #expect(throws: Never.self) { try ValueCodec.validate(value, metadata: c.metadata, label: "x") }
            }
        }
        #expect(bare.services[1].characteristic(type: StandardUUID.longForm("35"))?.value == .float(20))
    }

    /// A service's `name` becomes its Name characteristic's value as written, also a name that
    /// YAML's resolver would take for a flag, a number or nothing.
    @Test func aServiceNameIsItsNameCharacteristicAsWritten() async throws {
        let names = ["Reading Light", "yes", "Off", "1.5", "~", "null", "0x1F"]
        let services = names.map { "  - type: lightbulb\n    name: '\($0)'\n" }.joined()
        let (home, dir) = try makeHome("name: Names\nservices:\n" + services)
        _ = dir
        let accessory = try #require(await home.accessories().first)
        let lamps = accessory.services.filter { $0.type == StandardUUID.longForm("43") }
        #expect(lamps.map(\.name) == names)
        #expect(lamps.map { $0.characteristic(type: StandardUUID.name)?.value } == names.map { .string($0) })
    }
}

@Suite struct BadFileTests {
    /// Loads `text` as `bad.yml` (next to a good file) and returns the error.
    func failure(_ text: String, file: String = "bad.yml") throws -> SimulatorError {
        let dir = try TemporaryDirectory()
        try dir.write("a-good.yml", "name: Good One\nservices:\n  - type: switch\n")
        try dir.write(file, text)
        do {
            _ = try SimulatedHome.load(directory: dir.url, clock: .manual)
        } catch {
            #expect(error.file.hasSuffix("/\(file)"))
            #expect(error.description.hasPrefix("\(error.file): "))
            return error
        }
        Issue.record("\(file) loaded")
        return SimulatorError(file: "", code: ErrorCode(rawValue: ""), message: "")
    }

    /// `homekit:` is `bridged`, `standalone` or `thread`, on a single accessory only.
    @Test func homekitServing() async throws {
        let e = try failure("homekit: alone\nname: X\nservices:\n  - type: switch\n")
        #expect(e.key == "homekit")
        #expect(
            e.description.hasSuffix("/bad.yml: homekit: must be bridged, standalone or thread, got 'alone'"), "\(e)")
        let bridge = try failure(
            "homekit: standalone\nname: B\nbridged:\n  - name: L\n    services: [ { type: lightbulb } ]\n")
        #expect(bridge.key == "homekit")
        #expect(bridge.message.contains("only a single accessory"), "\(bridge)")
        let bridged = try failure(
            "name: B\nbridged:\n  - name: L\n    homekit: standalone\n    services: [ { type: lightbulb } ]\n")
        #expect(bridged.key == "bridged[0].homekit", "\(bridged)")
        let (home, _dir) = try makeHome("homekit: standalone\nname: Alone\nservices:\n  - type: switch\n")
        _ = _dir
        #expect(await home.accessories().map(\.isHomeKitStandalone) == [true])
        let (other, _other) = try makeHome("homekit: bridged\nname: Here\nservices:\n  - type: switch\n")
        _ = _other
        #expect(await other.accessories().map(\.isHomeKitStandalone) == [false])
        // A Thread accessory is served alone too (off the bridge), over CoAP.
        let (thread, _thread) = try makeHome("homekit: thread\nname: Mesh\nservices:\n  - type: switch\n")
        _ = _thread
        #expect(await thread.accessories().map { [$0.isHomeKitStandalone, $0.isHomeKitThread] } == [[true, true]])
        let threadBridge = try failure(
            "homekit: thread\nname: B\nbridged:\n  - name: L\n    services: [ { type: lightbulb } ]\n")
        #expect(threadBridge.key == "homekit")
        #expect(threadBridge.message.contains("cannot be thread; only a single accessory"), "\(threadBridge)")
    }

    @Test func yamlSyntax() throws {
        let e = try failure("name: Broken\nservices:\n  - type: switch\n   characteristics: [\n")
        #expect(e.code.rawValue == "yaml-syntax")
        #expect(e.key == nil)
    }

    @Test func unknownServiceType() throws {
        let e = try failure("name: X\nservices:\n  - type: lightbulp\n")
        #expect(e.code.rawValue == "unknown-type")
        #expect(e.key == "services[0].type")
        #expect(e.message.contains("lightbulp"))
    }

    @Test func unknownCharacteristicName() throws {
        let e = try failure("name: X\nservices:\n  - type: lightbulb\n    characteristics:\n      brightnes: 50\n")
        #expect(e.code.rawValue == "unknown-type")
        #expect(e.key == "services[0].characteristics.brightnes")
    }

    @Test func valueOfTheWrongFormat() throws {
        let e = try failure("name: X\nservices:\n  - type: lightbulb\n    characteristics:\n      brightness: bright\n")
        #expect(e.code.rawValue == "invalid-type")
        #expect(e.key == "services[0].characteristics.brightness")
        let f = try failure(
            "name: X\nservices:\n  - type: garage-door-opener\n    characteristics:\n      target-door-state: ajar\n")
        #expect(f.code.rawValue == "not-a-valid-value")
        #expect(f.key == "services[0].characteristics.target-door-state")
    }

    @Test func outOfRangeInitialValue() throws {
        let e = try failure(
            "name: X\nservices:\n  - type: switch\n  - type: lightbulb\n    characteristics:\n      brightness: 140\n")
        #expect(e.code.rawValue == "out-of-range")
        #expect(e.key == "services[1].characteristics.brightness")
        #expect(e.description.contains("bad.yml: services[1].characteristics.brightness: "))
        #expect(e.description.contains("140"))
        let overridden = try failure(
            "name: X\nservices:\n  - type: lightbulb\n    characteristics:\n      brightness: { value: 5, min: 10 }\n")
        #expect(overridden.code.rawValue == "out-of-range")
        #expect(overridden.key == "services[0].characteristics.brightness.value")
        let custom = try failure(
            """
            name: X
            services:
              - type: lightbulb
                custom:
                  - { uuid: 7E536242-341C-4862-BE90-272CE15BD633, name: Fade Rate, format: float, min: 0, max: 10, value: 11 }
            """)
        #expect(custom.code.rawValue == "out-of-range")
        #expect(custom.key == "services[0].custom[0].value")
    }

    @Test func duplicateCustomUUID() throws {
        let e = try failure(
            """
            name: X
            services:
              - type: lightbulb
                custom:
                  - { uuid: 7E536242-341C-4862-BE90-272CE15BD633, name: Fade Rate, format: float }
                  - { uuid: 7e536242-341c-4862-be90-272ce15bd633, name: Fade Again, format: float }
            """)
        #expect(e.code.rawValue == "duplicate-uuid")
        #expect(e.key == "services[0].custom[1].uuid")
    }

    @Test func duplicateNames() throws {
        let e = try failure("name: good one\nservices:\n  - type: switch\n")
        #expect(e.code.rawValue == "duplicate-name")
        #expect(e.key == "name")
        #expect(e.message.contains("a-good.yml"))
        let bridged = try failure(
            """
            name: Bridge
            bridged:
              - { name: Lamp, services: [ { type: lightbulb } ] }
              - { name: Lamp, services: [ { type: lightbulb } ] }
            """)
        #expect(bridged.code.rawValue == "duplicate-name")
        #expect(bridged.key == "bridged[1].name")
        let services = try failure("name: X\nservices:\n  - { type: switch, name: A }\n  - { type: switch, name: A }\n")
        #expect(services.code.rawValue == "duplicate-name")
        #expect(services.key == "services[1].name")
    }

    @Test func unknownAndMissingKeys() throws {
        let e = try failure("name: X\nmanufactuer: Typo\nservices:\n  - type: switch\n")
        #expect(e.code.rawValue == "unknown-key")
        #expect(e.key == "manufactuer")
        let m = try failure("manufacturer: Nobody\nservices:\n  - type: switch\n")
        #expect(m.code.rawValue == "missing-key")
        #expect(m.key == "name")
        let b = try failure("name: X\nservices:\n  - type: switch\n    behaviour: { travel-time: 3 }\n")
        #expect(b.code.rawValue == "unknown-key")
        #expect(b.key == "services[0].behaviour.travel-time")
        let c = try failure("name: X\ncategory: spaceship\nservices:\n  - type: switch\n")
        #expect(c.code.rawValue == "unknown-type")
        #expect(c.key == "category")
    }

    @Test func badDumps() throws {
        let e = try failure("[{\"aid\": 1, \"services\": 3}]", file: "dump.json")
        #expect(e.code.rawValue == "invalid-dump")
        let j = try failure("{not json", file: "broken.json")
        #expect(j.code.rawValue == "invalid-json")
        let i = try failure("import: nowhere/missing.json\n")
        #expect(i.code.rawValue == "io")
        #expect(i.key == "import")
    }

    /// Files are parsed side by side, but what a load says is what a load in order would: the
    /// first bad file's error, and accessories in file order.
    @Test func manyFilesLoadInOrderAndTheFirstBadOneIsNamed() throws {
        let dir = try TemporaryDirectory()
        var files: [URL] = []
        for index in 0..<200 {
            let number = String(format: "%03d", index)
            files.append(try dir.write("lamp-\(number).yml", "name: Lamp \(number)\nservices:\n  - type: lightbulb\n"))
        }
        let loaded = try AccessoryFileLoader.load(files: files)
        #expect(loaded.accessories.map(\.name) == (0..<200).map { "Lamp " + String(format: "%03d", $0) })

        var broken = files
        broken[150] = try dir.write(
            "b-150.yml", "name: B\nservices:\n  - type: switch\n    behaviour: { travel-time: 3 }\n")
        broken[40] = try dir.write("a-040.yml", "name: A\ncategory: spaceship\nservices:\n  - type: switch\n")
        broken[199] = try dir.write("c-199.yml", "name: Lamp 000\nservices:\n  - type: switch\n")
        for _ in 0..<5 {
            do {
                _ = try AccessoryFileLoader.load(files: broken)
                Issue.record("three bad files loaded")
            } catch {
                #expect(error.file.hasSuffix("a-040.yml"))
                #expect(error.code.rawValue == "unknown-type")
            }
        }
    }

    @Test func nothingLoadsWhenOneFileIsBad() throws {
        let dir = try TemporaryDirectory()
        let good = try dir.write("good.yml", "name: Good\nservices:\n  - type: switch\n")
        let bad = try dir.write(
            "z-bad.yml", "name: Bad\nservices:\n  - type: switch\n    characteristics: { on: maybe }\n")
        #expect(throws: SimulatorError.self) { try AccessoryFileLoader.load(files: [good, bad]) }
        #expect(throws: Never.self) { try AccessoryFileLoader.load(files: [good]) }
    }
}
