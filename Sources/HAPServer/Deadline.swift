import NIOCore
import Synchronization

/// Runs `operation`, or gives up after `timeout` (nil): the operation is cancelled then, and the
/// wait ends when it returns, which a database honouring cancellation does at once.
///
/// The deadline is a timer on the connection's event loop (`on`), not a second task sleeping:
/// a write paid for a child task, a dispatch timer and the wake-up of the thread that keeps it,
/// every time, for a deadline that almost never passes.
func withDeadline<T: Sendable>(
    _ timeout: Duration, on loop: any EventLoop, _ operation: @escaping @Sendable () async -> T
) async -> T? {
    return await withTaskGroup(of: Void.self) { group in
        let race = DeadlineRace<T>()
        group.addTask { race.finish(await operation()) }
        let nanoseconds = timeout.components.seconds * 1_000_000_000 + timeout.components.attoseconds / 1_000_000_000
        let timer = loop.scheduleTask(in: .nanoseconds(nanoseconds)) { race.finish(nil) }
        let result = await race.value()
        timer.cancel()
        group.cancelAll()
        return result
    }
}

/// The first of an answer and a deadline: whichever comes first is the value, once; the other
/// is dropped.
final class DeadlineRace<T: Sendable>: Sendable {
    private enum State {
        case waiting
        case waiter(CheckedContinuation<T?, Never>)
        case done(T?)
        case taken
    }

    private let state = Mutex(State.waiting)

    func finish(_ value: T?) {
        let waiter: CheckedContinuation<T?, Never>? = state.withLock { s in
            switch s {
            case .waiting:
                s = .done(value)
                return nil
            case .waiter(let continuation):
                s = .taken
                return continuation
            case .done, .taken:
                return nil
            }
        }
        waiter?.resume(returning: value)
    }

    func value() async -> T? {
        await withCheckedContinuation { continuation in
            let ready: T?? = state.withLock { s in
                if case .done(let value) = s {
                    s = .taken
                    return .some(value)
                }
                s = .waiter(continuation)
                return .none
            }
            if case .some(let value) = ready { continuation.resume(returning: value) }
        }
    }
}
