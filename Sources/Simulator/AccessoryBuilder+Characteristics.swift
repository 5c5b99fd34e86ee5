import HomeModel
import Yams

// A file's characteristic values, metadata overrides (min, max, valid values, permissions…)
// and custom characteristics, checked against the characteristic's format.

extension AccessoryBuilder {
    /// A value (`brightness: 80`) or the override form (`brightness: { value: 80, min: 10 }`).
    func characteristicValue(_ node: Node, key: String, type: CharacteristicType, metadata base: CharacteristicMetadata)
        throws(SimulatorError) -> (CharacteristicMetadata, CharacteristicValue?)
    {
        var metadata = base
        var valueNode: Node? = node
        if node.mapping != nil {
            let map = try FileReader(node, path: key, failure: SimulatorError.reading(file))
            try map.allowOnly(Self.overrideKeys)
            metadata = try applyOverrides(map, to: metadata, custom: false)
            valueNode = map.node("value")
        } else if node.sequence != nil {
            throw SimulatorError(
                file: file, key: key, code: .invalidValue,
                message: "expected a value or { value: …, min: …, … }, got a list")
        } else if node.null != nil, node.scalar?.style == .plain || node.scalar?.style == .any {
            valueNode = nil
        }
        guard let valueNode else { return (metadata, nil) }
        let valueKey = node.mapping != nil ? "\(key).value" : key
        return (metadata, try parseValue(valueNode, key: valueKey, label: type.name, metadata: metadata))
    }

    func parseValue(_ node: Node, key: String, label: String, metadata: CharacteristicMetadata) throws(SimulatorError)
        -> CharacteristicValue
    {
        guard let text = node.scalar?.string else {
            throw SimulatorError(
                file: file, key: key, code: .invalidValue,
                message: "expected a single value, got \(node.strictKindName)")
        }
        do {
            return try ValueCodec.parse(text: text, metadata: metadata, label: label)
        } catch {
            throw SimulatorError(file: file, key: key, code: error.code, message: error.message)
        }
    }

    func applyOverrides(_ map: FileReader, to base: CharacteristicMetadata, custom: Bool) throws(SimulatorError)
        -> CharacteristicMetadata
    {
        var metadata = base
        if let unit = try map.string("unit") { metadata.unit = unit }
        if let min = try map.double("min") { metadata.minValue = min }
        if let max = try map.double("max") { metadata.maxValue = max }
        if let step = try map.positive("step") { metadata.minStep = step }
        if let length = try map.int("max-length") {
            guard length > 0 else { throw map.error("max-length", .outOfRange, "must be greater than 0") }
            metadata.maxLength = length
        }
        if let names = try map.strings("permissions") {
            do {
                metadata.permissions = try CharacteristicPermissions(parsing: names)
            } catch {
                throw map.error("permissions", error.code, error.message)
            }
        }
        if let lo = metadata.minValue, let hi = metadata.maxValue, lo > hi {
            throw map.error(map.has("min") ? "min" : "max", .outOfRange, "min \(lo) is above max \(hi)")
        }
        if metadata.format.isNumeric,
            let bounds = metadata.format.integerBounds
                ?? (metadata.format == .float ? -Double.greatestFiniteMagnitude...Double.greatestFiniteMagnitude : nil)
        {
            for (key, limit) in [("min", metadata.minValue), ("max", metadata.maxValue)] {
                if let limit, !bounds.contains(limit) {
                    throw map.error(key, .outOfRange, "\(limit) does not fit the format \(metadata.format.rawValue)")
                }
            }
        } else if map.has("min") || map.has("max") || map.has("step") {
            throw map.error(
                map.has("min") ? "min" : map.has("max") ? "max" : "step", .invalidValue,
                "min, max and step apply to numbers only, this is \(metadata.format.rawValue)")
        }
        if map.has("valid-values") {
            guard metadata.format.isInteger else {
                throw map.error(
                    "valid-values", .invalidValue,
                    "valid values apply to integer formats only, this is \(metadata.format.rawValue)")
            }
            metadata.validValues = try validValues(map, base: base.validValues, custom: custom)
        }
        return metadata
    }

    /// Standard characteristics: a list narrowing the catalog's values (names or numbers).
    /// Custom ones: a mapping `{ 0: slow, 1: fast }` or a list of numbers.
    func validValues(_ map: FileReader, base: [Int64: String], custom: Bool) throws(SimulatorError) -> [Int64: String] {
        guard let node = map.node("valid-values") else { return base }
        var result: [Int64: String] = [:]
        if node.mapping != nil {
            guard custom else {
                throw map.error(
                    "valid-values", .invalidValue,
                    "a standard characteristic's valid values are narrowed with a list, e.g. [open, closed]")
            }
            let values = try map.reader(for: node, path: map.keyPath("valid-values"))
            for (key, nameNode) in values.entries {
                guard let number = Int64(key) else {
                    throw values.error(key, .invalidValue, "expected an integer, got '\(key)'")
                }
                guard let name = nameNode.scalar?.string, !name.isEmpty else {
                    throw values.error(key, .invalidValue, "expected a name")
                }
                result[number] = name
            }
            return result
        }
        for (path, item) in try map.list("valid-values") ?? [] {
            guard let text = item.scalar?.string else {
                throw SimulatorError(file: file, key: path, code: .invalidValue, message: "expected a value")
            }
            if let number = Int64(text) {
                if !base.isEmpty && base[number] == nil {
                    throw SimulatorError(
                        file: file, key: path, code: .notAValidValue,
                        message:
                            "\(number) is not one of the type's values (\(base.keys.sorted().map(String.init).joined(separator: ", ")))"
                    )
                }
                result[number] = base[number] ?? String(number)
            } else if let hit = base.first(where: { $0.value == text.lowercased() }) {
                result[hit.key] = hit.value
            } else {
                throw SimulatorError(
                    file: file, key: path, code: .notAValidValue,
                    message:
                        "'\(text)' is not one of \(base.sorted { $0.key < $1.key }.map(\.value).joined(separator: ", "))"
                )
            }
        }
        return result
    }

    func customCharacteristic(_ map: FileReader, iid: UInt64) throws(SimulatorError) -> Characteristic {
        try map.allowOnly(Self.customKeys)
        let uuid = try map.requiredString("uuid")
        guard Self.isFullUUID(uuid) else {
            throw map.error(
                "uuid", .invalidValue,
                "a custom characteristic needs a full UUID like 7E536242-341C-4862-BE90-272CE15BD633, got '\(uuid)'")
        }
        if let standard = Catalog.characteristicType(uuid: uuid) {
            throw map.error(
                "uuid", .duplicateUUID, "\(uuid) is the standard \(standard.name); list it under 'characteristics'")
        }
        let name = try map.requiredString("name")
        let formatText = try map.requiredString("format")
        guard let format = CharacteristicFormat(rawValue: formatText.lowercased()) else {
            throw map.error(
                "format", .unknownType,
                "unknown format '\(formatText)'; one of \(CharacteristicFormat.allCases.map(\.rawValue).joined(separator: ", "))"
            )
        }
        var metadata = CharacteristicMetadata(format: format, permissions: [.read, .notify])
        metadata = try applyOverrides(map, to: metadata, custom: true)
        var value: CharacteristicValue?
        if let node = map.node("value") {
            value = try parseValue(node, key: map.keyPath("value"), label: name, metadata: metadata)
        }
        if value == nil, metadata.permissions.contains(.read) {
            value = Self.defaultValue(for: metadata, type: uuid, name: name)
        }
        return Characteristic(iid: iid, type: uuid.uppercased(), value: value, metadata: metadata, name: name)
    }
}
