public import HomeModel

// What simulated services do on their own: the behaviour kinds a file or a service's type
// chooses, the HAP types they act on, and the step context and engine interface they run by.

/// What a simulated service does on its own, between and after writes.
public enum BehaviourKind: Sendable, Hashable {
    /// Values are only stored (switches, light bulbs); also how a file turns an automatic
    /// behaviour off.
    case none
    /// target-door-state → current-door-state through opening/closing over `travelTime` seconds
    /// for a full travel; an obstruction stops the door.
    case garageDoor(travelTime: Double)
    /// lock-target-state → lock-current-state after `delay` seconds.
    case lock(delay: Double)
    /// current-temperature moves `step` degrees every `every` seconds toward
    /// target-temperature while the target heating/cooling mode permits it.
    case thermostat(step: Double, every: Double)
    /// outlet-in-use follows power-state.
    case outlet
    /// target-position → current-position over `travelTime` seconds for a full travel, with
    /// position-state; tilt angles follow their targets (window covering, door, window).
    case position(travelTime: Double)
    /// The current state follows the target (or active) `delay` seconds after a write: security
    /// system, valve, fan, air purifier, heater-cooler, humidifier.
    case settle(SettleRule, delay: Double)
    /// The characteristic (long UUID) walks by `step` every `every` seconds between `min` and
    /// `max` (bounces at the ends); a bool toggles. Bounds default to ±10 steps around the
    /// initial value, inside the characteristic's range.
    case drift(characteristic: String, step: Double, every: Double, min: Double?, max: Double?)
    /// The characteristic takes each step's value `after` seconds after the previous step.
    case script(characteristic: String, steps: [ScriptStep], repeats: Bool)

    /// Device behaviours replace each other; drift and script come on top of them.
    var isDevice: Bool {
        switch self {
        case .drift, .script: false
        default: true
        }
    }
}

public struct ScriptStep: Sendable, Hashable {
    public var after: Double
    public var value: CharacteristicValue

    public init(after: Double, value: CharacteristicValue) {
        self.after = after
        self.value = value
    }
}

/// A behaviour attached to one service of one accessory.
public struct ServiceBehaviour: Sendable, Hashable {
    public var accessoryID: String
    public var serviceIID: UInt64
    public var kind: BehaviourKind

    public init(accessoryID: String, serviceIID: UInt64, kind: BehaviourKind) {
        self.accessoryID = accessoryID
        self.serviceIID = serviceIID
        self.kind = kind
    }

    public static let defaultTravelTime = 10.0
    public static let defaultLockDelay = 1.0
    public static let defaultThermostatStep = 0.1
    public static let defaultThermostatInterval = 12.0

    /// The behaviour a service of this type gets when a file says nothing.
    public static func automatic(forServiceType type: String) -> BehaviourKind {
        switch StandardUUID.longForm(type) {
        case HAPType.garageDoorOpener: .garageDoor(travelTime: defaultTravelTime)
        case HAPType.lockMechanism: .lock(delay: defaultLockDelay)
        case HAPType.thermostat: .thermostat(step: defaultThermostatStep, every: defaultThermostatInterval)
        case HAPType.outlet: .outlet
        case HAPType.windowCovering, HAPType.door, HAPType.window: .position(travelTime: defaultTravelTime)
        default: settleRule(forServiceType: type).map { .settle($0, delay: defaultLockDelay) } ?? .none
        }
    }

    /// The settling rule of a service type whose current state follows a write, if any.
    static func settleRule(forServiceType type: String) -> SettleRule? {
        switch StandardUUID.longForm(type) {
        case HAPType.securitySystem: .securitySystem
        case HAPType.valve: .valve
        case HAPType.fanV2: .activeDevice(current: HAPType.currentFanState)
        case HAPType.airPurifier: .activeDevice(current: HAPType.currentAirPurifierState)
        case HAPType.heaterCooler: .heaterCooler
        case HAPType.humidifier: .humidifier
        default: nil
        }
    }
}

/// UUIDs behaviours act on. These are HAP's fixed identifiers, not a copy of the catalog: the
/// catalog answers "what is this type", behaviours need "is this the door's target".
enum HAPType {
    static let garageDoorOpener = StandardUUID.longForm("41")
    static let lockMechanism = StandardUUID.longForm("45")
    static let thermostat = StandardUUID.longForm("4A")
    static let outlet = StandardUUID.longForm("47")
    static let windowCovering = StandardUUID.longForm("8C")
    static let door = StandardUUID.longForm("81")
    static let window = StandardUUID.longForm("8B")
    static let securitySystem = StandardUUID.longForm("7E")
    static let valve = StandardUUID.longForm("D0")
    static let fanV2 = StandardUUID.longForm("B7")
    static let airPurifier = StandardUUID.longForm("BB")
    static let heaterCooler = StandardUUID.longForm("BC")
    static let humidifier = StandardUUID.longForm("BD")

    static let identify = StandardUUID.longForm("14")
    static let name = StandardUUID.longForm("23")
    static let currentDoorState = StandardUUID.longForm("E")
    static let targetDoorState = StandardUUID.longForm("32")
    static let obstructionDetected = StandardUUID.longForm("24")
    static let lockCurrentState = StandardUUID.longForm("1D")
    static let lockTargetState = StandardUUID.longForm("1E")
    static let currentTemperature = StandardUUID.longForm("11")
    static let targetTemperature = StandardUUID.longForm("35")
    static let currentHeatingCooling = StandardUUID.longForm("F")
    static let targetHeatingCooling = StandardUUID.longForm("33")
    static let on = StandardUUID.longForm("25")
    static let outletInUse = StandardUUID.longForm("26")
    static let currentPosition = StandardUUID.longForm("6D")
    static let targetPosition = StandardUUID.longForm("7C")
    static let positionState = StandardUUID.longForm("72")
    static let holdPosition = StandardUUID.longForm("6F")
    /// target → current tilt angle pairs: horizontal, vertical, and the slat-style tilt.
    static let tiltPairs = [("7B", "6C"), ("7D", "6E"), ("C2", "C1")].map {
        (StandardUUID.longForm($0.0), StandardUUID.longForm($0.1))
    }
    static let securitySystemCurrent = StandardUUID.longForm("66")
    static let securitySystemTarget = StandardUUID.longForm("67")
    static let active = StandardUUID.longForm("B0")
    static let inUse = StandardUUID.longForm("D2")
    static let currentFanState = StandardUUID.longForm("AF")
    static let currentAirPurifierState = StandardUUID.longForm("A9")
    static let currentHeaterCooler = StandardUUID.longForm("B1")
    static let targetHeaterCooler = StandardUUID.longForm("B2")
    static let currentHumidifier = StandardUUID.longForm("B3")
    static let targetHumidifier = StandardUUID.longForm("B4")
}

/// What a behaviour sees and changes during one step: its service's values, the time, and the
/// steps it wants to schedule or cancel. The home applies the result (and emits events) after
/// the step, so behaviours stay plain value types with no access to the actor.
struct BehaviourContext {
    enum TimerOp { case schedule(tag: Int, after: Double), cancel(tag: Int) }

    let now: Double
    private(set) var service: AccessoryService
    private(set) var changed: [UInt64] = []
    private(set) var timerOps: [TimerOp] = []

    init(now: Double, service: AccessoryService) {
        self.now = now
        self.service = service
    }

    func characteristic(_ type: String) -> Characteristic? { service.characteristic(type: type) }
    func value(_ type: String) -> CharacteristicValue? { characteristic(type)?.value }
    func number(_ type: String) -> Double? { value(type)?.doubleValue }

    /// Sets a value as the device would: no permission check, but kept inside the range.
    mutating func set(_ type: String, _ value: CharacteristicValue) {
        guard let si = service.characteristics.firstIndex(where: { $0.type == type }) else { return }
        guard service.characteristics[si].value != value else { return }
        service.characteristics[si].value = value
        changed.append(service.characteristics[si].iid)
    }

    mutating func setNumber(_ type: String, _ x: Double) {
        guard let c = characteristic(type) else { return }
        set(type, Self.value(x, for: c.metadata))
    }

    mutating func schedule(tag: Int = 0, after seconds: Double) {
        timerOps.append(.schedule(tag: tag, after: max(0, seconds)))
    }
    mutating func cancel(tag: Int = 0) { timerOps.append(.cancel(tag: tag)) }

    /// A number as a value of the characteristic's format, clamped to its range. Rounded to
    /// micro-units so repeated steps of 0.1 do not accumulate binary noise.
    static func value(_ x: Double, for metadata: CharacteristicMetadata) -> CharacteristicValue {
        var v = x
        if let lo = metadata.minValue { v = Swift.max(v, lo) }
        if let hi = metadata.maxValue { v = Swift.min(v, hi) }
        if let bounds = metadata.format.integerBounds {
            v = Swift.min(Swift.max(v.rounded(), bounds.lowerBound), bounds.upperBound)
        }
        switch metadata.format {
        case .bool: return .bool(v != 0)
        case .uint8, .uint16, .uint32, .uint64: return .uint(UInt64(exactly: v) ?? 0)
        case .int: return .int(Int64(exactly: v) ?? 0)
        case .string: return .string(String(v))
        case .tlv8, .data: return .data([])
        case .float: return .float((v * 1_000_000).rounded() / 1_000_000)
        }
    }
}

/// A running behaviour. Each reacts to writes, to its own scheduled steps and, for doors, to
/// obstructions. Default implementations do nothing.
protocol BehaviourEngine: Sendable {
    mutating func start(_ ctx: inout BehaviourContext)
    mutating func didWrite(_ type: String, _ ctx: inout BehaviourContext)
    mutating func fire(tag: Int, _ ctx: inout BehaviourContext)
    /// Returns false when the behaviour has nothing to obstruct.
    mutating func setObstructed(_ obstructed: Bool, _ ctx: inout BehaviourContext) -> Bool
}

extension BehaviourEngine {
    mutating func start(_ ctx: inout BehaviourContext) {}
    mutating func didWrite(_ type: String, _ ctx: inout BehaviourContext) {}
    mutating func fire(tag: Int, _ ctx: inout BehaviourContext) {}
    mutating func setObstructed(_ obstructed: Bool, _ ctx: inout BehaviourContext) -> Bool { false }
}
