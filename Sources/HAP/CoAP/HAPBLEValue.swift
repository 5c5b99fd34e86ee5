public import HomeModel

// Characteristic values and their descriptions as HAP-BLE (and so HAP over CoAP) writes them:
// little-endian numbers of the format's width, strings as UTF-8, tlv8 and data as raw bytes;
// formats and units as the GATT presentation-format codes.

public enum HAPBLEFormat {
    /// GATT presentation-format code of each HAP format. HAP-BLE has no code of its own for
    /// tlv8: it is 0x1B (opaque structure), as data is.
    public static func code(_ format: CharacteristicFormat) -> UInt8 {
        switch format {
        case .bool: 0x01
        case .uint8: 0x04
        case .uint16: 0x06
        case .uint32: 0x08
        case .uint64: 0x0A
        case .int: 0x10
        case .float: 0x14
        case .string: 0x19
        case .tlv8, .data: 0x1B
        }
    }

    /// The format of a code, nil for a code HAP does not use. 0x1B reads as data.
    public static func format(code: UInt8) -> CharacteristicFormat? {
        switch code {
        case 0x01: .bool
        case 0x04: .uint8
        case 0x06: .uint16
        case 0x08: .uint32
        case 0x0A: .uint64
        case 0x10: .int
        case 0x14: .float
        case 0x19: .string
        case 0x1B: .data
        default: nil
        }
    }

    /// GATT unit codes of HAP's units (unitless, 0x2700, is no unit).
    public static let units: [(code: UInt16, name: String)] = [
        (0x272F, "celsius"), (0x2763, "arcdegrees"), (0x27AD, "percentage"), (0x2731, "lux"), (0x2703, "seconds"),
    ]
    public static let unitless: UInt16 = 0x2700

    public static func unit(code: UInt16) -> String? { units.first { $0.code == code }?.name }
    public static func code(unit: String?) -> UInt16 {
        guard let unit else { return unitless }
        return units.first { $0.name == unit }?.code ?? unitless
    }

    /// The 7-byte presentation format: format, exponent 0, unit (u16 LE), namespace 1
    /// (Bluetooth SIG), description 0.
    public static func presentationFormat(_ format: CharacteristicFormat, unit: String?) -> [UInt8] {
        let u = code(unit: unit)
        return [code(format), 0, UInt8(u & 0xFF), UInt8(u >> 8), 1, 0, 0]
    }
}

/// A value's bytes by format, both ways.
public enum HAPBLEValue {
    /// Width in bytes of a fixed-size format; nil for string, tlv8 and data.
    public static func width(_ format: CharacteristicFormat) -> Int? {
        switch format {
        case .bool, .uint8: 1
        case .uint16: 2
        case .uint32, .int, .float: 4
        case .uint64: 8
        case .string, .tlv8, .data: nil
        }
    }

    public static func decode(_ bytes: [UInt8], format: CharacteristicFormat) throws(CoAPCodecError)
        -> CharacteristicValue
    {
        if let w = width(format), bytes.count != w {
            throw .badValue("a \(format.rawValue) value is \(w) bytes, not \(bytes.count)")
        }
        switch format {
        case .bool: return .bool(bytes[0] != 0)
        case .uint8, .uint16, .uint32, .uint64: return .uint(littleEndian(bytes))
        case .int: return .int(Int64(Int32(bitPattern: UInt32(littleEndian(bytes)))))
        case .float: return .float(Double(Float(bitPattern: UInt32(littleEndian(bytes)))))
        case .string:
            guard let s = String(validating: bytes, as: UTF8.self) else {
                throw .badValue("a string value is not UTF-8")
            }
            return .string(s)
        case .tlv8, .data: return .data(bytes)
        }
    }

    /// The bytes of `value` as `format` writes it; a value that cannot be of the format (out
    /// of range, a string for a number) is an error, never wrapped or cut.
    public static func encode(_ value: CharacteristicValue, format: CharacteristicFormat) throws(CoAPCodecError)
        -> [UInt8]
    {
        func bad() -> CoAPCodecError { .badValue("\(value) is not a valid \(format.rawValue)") }
        switch format {
        case .bool:
            guard let b = value.boolValue else { throw bad() }
            return [b ? 1 : 0]
        case .uint8, .uint16, .uint32, .uint64:
            let u: UInt64
            switch value {
            case .bool(let b): u = b ? 1 : 0
            case .uint(let x): u = x
            case .int(let x):
                guard let x = UInt64(exactly: x) else { throw bad() }
                u = x
            case .float(let f):
                guard let x = UInt64(exactly: f.rounded()) else { throw bad() }
                u = x
            default: throw bad()
            }
            let w = width(format)!
            guard w == 8 || u < UInt64(1) << (8 * w) else { throw bad() }
            return bytesLE(u, width: w)
        case .int:
            let i: Int64
            switch value {
            case .bool(let b): i = b ? 1 : 0
            case .int(let x): i = x
            case .uint(let x):
                guard let x = Int64(exactly: x) else { throw bad() }
                i = x
            case .float(let f):
                guard let x = Int64(exactly: f.rounded()) else { throw bad() }
                i = x
            default: throw bad()
            }
            guard let i32 = Int32(exactly: i) else { throw bad() }
            return bytesLE(UInt64(UInt32(bitPattern: i32)), width: 4)
        case .float:
            guard let d = value.doubleValue, d.isFinite else { throw bad() }
            return bytesLE(UInt64(Float(d).bitPattern), width: 4)
        case .string:
            guard case .string(let s) = value else { throw bad() }
            return Array(s.utf8)
        case .tlv8, .data:
            guard case .data(let d) = value else { throw bad() }
            return d
        }
    }

    static func littleEndian(_ bytes: some Collection<UInt8>) -> UInt64 {
        var v: UInt64 = 0
        for (i, b) in bytes.enumerated() { v |= UInt64(b) << (8 * UInt64(i)) }
        return v
    }

    static func bytesLE(_ v: UInt64, width: Int) -> [UInt8] {
        (0..<width).map { UInt8(truncatingIfNeeded: v >> (8 * $0)) }
    }
}
