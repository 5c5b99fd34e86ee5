public import HomeModel

// The attribute database and the gateway's model, both ways. Reading goes through the same
// `/accessories` JSON the IP controller gets from an accessory, and the same parser
// (`HAPAccessoryJSON`), so an accessory is the same model whichever transport it came over.
//
// What HAP-BLE's signature cannot say, and so a model does not keep through a database: values
// (read separately, opcode 0x03; `values` puts them in), maxLen/maxDataLen, the `wr`
// permission (a write asks for its answer with the return-response parameter instead), tlv8
// apart from data (both 0x1B; a standard type the catalog calls tlv8 reads as tlv8), a range
// with only one end, units other than HAP's five, and services' names (a value of Name).

extension ThreadAttributeDatabase.Characteristic {
    /// HAP-BLE property bits by HAP permission, as aiohomekit reads them: the secure read and
    /// write bits are `pr`/`pw` (plain 0x0001/0x0002 are the pairing characteristics' own,
    /// outside the session), events in the connected state are `ev`.
    static let permissionBits: [(CharacteristicPermissions, UInt16)] = [
        (.read, 0x0010), (.write, 0x0020), (.notify, 0x0080), (.additionalAuthorization, 0x0004),
        (.timedWrite, 0x0008), (.hidden, 0x0040),
    ]

    public var permissions: CharacteristicPermissions {
        var p: CharacteristicPermissions = []
        for (perm, bit) in Self.permissionBits where properties & bit != 0 { p.insert(perm) }
        return p
    }

    /// The HAP format, nil for a code HAP does not use (the JSON then leaves `format` out).
    public var format: CharacteristicFormat? {
        guard let code = presentationFormat?.first, let f = HAPBLEFormat.format(code: code) else { return nil }
        if f == .data, Catalog.characteristicType(uuid: type)?.metadata.format == .tlv8 { return .tlv8 }
        return f
    }

    /// HAP's unit name, nil for unitless or a unit HAP does not name.
    public var unit: String? {
        guard let p = presentationFormat, p.count == 7 else { return nil }
        return HAPBLEFormat.unit(code: UInt16(p[2]) | UInt16(p[3]) << 8)
    }

    /// Minimum and maximum of a numeric format; nil without a range or for other formats.
    public func range() throws(CoAPCodecError) -> (min: CharacteristicValue, max: CharacteristicValue)? {
        guard let r = validRange, let f = format, f.isNumeric, let w = HAPBLEValue.width(f) else { return nil }
        guard r.count == 2 * w else {
            throw .badTLV("characteristic \(iid): a \(f.rawValue) range of \(r.count) bytes, not \(2 * w)")
        }
        return (try HAPBLEValue.decode(Array(r[0..<w]), format: f), try HAPBLEValue.decode(Array(r[w...]), format: f))
    }

    public func minStep() throws(CoAPCodecError) -> CharacteristicValue? {
        guard let s = step, let f = format, f.isNumeric else { return nil }
        return try HAPBLEValue.decode(s, format: f)
    }

    /// `/accessories` JSON of the characteristic, with `value` when given.
    func json(value: [UInt8]?, problems: inout [String]) throws(CoAPCodecError) -> JSONValue {
        var o: [String: JSONValue] = [
            "iid": .int(Int64(iid)), "type": .string(type),
            "perms": .array(
                CharacteristicPermissions.codes.filter { permissions.contains($0.1) }.map { .string($0.0) }),
        ]
        let f = format
        if let f { o["format"] = .string(f.rawValue) }
        if let unit { o["unit"] = .string(unit) }
        if let f, let (lo, hi) = try range() {
            o["minValue"] = HAPAccessoryJSON.json(for: lo, format: f)
            o["maxValue"] = HAPAccessoryJSON.json(for: hi, format: f)
        }
        if let f, let s = try minStep() { o["minStep"] = HAPAccessoryJSON.json(for: s, format: f) }
        if let v = validValues { o["valid-values"] = .array(v.map { .int(Int64($0)) }) }
        if let r = validValuesRanges {
            guard r.count >= 2, r.count % 2 == 0 else {
                throw .badTLV("characteristic \(iid): valid-value ranges of \(r.count) bytes, not pairs")
            }
            o["valid-values-range"] = .array([.int(Int64(r[0])), .int(Int64(r[1]))])
        }
        if let userDescription { o["description"] = .string(userDescription) }
        if let value, let f {
            do throws(CoAPCodecError) {
                o["value"] = HAPAccessoryJSON.json(for: try HAPBLEValue.decode(value, format: f), format: f)
            } catch {
                problems.append("characteristic \(iid) (\(type)): \(error.description)")
            }
        }
        return .object(o)
    }

    /// The signature of a model characteristic.
    init(_ c: HomeModel.Characteristic) throws(CoAPCodecError) {
        guard let iid = UInt16(exactly: c.iid) else { throw .badValue("characteristic iid \(c.iid) is over 65535") }
        let type = HAPAccessoryJSON.normalizeType(c.type)
        guard StandardUUID.shortForm(type) != nil || [UInt8](hex: type.filter { $0 != "-" })?.count == 16 else {
            throw .badValue("characteristic \(c.iid): type '\(c.type)' is not a UUID")
        }
        var properties: UInt16 = 0
        for (perm, bit) in Self.permissionBits where c.metadata.permissions.contains(perm) { properties |= bit }
        // Devices that notify also say so for the disconnected state (0x0100).
        if c.metadata.permissions.contains(.notify) { properties |= 0x0100 }
        let f = c.metadata.format
        self.init(
            type: type, iid: iid, properties: properties, userDescription: c.name,
            presentationFormat: HAPBLEFormat.presentationFormat(f, unit: c.metadata.unit))
        if f.isNumeric, let lo = c.metadata.minValue, let hi = c.metadata.maxValue {
            validRange = try HAPBLEValue.encode(.float(lo), format: f) + HAPBLEValue.encode(.float(hi), format: f)
        }
        if f.isNumeric, let s = c.metadata.minStep { step = try HAPBLEValue.encode(.float(s), format: f) }
        if !c.metadata.validValues.isEmpty {
            validValues = try c.metadata.validValues.keys.sorted().map { (v) throws(CoAPCodecError) in
                guard let b = UInt8(exactly: v) else { throw .badValue("characteristic \(c.iid): valid value \(v)") }
                return b
            }
        }
    }
}

extension ThreadAttributeDatabase {
    /// The `/accessories` JSON (an array of accessories) of the tree. `value(aid, iid)` gives a
    /// characteristic's value bytes as a read returned them; one that does not fit its format
    /// is left out and described in `problems`, as the IP parser does.
    public func accessoriesJSON(
        problems: inout [String], value: (_ aid: UInt16, _ iid: UInt16) -> [UInt8]? = { _, _ in nil }
    ) throws(CoAPCodecError) -> JSONValue {
        var list: [JSONValue] = []
        for a in accessories {
            var services: [JSONValue] = []
            for s in a.services {
                var chars: [JSONValue] = []
                for c in s.characteristics { chars.append(try c.json(value: value(a.aid, c.iid), problems: &problems)) }
                var o: [String: JSONValue] = [
                    "iid": .int(Int64(s.iid)), "type": .string(s.type), "characteristics": .array(chars),
                ]
                let p = s.properties ?? 0
                if p & 0x0001 != 0 { o["primary"] = .bool(true) }
                if p & 0x0002 != 0 { o["hidden"] = .bool(true) }
                if let l = s.linkedServices, !l.isEmpty { o["linked"] = .array(l.map { .int(Int64($0)) }) }
                services.append(.object(o))
            }
            list.append(.object(["aid": .int(Int64(a.aid)), "services": .array(services)]))
        }
        return .array(list)
    }

    /// The model of the tree, through `HAPAccessoryJSON` as the IP controller's is (ids
    /// `idPrefix:aid`, `category` for aid 1).
    public func accessories(
        idPrefix: String, category: Int? = nil, problems: inout [String],
        value: (_ aid: UInt16, _ iid: UInt16) -> [UInt8]? = { _, _ in nil }
    ) throws(CoAPCodecError) -> [HomeModel.Accessory] {
        let json = try accessoriesJSON(problems: &problems, value: value)
        do {
            return try HAPAccessoryJSON.parse(json: json, idPrefix: idPrefix, category: category, problems: &problems)
        } catch {
            throw .badTLV("the attribute database does not describe accessories: \(error.message)")
        }
    }

    /// The tree of a model, as a Thread accessory serves it (iids and aids must fit a u16).
    public init(_ model: [HomeModel.Accessory]) throws(CoAPCodecError) {
        var list: [Accessory] = []
        for a in model {
            guard let aid = UInt16(exactly: a.aid) else { throw .badValue("accessory aid \(a.aid) is over 65535") }
            var services: [Service] = []
            for s in a.services {
                guard let iid = UInt16(exactly: s.iid) else { throw .badValue("service iid \(s.iid) is over 65535") }
                var linked: [UInt16] = []
                for l in s.linkedServices {
                    guard let v = UInt16(exactly: l) else { throw .badValue("linked service iid \(l) is over 65535") }
                    linked.append(v)
                }
                let properties: UInt16 = (s.isPrimary ? 0x0001 : 0) | (s.isHidden ? 0x0002 : 0)
                var chars: [Characteristic] = []
                for c in s.characteristics { chars.append(try Characteristic(c)) }
                services.append(
                    Service(
                        type: HAPAccessoryJSON.normalizeType(s.type), iid: iid,
                        properties: properties == 0 ? nil : properties, linkedServices: linked,
                        characteristics: chars))
            }
            list.append(Accessory(aid: aid, services: services))
        }
        self.init(accessories: list)
    }
}
