public import ServiceLifecycle

// The seam between the gateway and every source of accessories: the AccessorySource protocol, the
// events a source reports, and its errors.

/// An error reported by an accessory or by the source on its behalf, with HAP's status code.
public struct AccessoryError: Error, Sendable, Hashable, CustomStringConvertible {
    /// HAP status codes (negative) as HAP defines them.
    public enum Status: Int, Sendable, Hashable {
        case insufficientPrivileges = -70401
        case communicationFailure = -70402
        case busy = -70403
        case readOnly = -70404
        case writeOnly = -70405
        case notificationNotSupported = -70406
        case outOfResources = -70407
        case timedOut = -70408
        case doesNotExist = -70409
        case invalidValue = -70410
        case insufficientAuthorization = -70411
    }

    public var status: Status
    public var message: String

    public init(_ status: Status, _ message: String) {
        self.status = status
        self.message = message
    }

    /// Our machine code for the status, as used in MQTT `result` messages.
    public var code: ErrorCode {
        switch status {
        case .insufficientPrivileges: .insufficientPrivileges
        case .communicationFailure: .unreachable
        case .busy: .busy
        case .readOnly: .readOnly
        case .writeOnly: .writeOnly
        case .notificationNotSupported: .notificationNotSupported
        case .outOfResources: .outOfResources
        case .timedOut: .timeout
        case .doesNotExist: .doesNotExist
        case .invalidValue: .invalidValue
        case .insufficientAuthorization: .insufficientAuthorization
        }
    }

    public var description: String { message }
}

/// What a source reports, after the HMHomeManager / HMAccessory delegate callbacks.
public enum SourceEvent: Sendable, Hashable {
    case accessoryAdded(Accessory)
    case accessoryRemoved(id: String)
    /// Services, names or metadata of an accessory changed: the whole new description.
    case accessoryChanged(Accessory)
    case reachabilityChanged(id: String, isReachable: Bool)
    case valueUpdated(CharacteristicAddress, CharacteristicValue)
}

/// The one seam between the gateway and every source of accessories (the simulator, HAP).
///
/// A source is also a `Service`: `run()` keeps its connections or behaviours alive until
/// graceful shutdown. `events()` may be called before `run()`; each call returns a new stream
/// that sees every event from then on.
public protocol AccessorySource: ServiceLifecycle.Service, Sendable {
    /// A short name for logs and the health report (`simulator`, `hap`).
    var sourceName: String { get }

    /// The accessories known now, with their last known values.
    func accessories() async -> [Accessory]

    func events() -> EventStream<SourceEvent>

    /// Reads a value from the accessory itself (not a cache). The value is also reported as
    /// `valueUpdated`, in order with the source's other events.
    func read(_ address: CharacteristicAddress) async throws(AccessoryError) -> CharacteristicValue

    /// Writes a value; returns when the accessory has answered. A written value that can be
    /// read is reported as `valueUpdated` before this returns, in order with the source's other
    /// events: the events are the one ordered account of every value, and the gateway
    /// publishes `state` from them alone.
    func write(_ address: CharacteristicAddress, value: CharacteristicValue) async throws(AccessoryError)

    /// Enables or disables value notifications; returns the per-characteristic failures.
    /// Enabling reports (`valueUpdated`) a value that changed since the source last reported
    /// it, so a change between `accessories()` and the subscription is not lost.
    func setNotifications(enabled: Bool, for addresses: [CharacteristicAddress]) async -> [CharacteristicAddress:
        AccessoryError]

    func identify(accessoryID: String) async throws(AccessoryError)
}
