import Synchronization

/// One waiter (a loop's sleep, in a child task beside its timer) and the wake-ups that end its
/// wait. A wake-up that comes before the wait begins (the waiting child has not run yet) is kept
/// for it; a cancelled wait ends at once. The simulator's runner and the gateway's rate-limit
/// loop wait on one each.
public final class WakeSignal: Sendable {
    private let state = Mutex<(woken: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))

    public init() {}

    public func wake() {
        let waiter = state.withLock { s in
            defer { s.waiter = nil }
            if s.waiter == nil { s.woken = true }
            return s.waiter
        }
        waiter?.resume()
    }

    /// Forgets a wake-up kept for the next wait.
    public func reset() { state.withLock { $0.woken = false } }

    /// Returns at the next `wake` (at once if one came since the last wait), or when cancelled.
    public func wait() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let now = state.withLock { s in
                    if s.woken || Task.isCancelled {
                        s.woken = false
                        return true
                    }
                    s.waiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { s in
                defer { s.waiter = nil }
                return s.waiter
            }
            waiter?.resume()
        }
    }
}
