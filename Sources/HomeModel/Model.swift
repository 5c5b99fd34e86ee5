import Foundation

// The accessory model every module shares: accessories, services and characteristics, with their
// formats, permissions, values and metadata.

/// The data format of a characteristic value, as HAP and HomeKit name it.
public enum CharacteristicFormat: String, Sendable, Hashable, Codable, CaseIterable {
    case bool, uint8, uint16, uint32, uint64, int, float, string, tlv8, data

    public var isInteger: Bool {
        switch self {
        case .uint8, .uint16, .uint32, .uint64, .int: true
        default: false
        }
    }

    public var isNumeric: Bool { isInteger || self == .float }

    /// The range a value of this format can take at all, before any metadata narrows it.
    public var integerBounds: ClosedRange<Double>? {
        switch self {
        case .uint8: 0...Double(UInt8.max)
        case .uint16: 0...Double(UInt16.max)
        case .uint32: 0...Double(UInt32.max)
        case .uint64: 0...Double(UInt64.max)
        case .int: Double(Int32.min)...Double(Int32.max)
        default: nil
        }
    }
}

/// Permissions of a characteristic (HAP short codes in comments).
public struct CharacteristicPermissions: OptionSet, Sendable, Hashable, Codable {
    public let rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    public static let read = Self(rawValue: 1 << 0) // pr
    public static let write = Self(rawValue: 1 << 1) // pw
    public static let notify = Self(rawValue: 1 << 2) // ev
    public static let hidden = Self(rawValue: 1 << 3) // hd
    public static let timedWrite = Self(rawValue: 1 << 4) // tw
    public static let additionalAuthorization = Self(rawValue: 1 << 5) // aa
    public static let writeResponse = Self(rawValue: 1 << 6) // wr

    /// HAP's short codes, in a stable order.
    public static let codes: [(String, CharacteristicPermissions)] = [
        ("pr", .read), ("pw", .write), ("ev", .notify), ("hd", .hidden),
        ("tw", .timedWrite), ("aa", .additionalAuthorization), ("wr", .writeResponse),
    ]

    /// Long names used in our topics (`meta`) and config files.
    public static let names: [(String, CharacteristicPermissions)] = [
        ("read", .read), ("write", .write), ("notify", .notify), ("hidden", .hidden),
        ("timed-write", .timedWrite), ("additional-authorization", .additionalAuthorization),
        ("write-response", .writeResponse),
    ]

    /// Parses HAP short codes (`pr`, `pw`, `ev`, …) or long names; unknown ones are returned.
    public init(parsing items: [String]) throws(ModelError) {
        var result: CharacteristicPermissions = []
        for item in items {
            let key = item.lowercased()
            if let hit = Self.codes.first(where: { $0.0 == key }) ?? Self.names.first(where: { $0.0 == key }) {
                result.insert(hit.1)
            } else {
                throw ModelError(
                    code: .unknownPermission,
                    message:
                        "unknown permission '\(item)'; allowed: \(Self.names.map(\.0).joined(separator: ", ")) or HAP codes \(Self.codes.map(\.0).joined(separator: ", "))"
                )
            }
        }
        self = result
    }

    public var codeList: [String] { Self.codes.filter { contains($0.1) }.map(\.0) }
    public var nameList: [String] { Self.names.filter { contains($0.1) }.map(\.0) }
}

/// A characteristic value. Integers of every width are held as `int` (signed formats) or `uint`.
public enum CharacteristicValue: Sendable, Hashable {
    case bool(Bool)
    case int(Int64)
    case uint(UInt64)
    case float(Double)
    case string(String)
    /// tlv8 and data formats: raw bytes, base64 on the wire.
    case data([UInt8])

    public var doubleValue: Double? {
        switch self {
        case .bool(let b): b ? 1 : 0
        case .int(let i): Double(i)
        case .uint(let u): Double(u)
        case .float(let f): f
        default: nil
        }
    }

    public var boolValue: Bool? {
        switch self {
        case .bool(let b): b
        case .int(let i): i != 0
        case .uint(let u): u != 0
        case .float(let f): f != 0
        default: nil
        }
    }
}

/// Metadata that tells what values a characteristic accepts.
///
/// A value type whose fields live in one shared, copy-on-write box: every brightness of every
/// lamp of one kind has the same metadata, and a home of 250,000 characteristics would otherwise
/// hold a hundred-byte copy of it in each (and again in each topic-tree node). Builders start
/// from the catalog's metadata, so unchanged characteristics share the catalog's box. The fields
/// read and write as properties of the metadata itself (`metadata.format`).
@dynamicMemberLookup
public struct CharacteristicMetadata: Sendable, Hashable {
    public struct Fields: Sendable, Hashable {
        public var format: CharacteristicFormat
        public var unit: String?
        public var minValue: Double?
        public var maxValue: Double?
        public var minStep: Double?
        /// Valid values with their kebab-case names (`0: "open"`). Empty means any value in range.
        public var validValues: [Int64: String]
        public var maxLength: Int?
        public var maxDataLength: Int?
        public var permissions: CharacteristicPermissions
    }

    @usableFromInline
    final class Box: @unchecked Sendable {
        // Changed only while uniquely referenced (see the subscript), so sharing it is safe.
        @usableFromInline var fields: Fields
        @usableFromInline init(_ fields: Fields) { self.fields = fields }
    }

    @usableFromInline var box: Box

    @inlinable
    public subscript<T>(dynamicMember keyPath: WritableKeyPath<Fields, T>) -> T {
        get { box.fields[keyPath: keyPath] }
        set {
            if !isKnownUniquelyReferenced(&box) { box = Box(box.fields) }
            box.fields[keyPath: keyPath] = newValue
        }
    }

    public init(
        format: CharacteristicFormat,
        unit: String? = nil,
        minValue: Double? = nil,
        maxValue: Double? = nil,
        minStep: Double? = nil,
        validValues: [Int64: String] = [:],
        maxLength: Int? = nil,
        maxDataLength: Int? = nil,
        permissions: CharacteristicPermissions
    ) {
        box = Box(
            Fields(
                format: format, unit: unit, minValue: minValue, maxValue: maxValue, minStep: minStep,
                validValues: validValues, maxLength: maxLength, maxDataLength: maxDataLength,
                permissions: permissions))
    }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.box === rhs.box || lhs.box.fields == rhs.box.fields
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(box.fields)
    }
}

/// Where a characteristic lives: the accessory's stable identifier and the characteristic's
/// instance id (HAP's `iid`, unique within the accessory).
public struct CharacteristicAddress: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var accessoryID: String
    public var iid: UInt64

    public init(accessoryID: String, iid: UInt64) {
        self.accessoryID = accessoryID
        self.iid = iid
    }

    public static func < (lhs: Self, rhs: Self) -> Bool {
        (lhs.accessoryID, lhs.iid) < (rhs.accessoryID, rhs.iid)
    }

    public var description: String { "\(accessoryID).\(iid)" }
}

public struct Characteristic: Sendable, Hashable {
    public var iid: UInt64
    /// The type UUID in long, upper-case form (`00000025-0000-1000-8000-0026BB765291`).
    public var type: String
    public var value: CharacteristicValue?
    public var metadata: CharacteristicMetadata
    /// The accessory's own description (HAP `description`) or a custom characteristic's name.
    public var name: String?

    public init(
        iid: UInt64, type: String, value: CharacteristicValue?, metadata: CharacteristicMetadata, name: String? = nil
    ) {
        self.iid = iid
        self.type = type
        self.value = value
        self.metadata = metadata
        self.name = name
    }
}

extension Characteristic {
    /// A button's press (`input-event`): an event, never a state to keep or replay.
    public var isEvent: Bool { type == StandardUUID.programmableSwitchEvent }
}

public struct AccessoryService: Sendable, Hashable {
    public var iid: UInt64
    /// The type UUID in long, upper-case form.
    public var type: String
    /// The accessory's own name for the service (its Name characteristic), if it has one.
    public var name: String?
    public var isPrimary: Bool
    public var isHidden: Bool
    public var linkedServices: [UInt64]
    public var characteristics: [Characteristic]

    public init(
        iid: UInt64, type: String, name: String? = nil, isPrimary: Bool = false, isHidden: Bool = false,
        linkedServices: [UInt64] = [], characteristics: [Characteristic]
    ) {
        self.iid = iid
        self.type = type
        self.name = name
        self.isPrimary = isPrimary
        self.isHidden = isHidden
        self.linkedServices = linkedServices
        self.characteristics = characteristics
    }

    /// HomeKit's rule: hidden services and the accessory-information and protocol-information
    /// services are not user-interactive; nor are Bluetooth GATT services, which are no HAP
    /// services at all.
    public var isUserInteractive: Bool {
        !isHidden && !StandardUUID.nonInteractiveServices.contains(type)
            && !type.uppercased().hasSuffix(StandardUUID.bluetoothBaseSuffix)
    }

    public func characteristic(iid: UInt64) -> Characteristic? {
        characteristics.first { $0.iid == iid }
    }

    public func characteristic(type: String) -> Characteristic? {
        characteristics.first { $0.type == type }
    }
}

public struct Accessory: Sendable, Hashable, Identifiable {
    /// Stable identifier, unique across all sources (the simulator: from its file; HAP: the
    /// accessory's pairing id and aid).
    public var id: String
    /// HAP accessory instance id (1 for a standalone accessory or a bridge itself).
    public var aid: UInt64
    public var name: String
    public var manufacturer: String
    public var model: String
    public var serialNumber: String
    public var firmwareRevision: String
    /// HAP accessory category (1–33); 1 is Other.
    public var category: Int
    public var isReachable: Bool
    /// The `id` of the bridge this accessory is bridged through, if any.
    public var bridgeID: String?
    public var services: [AccessoryService]
    /// A room the source suggests (a simulator file's `room:`); the home database decides.
    public var suggestedRoom: String?
    /// Served to HomeKit on its own (a simulator file's `homekit: standalone`): its own HAP
    /// accessory server, pairing id and setup code, and not on the home's bridge.
    public var isHomeKitStandalone = false
    /// Served alone as a HAP-over-Thread accessory (a simulator file's `homekit: thread`): also
    /// `isHomeKitStandalone` (its own pairing, not on the bridge), over CoAP/UDP instead of TCP.
    public var isHomeKitThread = false

    public init(
        id: String, aid: UInt64 = 1, name: String, manufacturer: String = "", model: String = "",
        serialNumber: String = "", firmwareRevision: String = "", category: Int = 1,
        isReachable: Bool = true, bridgeID: String? = nil, services: [AccessoryService], suggestedRoom: String? = nil
    ) {
        self.id = id
        self.aid = aid
        self.name = name
        self.manufacturer = manufacturer
        self.model = model
        self.serialNumber = serialNumber
        self.firmwareRevision = firmwareRevision
        self.category = category
        self.isReachable = isReachable
        self.bridgeID = bridgeID
        self.services = services
        self.suggestedRoom = suggestedRoom
    }

    public var isBridged: Bool { bridgeID != nil }

    public func characteristic(iid: UInt64) -> (AccessoryService, Characteristic)? {
        for service in services {
            if let c = service.characteristic(iid: iid) { return (service, c) }
        }
        return nil
    }
}

/// A typed error from the model layer: a machine code and a message for people.
public struct ModelError: Error, Sendable, Hashable, CustomStringConvertible {
    public typealias Code = ErrorCode
    public var code: Code
    public var message: String

    public init(code: Code, message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}

/// UUIDs the model itself needs to know.
public enum StandardUUID {
    public static let accessoryInformation = longForm("3E")
    public static let protocolInformation = longForm("A2")
    public static let name = longForm("23")
    /// A button press (input-event): an event, not a state. Each report is one press, the same
    /// value twice is two presses, and reading it gives nothing that lasts.
    public static let programmableSwitchEvent = longForm("73")
    /// Services that exist for the protocol, not for people: accessory information, protocol
    /// information, pairing, and the transports, runtime information, metrics, diagnostics,
    /// firmware and asset updates, relays and bridge configuration that Home never shows.
    public static let nonInteractiveServices: Set<String> = Set(
        [
            "3E", "A2", "55", "701", "22A", "239", "129", "203", "270", "237", "236", "267", "5A", "A1", "99",
        ].map(longForm))

    /// Apple's base UUID suffix for short-form HAP types.
    public static let baseSuffix = "-0000-1000-8000-0026BB765291"

    /// Long, upper-case form of a short (`25`) or long UUID.
    public static func longForm(_ uuid: String) -> String {
        // Most callers pass a long form that is upper-case already (the catalog's, a loaded
        // accessory's types): it is its own long form, without the copy `uppercased()` makes.
        // Building the topic tree of 10,000 accessories looked up 500,000 of them.
        if uuid.utf8.count == 36, uuid.utf8.allSatisfy({ $0 < 0x80 && !($0 >= 0x61 && $0 <= 0x7A) }) { return uuid }
        let u = uuid.uppercased()
        if u.count <= 8, u.allSatisfy(\.isHexDigit) {
            return String(repeating: "0", count: 8 - u.count) + u + baseSuffix
        }
        return u
    }

    /// Short form (`25`) of an Apple-defined UUID, or nil for a custom one.
    public static func shortForm(_ uuid: String) -> String? {
        let u = uuid.uppercased()
        guard u.hasSuffix(baseSuffix), u.count == 36 else { return nil }
        let head = u.prefix(8).drop { $0 == "0" }
        return head.isEmpty ? "0" : String(head)
    }

    /// The Bluetooth SIG's base UUID suffix: BLE GATT services (`00001801-…`, Generic Attribute)
    /// that some accessories list beside their HAP services.
    public static let bluetoothBaseSuffix = "-0000-1000-8000-00805F9B34FB"

    /// The 4-digit short form (`1801`, lowercase) of a Bluetooth SIG UUID, nil for any other.
    public static func bluetoothShortForm(_ uuid: String) -> String? {
        let u = uuid.uppercased()
        guard u.hasSuffix(bluetoothBaseSuffix), u.count == 36, u.hasPrefix("0000") else { return nil }
        return String(u.dropFirst(4).prefix(4)).lowercased()
    }
}
