import HomeModel

/// Writes of several characteristics of one accessory at once: each checked as a write is and
/// written through its accessory's worker; one outcome holds an entry for each (`WriteMany`).

extension Gateway {
    /// Writes `writes` to the accessory; `then` gets one outcome once every part has its own.
    func write(_ writes: [CharacteristicWrite], accessoryID: String, label: String, then: @escaping Completion) {
        let number = writeMany.begin(count: writes.count, then: then)
        for (index, write) in writes.enumerated() {
            let (service, characteristic) = (write.service, write.characteristic)
            let checked = write.value.flatMap {
                value -> Result<(TopicTree.CharacteristicNode, CharacteristicValue), GatewayFailure> in
                guard let address = write.address, address.accessoryID == accessoryID else {
                    return .failure(.gone(label))
                }
                return tree.writable(address, value).map { ($0, value) }
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
