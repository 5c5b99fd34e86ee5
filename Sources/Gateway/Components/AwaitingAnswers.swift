/// The completions of the commands under way, by ticket: each is taken once, by the command's
/// worker, the deadline watchdog or `stop`, so every caller gets exactly one outcome — also one
/// whose worker or queue ended with the gateway.
struct AwaitingAnswers {
    private var waiting: [UInt64: Gateway.Completion] = [:]
    private var next: UInt64 = 0

    /// Keeps `then`; returns its ticket.
    mutating func add(_ then: @escaping Gateway.Completion) -> UInt64 {
        next += 1
        waiting[next] = then
        return next
    }

    /// The completion of `ticket`, taken; nil once taken.
    mutating func take(_ ticket: UInt64) -> Gateway.Completion? { waiting.removeValue(forKey: ticket) }

    /// Every completion still waiting, in the order the commands came, taken.
    mutating func takeAll() -> [Gateway.Completion] {
        defer { waiting = [:] }
        return waiting.sorted { $0.key < $1.key }.map(\.value)
    }
}
