import HomeModel

/// Writes of several characteristics of one accessory at once: each checked as a write is and
/// written through its accessory's worker; one outcome holds an entry for each.
struct WriteMany: Sendable {
    /// A write in flight: its characteristics' answers, gathered until the last one.
    struct Pending: Sendable {
        var label: String
        var then: Gateway.Completion
        var answers: [CharacteristicWrite.Answer?]
        var remaining: Int
    }

    private var pending: [UInt64: Pending] = [:]
    private var next: UInt64 = 0

    /// A new write of `count` parts; its number.
    mutating func begin(label: String, count: Int, then: @escaping Gateway.Completion) -> UInt64 {
        next += 1
        pending[next] = Pending(
            label: label, then: then, answers: Array(repeating: nil, count: count), remaining: count)
        return next
    }

    /// Files part `index`'s answer; returns the whole write when it was the last.
    mutating func file(_ number: UInt64, _ index: Int, _ answer: CharacteristicWrite.Answer) -> Pending? {
        guard var write = pending[number], write.answers[index] == nil else { return nil }
        write.answers[index] = answer
        write.remaining -= 1
        guard write.remaining == 0 else {
            pending[number] = write
            return nil
        }
        pending[number] = nil
        return write
    }
}

extension Gateway {
    /// Writes `writes` to the accessory; `then` gets one outcome once every part has its own.
    func write(_ writes: [CharacteristicWrite], accessoryID: String, label: String, then: @escaping Completion) {
        let number = writeMany.begin(label: label, count: writes.count, then: then)
        for (index, write) in writes.enumerated() {
            let (service, characteristic) = (write.service, write.characteristic)
            let checked = write.value.flatMap {
                value -> Result<(TopicTree.CharacteristicNode, CharacteristicValue), GatewayFailure> in
                guard let address = write.address, address.accessoryID == accessoryID else {
                    return .failure(Self.gone(label))
                }
                return writable(address, value).map { ($0, value) }
            }
            switch checked {
            case .failure(let failure):
                record(
                    number, index, .init(service: service, characteristic: characteristic, outcome: .failure(failure)))
            case .success(let (node, value)):
                let ticket = awaiting.add { gateway, outcome in
                    let value = outcome.map(\.value)
                    gateway.record(
                        number, index, .init(service: service, characteristic: characteristic, outcome: value))
                }
                var job = Job(.set(value), node: node, label: label, ticket: ticket)
                job.isPart = true
                dispatch(job)
            }
        }
    }

    /// One characteristic's answer; the last one sends the whole.
    func record(_ number: UInt64, _ index: Int, _ answer: CharacteristicWrite.Answer) {
        guard let set = writeMany.file(number, index, answer) else { return }
        let parts = set.answers.compactMap { $0 }
        let allOK = parts.allSatisfy { if case .success = $0.outcome { true } else { false } }
        if !allOK { activity.failed() }
        set.then(self, .success(.parts(parts)))
    }
}
