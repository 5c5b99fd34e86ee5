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

extension Gateway {
    /// Called once with a command's outcome, on the gateway: by its worker, by the deadline
    /// watchdog (`timeout`), at once when it is refused, or by `stop` (`unavailable`).
    public typealias Completion = @Sendable (isolated Gateway, GatewayOutcome) -> Void

    /// Checks `command` against the current tree and hands it to its accessory's worker (or
    /// the operations' queue); `then` gets its outcome once. `label` names where it was asked
    /// (a request topic) for the events page; by default the characteristic's, service's or
    /// accessory's topic.
    public func submit(_ command: GatewayCommand, label: String? = nil, then: @escaping Completion) {
        let label = label ?? tree.describe(command)
        func refuse(_ failure: GatewayFailure) { answered(command.kind, label, .failure(failure), then) }
        guard isStarted else {
            return refuse(GatewayFailure(code: .unavailable, message: "the gateway is not online"))
        }
        switch command {
        case .write(let address, let value):
            switch tree.writable(address, value) {
            case .success(let node): dispatch(Job(.set(value), node: node, label: label, ticket: awaiting.add(then)))
            case .failure(let failure): refuse(failure)
            }
        case .read(let address):
            guard let node = tree.characteristic(address) else { return refuse(.gone(label)) }
            dispatch(Job(.get, node: node, label: label, ticket: awaiting.add(then)))
        case .toggle(let accessoryID, let serviceIID):
            switch tree.toggle(accessoryID, serviceIID, label: label, current: currentValue) {
            case .success(let (node, value)):
                dispatch(Job(.set(value), node: node, label: label, kind: "toggle", ticket: awaiting.add(then)))
            case .failure(let failure): refuse(failure)
            }
        case .identify(let accessoryID):
            guard tree.accessory(id: accessoryID) != nil else { return refuse(.gone(label)) }
            dispatch(Job(.identify, accessoryID: accessoryID, label: label, ticket: awaiting.add(then)))
        case .writeMany(let accessoryID, let writes):
            guard tree.accessory(id: accessoryID) != nil else { return refuse(.gone(label)) }
            guard !writes.isEmpty else {
                return refuse(GatewayFailure(code: .empty, message: "the $set names no characteristic"))
            }
            write(writes, accessoryID: accessoryID, label: label, then: then)
        case .manage(let operation):
            work.requestQueue.yield(GatewayRequest(operation: operation, label: label, ticket: awaiting.add(then)))
        }
    }

    /// Performs `command` and returns its outcome: `submit` for a caller that awaits.
    public func perform(_ command: GatewayCommand, label: String? = nil) async -> GatewayOutcome {
        await withCheckedContinuation { continuation in
            submit(command, label: label) { _, outcome in continuation.resume(returning: outcome) }
        }
    }

    /// Counts an outcome and hands it over.
    func answered(_ kind: String, _ label: String, _ outcome: GatewayOutcome, _ then: Completion) {
        activity.answered(label, op: kind, outcome)
        if case .failure = outcome { activity.failed() }
        then(self, outcome)
    }
}
