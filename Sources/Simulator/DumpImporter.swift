import Foundation
import HomeModel

/// Imports a HAP `/accessories` dump so any real device can be simulated.
///
/// HomeModel's `HAPAccessoryJSON` reads the dump as the HAP controller does; the simulator
/// then fills in what a live accessory would answer but a dump may leave out: a `format` a
/// device omitted (taken from the catalog for standard types), names of valid values, and a
/// value for every readable characteristic, so reads work like on the device.
enum DumpImporter {
    static func load(bytes: [UInt8], file: String, stem: String) throws(SimulatorError) -> SimulatorConfiguration {
        var accessories: [Accessory]
        let json: JSONValue
        var problems: [String] = []
        do {
            json = try JSONValue(parsing: bytes)
            accessories = try HAPAccessoryJSON.parse(json: json, idPrefix: "sim:\(stem)", problems: &problems)
        } catch {
            throw SimulatorError(
                file: file, code: error.code == .badJSON || error.code == .invalidJSON ? .invalidJSON : .invalidDump,
                message: error.message)
        }
        let missingFormat = characteristicsWithoutFormat(json)
        for ai in accessories.indices {
            let aid = accessories[ai].aid
            for si in accessories[ai].services.indices {
                for ci in accessories[ai].services[si].characteristics.indices {
                    let c = accessories[ai].services[si].characteristics[ci]
                    accessories[ai].services[si].characteristics[ci] = complete(
                        c, formatWasMissing: missingFormat.contains(Key(aid: aid, iid: c.iid)))
                }
            }
            if accessories[ai].category == 1 {
                accessories[ai].category = inferredCategory(accessories[ai].services)
            }
        }
        var configuration = SimulatorConfiguration(accessories: accessories)
        configuration.warnings = problems.map { "\(file): \($0); the value is left out" }
        return configuration
    }

    struct Key: Hashable {
        var aid: UInt64
        var iid: UInt64
    }

    static func characteristicsWithoutFormat(_ json: JSONValue) -> Set<Key> {
        let list = json.arrayValue ?? json["accessories"]?.arrayValue ?? []
        var result = Set<Key>()
        for accessory in list {
            guard let aid = accessory["aid"]?.uint64Value else { continue }
            for service in accessory["services"]?.arrayValue ?? [] {
                for c in service["characteristics"]?.arrayValue ?? [] where c["format"] == nil {
                    if let iid = c["iid"]?.uint64Value { result.insert(Key(aid: aid, iid: iid)) }
                }
            }
        }
        return result
    }

    static func complete(_ characteristic: Characteristic, formatWasMissing: Bool) -> Characteristic {
        var c = characteristic
        if let standard = Catalog.characteristicType(uuid: c.type) {
            if formatWasMissing {
                // The device said nothing about the value's shape: the standard one applies,
                // keeping the permissions the device did state.
                let permissions = c.metadata.permissions
                c.metadata = standard.metadata
                if !permissions.isEmpty { c.metadata.permissions = permissions }
                if let value = c.value {
                    c.value = (try? ValueCodec.validate(value, metadata: c.metadata, label: standard.name)) ?? value
                }
            }
            if !standard.metadata.validValues.isEmpty, c.metadata.format.isInteger {
                if c.metadata.validValues.isEmpty {
                    c.metadata.validValues = standard.metadata.validValues
                } else {
                    for key in c.metadata.validValues.keys {
                        if let name = standard.metadata.validValues[key] { c.metadata.validValues[key] = name }
                    }
                }
            }
        }
        if c.value == nil, c.metadata.permissions.contains(.read) {
            c.value = AccessoryBuilder.defaultValue(for: c.metadata, type: c.type, name: c.name ?? "")
        }
        return c
    }
}
