import Foundation

/// Turns HAP's `/accessories` JSON into the model. Shared by the HAP controller (live
/// accessories) and the simulator (imported dumps).
public enum HAPAccessoryJSON {
    /// Parses an array of accessories or `{"accessories": [...]}`.
    ///
    /// Ids are `"\(idPrefix):\(aid)"`. When the dump has more than one accessory and one of them
    /// has aid 1, the others are bridged through it (`bridgeID` = the aid-1 id). `category` is
    /// the accessory's own category (mDNS `ci`) for aid 1; when unknown, aid 1 of a bridge is 2
    /// (bridge) and every other accessory 1 (other).
    public static func parse(_ bytes: [UInt8], idPrefix: String, category: Int? = nil) throws(ModelError) -> [Accessory]
    {
        var problems: [String] = []
        return try parse(json: JSONValue(parsing: bytes), idPrefix: idPrefix, category: category, problems: &problems)
    }

    public static func parse(json: JSONValue, idPrefix: String, category: Int? = nil) throws(ModelError) -> [Accessory]
    {
        var problems: [String] = []
        return try parse(json: json, idPrefix: idPrefix, category: category, problems: &problems)
    }

    /// `problems` gets a line for each value that cannot be read as its format says (the
    /// characteristic is kept, without a value), for the caller to report.
    public static func parse(
        json: JSONValue, idPrefix: String, category: Int? = nil, problems: inout [String]
    ) throws(ModelError) -> [Accessory] {
        let list: [JSONValue]
        if let a = json.arrayValue {
            list = a
        } else if let a = json["accessories"]?.arrayValue {
            list = a
        } else {
            throw ModelError(
                code: .badAccessories, message: "expected an array of accessories or {\"accessories\": [...]}")
        }
        var accessories: [Accessory] = []
        var seen = Set<UInt64>()
        for (index, item) in list.enumerated() {
            let accessory = try parseAccessory(item, index: index, idPrefix: idPrefix, problems: &problems)
            guard seen.insert(accessory.aid).inserted else {
                throw ModelError(code: .badAccessories, message: "accessory aid \(accessory.aid) appears twice")
            }
            accessories.append(accessory)
        }
        let isBridge = accessories.count > 1 && seen.contains(1)
        let bridgeID = "\(idPrefix):1"
        for i in accessories.indices {
            if accessories[i].aid == 1 {
                accessories[i].category = category ?? (isBridge ? 2 : 1)
            } else {
                accessories[i].category = 1
                if isBridge { accessories[i].bridgeID = bridgeID }
            }
        }
        return accessories
    }

    static func parseAccessory(
        _ json: JSONValue, index: Int, idPrefix: String, problems: inout [String]
    ) throws(ModelError) -> Accessory {
        guard case .object = json else {
            throw ModelError(code: .badAccessories, message: "accessory #\(index) is not an object")
        }
        guard let aid = json["aid"]?.uint64Value else {
            throw ModelError(code: .badAccessories, message: "accessory #\(index) has no integer 'aid'")
        }
        guard let servicesJSON = json["services"]?.arrayValue else {
            throw ModelError(code: .badAccessories, message: "accessory \(aid) has no 'services' array")
        }
        var services: [AccessoryService] = []
        for s in servicesJSON {
            services.append(try parseService(s, aid: aid, problems: &problems))
        }
        let info = services.first { $0.type == StandardUUID.accessoryInformation }
        func infoString(_ short: String) -> String? {
            if case .string(let s)? = info?.characteristic(type: StandardUUID.longForm(short))?.value { return s }
            return nil
        }
        return Accessory(
            id: "\(idPrefix):\(aid)",
            aid: aid,
            name: infoString("23") ?? "Accessory \(aid)",
            manufacturer: infoString("20") ?? "",
            model: infoString("21") ?? "",
            serialNumber: infoString("30") ?? "",
            firmwareRevision: infoString("52") ?? "",
            services: services
        )
    }

    static func parseService(_ json: JSONValue, aid: UInt64, problems: inout [String]) throws(ModelError)
        -> AccessoryService
    {
        guard let iid = json["iid"]?.uint64Value else {
            throw ModelError(code: .badAccessories, message: "a service of accessory \(aid) has no integer 'iid'")
        }
        guard let type = json["type"]?.stringValue, !type.isEmpty else {
            throw ModelError(code: .badAccessories, message: "service \(aid).\(iid) has no 'type'")
        }
        guard let chars = json["characteristics"]?.arrayValue else {
            throw ModelError(code: .badAccessories, message: "service \(aid).\(iid) has no 'characteristics' array")
        }
        var characteristics: [Characteristic] = []
        for c in chars {
            characteristics.append(try parseCharacteristic(c, aid: aid, problems: &problems))
        }
        let linked = (json["linked"]?.arrayValue ?? []).compactMap(\.uint64Value)
        var name: String?
        if case .string(let s)? = characteristics.first(where: { $0.type == StandardUUID.name })?.value { name = s }
        return AccessoryService(
            iid: iid,
            type: normalizeType(type),
            name: name,
            isPrimary: json["primary"]?.boolValue ?? false,
            isHidden: json["hidden"]?.boolValue ?? false,
            linkedServices: linked,
            characteristics: characteristics
        )
    }

    static func parseCharacteristic(_ json: JSONValue, aid: UInt64, problems: inout [String]) throws(ModelError)
        -> Characteristic
    {
        guard let iid = json["iid"]?.uint64Value else {
            throw ModelError(
                code: .badAccessories, message: "a characteristic of accessory \(aid) has no integer 'iid'")
        }
        guard let type = json["type"]?.stringValue, !type.isEmpty else {
            throw ModelError(code: .badAccessories, message: "characteristic \(aid).\(iid) has no 'type'")
        }
        let permsJSON = json["perms"]?.arrayValue ?? []
        let permNames = permsJSON.compactMap(\.stringValue)
        // Unknown permission codes from newer accessories are ignored rather than failing
        // the whole accessory; the known ones still govern what we allow.
        var perms: CharacteristicPermissions = []
        for p in permNames {
            if let known = try? CharacteristicPermissions(parsing: [p]) { perms.formUnion(known) }
        }
        let rawValue = json["value"]
        let format: CharacteristicFormat
        if let f = json["format"]?.stringValue {
            guard let known = CharacteristicFormat(rawValue: f.lowercased()) else {
                throw ModelError(
                    code: .badAccessories, message: "characteristic \(aid).\(iid) has unknown format '\(f)'")
            }
            format = known
        } else {
            // Some accessories leave out `format`; the value's JSON type is the best evidence.
            format = inferFormat(rawValue)
        }
        var validValues: [Int64: String] = [:]
        for v in json["valid-values"]?.arrayValue ?? [] {
            if let i = v.int64Value { validValues[i] = String(i) }
        }
        var minValue = json["minValue"]?.doubleValue
        var maxValue = json["maxValue"]?.doubleValue
        if let range = json["valid-values-range"]?.arrayValue, range.count == 2 {
            minValue = minValue ?? range[0].doubleValue
            maxValue = maxValue ?? range[1].doubleValue
        }
        let metadata = CharacteristicMetadata(
            format: format,
            // A vendor characteristic's unit, when it does not say one, is the vendor's.
            unit: json["unit"]?.stringValue ?? VendorCatalog.characteristicType(uuid: normalizeType(type))?.unit,
            minValue: minValue,
            maxValue: maxValue,
            minStep: json["minStep"]?.doubleValue,
            validValues: validValues,
            maxLength: json["maxLen"]?.int64Value.flatMap { Int(exactly: $0) },
            maxDataLength: json["maxDataLen"]?.int64Value.flatMap { Int(exactly: $0) },
            permissions: perms
        )
        // A value that does not fit its format is kept as unknown (nil) rather than failing the
        // accessory, and reported.
        var value: CharacteristicValue?
        if let rawValue {
            do throws(ModelError) {
                value = try convert(rawValue, format: format)
            } catch {
                problems.append("characteristic \(aid).\(iid) (\(normalizeType(type))): \(error.message)")
            }
        }
        return Characteristic(
            iid: iid,
            type: normalizeType(type),
            value: value,
            metadata: metadata,
            name: json["description"]?.stringValue
        )
    }

    /// Long, upper-case, dashed type UUID; some accessories send 32 hex digits without dashes.
    public static func normalizeType(_ type: String) -> String {
        let u = type.uppercased()
        if u.count == 32, u.allSatisfy(\.isHexDigit) {
            let c = Array(u)
            return [c[0..<8], c[8..<12], c[12..<16], c[16..<20], c[20..<32]].map { String($0) }.joined(separator: "-")
        }
        return StandardUUID.longForm(u)
    }

    static func inferFormat(_ value: JSONValue?) -> CharacteristicFormat {
        switch value {
        case .bool?: .bool
        case .int?: .int
        case .uint?: .uint64
        case .double?: .float
        default: .string
        }
    }

    /// Converts a JSON value to the model value of `format`. `null` is nil (no value);
    /// a value that cannot be of the format is an `invalid-value` error.
    public static func convert(_ json: JSONValue, format: CharacteristicFormat) throws(ModelError)
        -> CharacteristicValue?
    {
        if case .null = json { return nil }
        func bad() -> ModelError {
            ModelError(
                code: .invalidValue,
                message: "value \(json.encoded(wholeDoublesAsIntegers: true)) is not a valid \(format.rawValue)")
        }
        switch format {
        case .bool:
            if let b = json.boolValue { return .bool(b) }
            // Many accessories send 0/1 for bool.
            if let i = json.int64Value, i == 0 || i == 1 { return .bool(i == 1) }
            throw bad()
        case .uint8, .uint16, .uint32, .uint64:
            if let b = json.boolValue { return .uint(b ? 1 : 0) }
            guard let u = json.uint64Value, let bounds = format.integerBounds, Double(u) <= bounds.upperBound else {
                throw bad()
            }
            return .uint(u)
        case .int:
            if let b = json.boolValue { return .int(b ? 1 : 0) }
            guard let i = json.int64Value, Int32(exactly: i) != nil else { throw bad() }
            return .int(i)
        case .float:
            guard let d = json.doubleValue else { throw bad() }
            return .float(d)
        case .string:
            guard let s = json.stringValue else { throw bad() }
            return .string(s)
        case .tlv8, .data:
            guard let s = json.stringValue else { throw bad() }
            if s.isEmpty { return .data([]) }
            // HAP sends base64; some accessories (Eve) send lowercase hex. Lowercase hex digits
            // with at least one decimal digit, of even length, are read as hex: base64 of real
            // data is almost never made of those 16 characters alone, and the base64 of zero
            // bytes (`AAAA`) is upper case.
            if let bytes = hexBytes(s) { return .data(bytes) }
            guard let d = Data(base64Encoded: s) else {
                throw ModelError(
                    code: .invalidValue,
                    message:
                        "\(format.rawValue) value '\(s.prefix(24))\(s.count > 24 ? "…" : "")' is neither base64 nor hex"
                )
            }
            return .data(Array(d))
        }
    }

    /// The bytes of a string of lowercase hex digits of even length with a decimal digit among
    /// them, nil for anything else.
    static func hexBytes(_ s: String) -> [UInt8]? {
        let digits = Array(s.utf8)
        guard digits.count >= 2, digits.count % 2 == 0,
            digits.contains(where: { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
        else { return nil }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
            default: nil
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(digits.count / 2)
        for i in stride(from: 0, to: digits.count, by: 2) {
            guard let high = nibble(digits[i]), let low = nibble(digits[i + 1]) else { return nil }
            out.append(high << 4 | low)
        }
        return out
    }

    /// The JSON HAP expects for a model value written to a characteristic of `format`.
    public static func json(for value: CharacteristicValue, format: CharacteristicFormat) -> JSONValue {
        switch (format, value) {
        case (.bool, _): return .bool(value.boolValue ?? false)
        case (.tlv8, .data(let d)), (.data, .data(let d)): return .string(Data(d).base64EncodedString())
        case (_, .bool(let b)): return format.isNumeric ? .int(b ? 1 : 0) : .bool(b)
        case (_, .int(let i)): return .int(i)
        case (_, .uint(let u)): return .uint(u)
        // HAP has no NaN or infinity: a non-finite float is sent as 0.
        case (.float, .float(let f)): return .double(f.isFinite ? f : 0)
        case (_, .float(let f)):
            if format.isInteger, let i = Int64(exactly: f.rounded()) { return .int(i) }
            return .double(f.isFinite ? f : 0)
        case (_, .string(let s)): return .string(s)
        case (_, .data(let d)): return .string(Data(d).base64EncodedString())
        }
    }
}
