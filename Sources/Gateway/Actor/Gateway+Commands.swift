public import HomeModel

// The core's side of `GatewayCommand` (`Requests/GatewayCommand.swift`): each command checked
// against the current tree and handed to its accessory's worker or the operations' queue, and
// its one outcome handed over.

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
