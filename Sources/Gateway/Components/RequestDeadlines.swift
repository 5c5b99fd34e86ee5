import Synchronization

/// The deadlines of the requests that workers are running. One watchdog answers every request
/// that overstays with `timeout`; a late answer from the accessory then updates the state but
/// sends no second result. One watchdog rather than a timer per request: racing each request
/// against a timer task of its own takes a task group and two child tasks per `set`.
final class RequestDeadlines: Sendable {
    struct Entry: Sendable {
        var deadline: ContinuousClock.Instant
        var job: Gateway.Job
    }

    private let state = Mutex<(next: UInt64, entries: [UInt64: Entry])>((0, [:]))
    /// In-process requests' last-resort deadlines (`Gateway.request(topic:payload:)`), by
    /// their local number: the same watchdog answers them, with no timer task each.
    private let local = Mutex<[Int: ContinuousClock.Instant]>([:])
    /// Whether the watchdog waits for a first deadline (nothing to watch for a while): the
    /// next one registered wakes it. While requests come, it is never set, and registering one
    /// costs no wake-up.
    private let idle = Atomic<Bool>(false)
    private let wake: AsyncStream<Void>.Continuation
    /// The watchdog's wake-ups; one is kept when nobody waits yet, so none is lost.
    let wakes: AsyncStream<Void>

    init() {
        (wakes, wake) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// Whether the watchdog waits for a first deadline now (tests order their steps by it).
    var isWaitingForWork: Bool { idle.load(ordering: .sequentiallyConsistent) }

    /// Whether no deadline is registered.
    var isEmpty: Bool { state.withLock { $0.entries.isEmpty } && local.withLock { $0.isEmpty } }

    /// Returns once a deadline is registered (at once if one is), or when the task is cancelled.
    /// A gateway with nothing to watch then sleeps instead of waking ten times a second.
    func waitForWork(_ wakes: inout AsyncStream<Void>.Iterator) async {
        idle.store(true, ordering: .sequentiallyConsistent)
        defer { idle.store(false, ordering: .sequentiallyConsistent) }
        // Registered between the caller's check and `idle`: seen here. After it: woken.
        guard isEmpty else { return }
        _ = await wakes.next()
    }

    private func registered() {
        if idle.load(ordering: .sequentiallyConsistent) { wake.yield() }
    }

    /// Registers a request that starts `now`; returns its token.
    func start(_ job: Gateway.Job, timeout: Double, now: ContinuousClock.Instant) -> UInt64 {
        let deadline = now + .seconds(timeout)
        defer { registered() }
        return state.withLock { state in
            state.next += 1
            state.entries[state.next] = Entry(deadline: deadline, job: job)
            return state.next
        }
    }

    /// Ends a request: true if it is still to be answered by its worker, false if the watchdog
    /// has answered it already.
    func finish(_ token: UInt64) -> Bool {
        state.withLock { $0.entries.removeValue(forKey: token) != nil }
    }

    /// The requests past their deadline, now counted as answered.
    func takeExpired(now: ContinuousClock.Instant) -> [Gateway.Job] {
        state.withLock { state in
            let expired = state.entries.filter { $0.value.deadline <= now }
            for token in expired.keys { state.entries[token] = nil }
            return expired.sorted { $0.key < $1.key }.map(\.value.job)
        }
    }

    func startLocal(_ number: Int, timeout: Double, now: ContinuousClock.Instant) {
        let deadline = now + .seconds(timeout)
        local.withLock { $0[number] = deadline }
        registered()
    }

    func finishLocal(_ number: Int) { _ = local.withLock { $0.removeValue(forKey: number) } }

    /// The in-process requests past their deadline, removed.
    func takeExpiredLocal(now: ContinuousClock.Instant) -> [Int] {
        local.withLock { local in
            let expired = local.filter { $0.value <= now }.keys.sorted()
            for number in expired { local[number] = nil }
            return expired
        }
    }
}
