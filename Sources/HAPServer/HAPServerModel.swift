public import HomeModel

// What the accessory server serves: accessories, services and characteristics as HAP describes
// them in `/accessories`, and the status codes a read or write answers with.

/// A characteristic's address: the accessory's `aid` and the characteristic's `iid`.
public struct HAPCharacteristicID: Hashable, Sendable, Comparable, CustomStringConvertible {
    public var aid: Int
    public var iid: Int

    public init(aid: Int, iid: Int) {
        self.aid = aid
        self.iid = iid
    }

    public static func < (a: Self, b: Self) -> Bool { (a.aid, a.iid) < (b.aid, b.iid) }
    public var description: String { "\(aid).\(iid)" }
}

/// A HAP status code (HAP spec table 6-11); `0` is success.
public struct HAPStatus: Error, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: Int
    public init(_ rawValue: Int) { self.rawValue = rawValue }

    public static let success = HAPStatus(0)
    public static let insufficientPrivileges = HAPStatus(-70401)
    /// The accessory behind the bridge cannot be reached.
    public static let communicationFailure = HAPStatus(-70402)
    public static let busy = HAPStatus(-70403)
    public static let readOnly = HAPStatus(-70404)
    public static let writeOnly = HAPStatus(-70405)
    public static let notificationNotSupported = HAPStatus(-70406)
    public static let outOfResources = HAPStatus(-70407)
    public static let timedOut = HAPStatus(-70408)
    /// No such accessory or characteristic (also a malformed id).
    public static let doesNotExist = HAPStatus(-70409)
    public static let invalidValue = HAPStatus(-70410)
    public static let insufficientAuthorization = HAPStatus(-70411)

    public var description: String { String(rawValue) }
}

/// A characteristic's value format (HAP spec table 6-5).
public enum HAPFormat: String, Sendable, Hashable, CaseIterable {
    case bool, uint8, uint16, uint32, uint64, int, float, string, tlv8, data
}

/// A characteristic's permissions, written in `/accessories` as `pr`, `pw`, `ev`, …
public struct HAPPermissions: OptionSet, Sendable, Hashable {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Paired read.
    public static let read = HAPPermissions(rawValue: 1 << 0)
    /// Paired write.
    public static let write = HAPPermissions(rawValue: 1 << 1)
    /// Notifications (events).
    public static let events = HAPPermissions(rawValue: 1 << 2)
    /// Additional authorization.
    public static let additionalAuthorization = HAPPermissions(rawValue: 1 << 3)
    /// Writes must be timed (`/prepare` first).
    public static let timedWrite = HAPPermissions(rawValue: 1 << 4)
    public static let hidden = HAPPermissions(rawValue: 1 << 5)
    /// Write response: a write may ask for a value back (`r`).
    public static let writeResponse = HAPPermissions(rawValue: 1 << 6)

    static let names: [(HAPPermissions, String)] = [
        (.read, "pr"), (.write, "pw"), (.events, "ev"), (.additionalAuthorization, "aa"), (.timedWrite, "tw"),
        (.hidden, "hd"), (.writeResponse, "wr"),
    ]

    /// The permissions as `/accessories` lists them.
    public var names: [String] { Self.names.filter { contains($0.0) }.map(\.1) }
}

/// One characteristic: its metadata, and the value last known (for `/accessories`; a read of
/// `/characteristics` asks the database afresh).
public struct HAPCharacteristic: Sendable, Hashable {
    public var iid: Int
    /// A UUID, or the short form of an Apple-defined type (`25` for On).
    public var type: String
    public var format: HAPFormat
    public var permissions: HAPPermissions
    public var unit: String?
    public var minValue: Double?
    public var maxValue: Double?
    public var minStep: Double?
    /// For strings; HAP's default is 64.
    public var maxLength: Int?
    public var validValues: [Int]?
    public var description: String?
    public var value: JSONValue?

    public init(
        iid: Int, type: String, format: HAPFormat, permissions: HAPPermissions, unit: String? = nil,
        minValue: Double? = nil, maxValue: Double? = nil, minStep: Double? = nil, maxLength: Int? = nil,
        validValues: [Int]? = nil, description: String? = nil, value: JSONValue? = nil
    ) {
        self.iid = iid
        self.type = type
        self.format = format
        self.permissions = permissions
        self.unit = unit
        self.minValue = minValue
        self.maxValue = maxValue
        self.minStep = minStep
        self.maxLength = maxLength
        self.validValues = validValues
        self.description = description
        self.value = value
    }
}

public struct HAPService: Sendable, Hashable {
    public var iid: Int
    public var type: String
    public var isPrimary: Bool
    public var isHidden: Bool
    public var linked: [Int]
    public var characteristics: [HAPCharacteristic]

    public init(
        iid: Int, type: String, isPrimary: Bool = false, isHidden: Bool = false, linked: [Int] = [],
        characteristics: [HAPCharacteristic]
    ) {
        self.iid = iid
        self.type = type
        self.isPrimary = isPrimary
        self.isHidden = isHidden
        self.linked = linked
        self.characteristics = characteristics
    }
}

/// One accessory: aid 1 is the bridge itself (Accessory Information, Protocol Information),
/// bridged accessories follow.
public struct HAPAccessory: Sendable, Hashable {
    public var aid: Int
    public var services: [HAPService]

    public init(aid: Int, services: [HAPService]) {
        self.aid = aid
        self.services = services
    }
}

/// One value a controller writes.
public struct HAPWrite: Sendable, Hashable {
    public var id: HAPCharacteristicID
    /// Already checked against the characteristic's format and range (bools as `.bool`).
    public var value: JSONValue
    /// The controller asked for a value back (`r`, write-response characteristics only).
    public var wantsResponse: Bool

    public init(id: HAPCharacteristicID, value: JSONValue, wantsResponse: Bool = false) {
        self.id = id
        self.value = value
        self.wantsResponse = wantsResponse
    }
}

/// One encrypted session (one connection after pair-verify).
public struct HAPSessionID: Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt64
    public init(_ rawValue: UInt64) { self.rawValue = rawValue }
    public var description: String { "session \(rawValue)" }
}

/// Who asks: the session and its controller's pairing id.
public struct HAPRequestContext: Sendable, Hashable {
    public var session: HAPSessionID
    public var controller: String
}

/// What the server serves, supplied by its owner (the gateway's bridge, a test's table).
///
/// The server checks every request against the metadata of `accessories()` (existence,
/// permissions, format and range, timed writes) before it calls `read` or `write`, and answers
/// `-70408` itself when they take longer than its timeout (they are cancelled then, and must
/// return soon after). A change of value, whoever made it, is reported once through
/// `HAPAccessoryServer.notify(_:cause:)`, naming the session whose write caused it.
public protocol HAPAccessoryDatabase: Sendable {
    /// The tree with the values last known.
    func accessories() async -> [HAPAccessory]
    /// Fresh values; an id missing from the answer is `-70402`.
    func read(_ ids: [HAPCharacteristicID], context: HAPRequestContext) async
        -> [HAPCharacteristicID: Result<JSONValue, HAPStatus>]
    /// Applies the writes; a value in the answer is returned when the write asked for one.
    func write(_ writes: [HAPWrite], context: HAPRequestContext) async
        -> [HAPCharacteristicID: Result<JSONValue?, HAPStatus>]
    /// `/identify` of an unpaired accessory.
    func identify() async
    /// The values of `ids` it can answer with at once, without waiting and without asking an
    /// accessory: those it keeps current by other means (an accessory that notifies every
    /// change). The server reads the others through `read`. None by default.
    func valuesAtHand(_ ids: [HAPCharacteristicID]) -> [HAPCharacteristicID: JSONValue]
}

extension HAPAccessoryDatabase {
    public func valuesAtHand(_ ids: [HAPCharacteristicID]) -> [HAPCharacteristicID: JSONValue] { [:] }
}
