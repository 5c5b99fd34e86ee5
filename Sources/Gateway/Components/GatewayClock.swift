import Synchronization

/// The time the gateway's timers read: request deadlines and their watchdog, the `$state`
/// bursts, the poll interval. The continuous clock when running; a `ManualGatewayClock` in a test
/// that must see a timer fire without waiting for it (a `timeout` answer after `request-timeout`,
/// a burst's `$state`), and moves time itself.
///
/// A struct of two closures rather than `any Clock<Duration>`: the timers compare and add
/// instants, which an existential clock's associated `Instant` does not allow without opening it
/// at every use. Instants are `ContinuousClock.Instant`s in both kinds, so a value taken from one
/// clock means the same to the code that reads it.
public struct GatewayClock: Sendable {
    public typealias Instant = ContinuousClock.Instant

    private let read: @Sendable () -> Instant
    private let sleeper: @Sendable (Instant) async throws -> Void

    /// The real continuous clock (it does not stop while the machine sleeps).
    public static let continuous = GatewayClock(read: { .now }, sleeper: { try await Task.sleep(until: $0) })

    /// A clock that only `manual.advance(by:)` moves.
    public static func manual(_ manual: ManualGatewayClock) -> GatewayClock {
        GatewayClock(read: { manual.now }, sleeper: { try await manual.sleep(until: $0) })
    }

    private init(read: @escaping @Sendable () -> Instant, sleeper: @escaping @Sendable (Instant) async throws -> Void) {
        self.read = read
        self.sleeper = sleeper
    }

    public var now: Instant { read() }

    /// Returns at `deadline` (at once if it has passed); throws `CancellationError` if the task
    /// is cancelled first.
    public func sleep(until deadline: Instant) async throws { try await sleeper(deadline) }

    public func sleep(for duration: Duration) async throws { try await sleeper(read() + duration) }
}

/// A clock for tests: time stands still until `advance(by:)`, which wakes every sleeper whose
/// deadline it reaches, in deadline order. `sleepers` tells a test that the timer it means to
/// fire is asleep, so it advances after the timer is set, not before (which would leave the timer
/// waiting for the next advance).
public final class ManualGatewayClock: Sendable {
    private struct Sleeper {
        var deadline: ContinuousClock.Instant
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now: ContinuousClock.Instant
        var next = 0
        var sleepers: [Int: Sleeper] = [:]
        /// Sleepers numbered but not yet registered (between the two locks of `sleep`).
        var unregistered: Set<Int> = []
        /// Of those, the ones cancelled meanwhile: registering one resumes it at once.
        var cancelledEarly: Set<Int> = []
    }

    private let state: Mutex<State>

    public init(start: ContinuousClock.Instant = .now) {
        state = Mutex(State(now: start))
    }

    public var now: ContinuousClock.Instant { state.withLock { $0.now } }

    /// How many timers wait on this clock now.
    public var sleepers: Int { state.withLock { $0.sleepers.count } }

    /// The earliest deadline a timer waits for, if any.
    public var nextDeadline: ContinuousClock.Instant? { state.withLock { $0.sleepers.values.map(\.deadline).min() } }

    /// Moves time forward and wakes the sleepers it reaches (outside the lock).
    public func advance(by duration: Duration) {
        precondition(duration >= .zero, "a manual clock only moves forward")
        let due = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
            state.now = state.now + duration
            let now = state.now
            let reached = state.sleepers.filter { $0.value.deadline <= now }.sorted {
                ($0.value.deadline, $0.key) < ($1.value.deadline, $1.key)
            }
            for (id, _) in reached { state.sleepers[id] = nil }
            return reached.map(\.value.continuation)
        }
        for continuation in due { continuation.resume() }
    }

    func sleep(until deadline: ContinuousClock.Instant) async throws {
        try Task.checkCancellation()
        let id = state.withLock { state -> Int in
            state.next += 1
            state.unregistered.insert(state.next)
            return state.next
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let outcome = state.withLock { state -> Result<Void, any Error>? in
                    state.unregistered.remove(id)
                    if state.cancelledEarly.remove(id) != nil { return .failure(CancellationError()) }
                    if deadline <= state.now { return .success(()) }
                    state.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    return nil
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        } onCancel: {
            let continuation = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                if let sleeper = state.sleepers.removeValue(forKey: id) { return sleeper.continuation }
                // Not registered yet: its registration resumes it. Already woken: nothing to do.
                if state.unregistered.contains(id) { state.cancelledEarly.insert(id) }
                return nil
            }
            continuation?.resume(throwing: CancellationError())
        }
    }
}
