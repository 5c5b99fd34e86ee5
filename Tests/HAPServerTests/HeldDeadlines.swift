import Synchronization

/// Deadlines that pass when the test says so (`HAPAccessoryServer.Configuration.verifyDeadline`):
/// `pass()` ends the waits begun before it, and a wait begun after waits for the next `pass()`.
/// A cancelled wait ends at once (a connection that closes first cancels its deadline), also
/// when it is cancelled before it is registered.
final class HeldDeadlines: Sendable {
    private struct State {
        var next = 0
        var waiting: [Int: CheckedContinuation<Void, any Error>] = [:]
        var cancelledEarly: Set<Int> = []
    }

    private let state = Mutex(State())

    /// The waits under way.
    var count: Int { state.withLock { $0.waiting.count } }

    @Sendable func wait(_: Duration) async throws {
        let id = state.withLock { state in
            state.next += 1
            return state.next
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let cancelled = state.withLock { state in
                    guard state.cancelledEarly.remove(id) == nil else { return true }
                    state.waiting[id] = continuation
                    return false
                }
                if cancelled { continuation.resume(throwing: CancellationError()) }
            }
        } onCancel: {
            let continuation = state.withLock { state in
                guard let found = state.waiting.removeValue(forKey: id) else {
                    state.cancelledEarly.insert(id)
                    return nil as CheckedContinuation<Void, any Error>?
                }
                return found
            }
            continuation?.resume(throwing: CancellationError())
        }
    }

    /// Every wait under way ends: its deadline has passed.
    func pass() {
        let due = state.withLock { state in
            defer { state.waiting = [:] }
            return Array(state.waiting.values)
        }
        for continuation in due { continuation.resume() }
    }
}
