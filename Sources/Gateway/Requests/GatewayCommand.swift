public import HomeModel

// The gateway's one entry for what it is asked, whoever asks: the MQTT topic dialect
// (the `TopicAPI` module), an output (`$set`, Homie), the web view, a future HomeKit bridge. A command
// names characteristics by address and carries typed values; its answer is typed, or a
// `GatewayFailure` with its HAP status. Topics, payloads and request ids are the front ends'.

/// What the gateway can be asked.
public enum GatewayCommand: Sendable {
    /// Writes a characteristic.
    case write(CharacteristicAddress, CharacteristicValue)
    /// Reads a characteristic from its accessory.
    case read(CharacteristicAddress)
    /// Flips a service's primary control (`PrimaryControl`).
    case toggle(accessoryID: String, serviceIID: UInt64)
    /// Asks an accessory to identify itself.
    case identify(accessoryID: String)
    /// Writes several characteristics of one accessory, answered as one with an entry each.
    case writeMany(accessoryID: String, [CharacteristicWrite])
    /// Runs a management operation (`ManagementOperation`), one at a time.
    case manage(any ManagementOperation)

    /// The request's kind, for counts and the events page: `set`, `get`, `toggle`, `identify`,
    /// or the operation's name.
    public var kind: String {
        switch self {
        case .write, .writeMany: "set"
        case .read: "get"
        case .toggle: "toggle"
        case .identify: "identify"
        case .manage(let operation): type(of: operation).name
        }
    }
}

/// What a command answers.
public enum GatewayAnswer: Sendable, Equatable {
    /// A write's value, a read's value at the characteristic's precision; nil for `identify`.
    case value(CharacteristicValue?)
    /// A `writeMany`: each characteristic's own answer.
    case parts([CharacteristicWrite.Answer])
    /// A management operation's data.
    case data(JSONValue)

    /// The value a write or read answered; nil for any other answer.
    public var value: CharacteristicValue? {
        if case .value(let value) = self { value } else { nil }
    }
}

/// The answer to a command, or why there is none.
public typealias GatewayOutcome = Result<GatewayAnswer, GatewayFailure>

extension Result where Failure == GatewayFailure {
    /// Why it failed; nil when it succeeded.
    public var failure: GatewayFailure? {
        if case .failure(let failure) = self { failure } else { nil }
    }
}

/// One characteristic of a `writeMany`: the names its answer is filed under, and its address
/// and value as the front end read them (or why not).
public struct CharacteristicWrite: Sendable {
    public var service: String
    public var characteristic: String
    public var address: CharacteristicAddress?
    public var value: Result<CharacteristicValue, GatewayFailure>

    public init(
        service: String, characteristic: String, address: CharacteristicAddress?,
        value: Result<CharacteristicValue, GatewayFailure>
    ) {
        (self.service, self.characteristic, self.address, self.value) = (service, characteristic, address, value)
    }

    /// One characteristic's answer within a `writeMany`.
    public struct Answer: Sendable, Equatable {
        public var service: String
        public var characteristic: String
        public var outcome: Result<CharacteristicValue?, GatewayFailure>
    }
}
