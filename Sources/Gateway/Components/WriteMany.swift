/// Writes of several characteristics of one accessory at once: each checked as a write is and
/// written through its accessory's worker; one outcome holds an entry for each.
struct WriteMany: Sendable {
    /// A write in flight: its characteristics' answers, gathered until the last one.
    struct Pending: Sendable {
        var then: Gateway.Completion
        var answers: [CharacteristicWrite.Answer?]
        var remaining: Int
    }

    private var pending: [UInt64: Pending] = [:]
    private var next: UInt64 = 0

    /// A new write of `count` parts; its number.
    mutating func begin(count: Int, then: @escaping Gateway.Completion) -> UInt64 {
        next += 1
        pending[next] = Pending(
            then: then, answers: Array(repeating: nil, count: count), remaining: count)
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
