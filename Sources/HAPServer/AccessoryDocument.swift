import HomeModel

// The accessory tree as HAP's JSON (`/accessories`, the metadata of `/characteristics`), and
// the checks a written value passes before the database sees it.

/// The characteristics of the tree by address, for the checks of reads and writes.
struct CharacteristicIndex: Sendable {
    private(set) var characteristics: [HAPCharacteristicID: HAPCharacteristic] = [:]

    init(_ accessories: [HAPAccessory]) {
        for accessory in accessories {
            for service in accessory.services {
                for c in service.characteristics {
                    characteristics[HAPCharacteristicID(aid: accessory.aid, iid: c.iid)] = c
                }
            }
        }
    }

    subscript(id: HAPCharacteristicID) -> HAPCharacteristic? { characteristics[id] }

    /// A digest of the tree's shape (not its values): `c#` changes when it does.
    static func shapeDigest(_ accessories: [HAPAccessory]) -> String {
        var stripped = accessories
        for a in stripped.indices {
            for s in stripped[a].services.indices {
                for c in stripped[a].services[s].characteristics.indices {
                    stripped[a].services[s].characteristics[c].value = nil
                }
            }
        }
        let text = AccessoryDocument.json(stripped).encodedUTF8()
        return HAPServerDigest.sha256Hex(text)
    }
}

enum AccessoryDocument {
    static func json(_ accessories: [HAPAccessory]) -> JSONValue {
        .object([
            "accessories": .array(
                accessories.map { accessory in
                    .object([
                        "aid": .int(Int64(accessory.aid)),
                        "services": .array(accessory.services.map { service(accessory.aid, $0) }),
                    ])
                })
        ])
    }

    static func service(_ aid: Int, _ s: HAPService) -> JSONValue {
        var o: [String: JSONValue] = [
            "iid": .int(Int64(s.iid)), "type": .string(s.type),
            "characteristics": .array(
                s.characteristics.map { c in
                    var fields = meta(c)
                    fields["iid"] = .int(Int64(c.iid))
                    fields["type"] = .string(c.type)
                    fields["perms"] = .array(c.permissions.names.map(JSONValue.string))
                    // A value only for what a controller may read (HAP spec 6.3.3).
                    if c.permissions.contains(.read) { fields["value"] = c.value ?? .null }
                    return .object(fields)
                }),
        ]
        if s.isPrimary { o["primary"] = .bool(true) }
        if s.isHidden { o["hidden"] = .bool(true) }
        if !s.linked.isEmpty { o["linked"] = .array(s.linked.map { .int(Int64($0)) }) }
        return .object(o)
    }

    /// `format`, `unit`, the range and `description`: the fields `meta=1` adds to a read.
    static func meta(_ c: HAPCharacteristic) -> [String: JSONValue] {
        var o: [String: JSONValue] = ["format": .string(c.format.rawValue)]
        if let unit = c.unit { o["unit"] = .string(unit) }
        if let v = c.minValue { o["minValue"] = number(v, c.format) }
        if let v = c.maxValue { o["maxValue"] = number(v, c.format) }
        if let v = c.minStep { o["minStep"] = number(v, c.format) }
        if let n = c.maxLength { o["maxLen"] = .int(Int64(n)) }
        if let values = c.validValues { o["valid-values"] = .array(values.map { .int(Int64($0)) }) }
        if let d = c.description { o["description"] = .string(d) }
        return o
    }

    /// Integers for the integer formats, so that `maxValue` of a uint8 reads `100`.
    static func number(_ v: Double, _ format: HAPFormat) -> JSONValue {
        if format != .float, let i = Int64(exactly: v.rounded()) { return .int(i) }
        return .double(v)
    }
}

/// The value a controller wrote, checked against the characteristic's format and range and put
/// in the form the database gets (bools as `.bool`, integers as `.int`).
enum ValueCheck {
    static func check(_ value: JSONValue, for c: HAPCharacteristic) -> Result<JSONValue, HAPStatus> {
        switch c.format {
        case .bool:
            switch value {
            case .bool: return .success(value)
            // Controllers write 0/1 for bools as often as false/true.
            case .int(0): return .success(.bool(false))
            case .int(1): return .success(.bool(true))
            default: return .failure(.invalidValue)
            }
        case .uint8, .uint16, .uint32, .uint64, .int:
            let n: Int64
            switch value {
            case .int(let i): n = i
            case .double(let d) where d.rounded() == d && abs(d) < 9e18: n = Int64(d)
            case .bool(let b): n = b ? 1 : 0
            default: return .failure(.invalidValue)
            }
            guard formatRange(c.format).contains(n) else { return .failure(.invalidValue) }
            if let min = c.minValue, Double(n) < min { return .failure(.invalidValue) }
            if let max = c.maxValue, Double(n) > max { return .failure(.invalidValue) }
            if let valid = c.validValues, !valid.contains(Int(n)) { return .failure(.invalidValue) }
            return .success(.int(n))
        case .float:
            guard let d = value.doubleValue, d.isFinite else { return .failure(.invalidValue) }
            if let min = c.minValue, d < min { return .failure(.invalidValue) }
            if let max = c.maxValue, d > max { return .failure(.invalidValue) }
            return .success(.double(d))
        case .string:
            guard case .string(let s) = value, s.utf8.count <= (c.maxLength ?? 64) else {
                return .failure(.invalidValue)
            }
            return .success(value)
        case .tlv8, .data:
            guard case .string = value else { return .failure(.invalidValue) }
            return .success(value)
        }
    }

    static func formatRange(_ format: HAPFormat) -> ClosedRange<Int64> {
        switch format {
        case .uint8: 0...Int64(UInt8.max)
        case .uint16: 0...Int64(UInt16.max)
        case .uint32: 0...Int64(UInt32.max)
        case .int: Int64(Int32.min)...Int64(Int32.max)
        default: 0...Int64.max
        }
    }
}
