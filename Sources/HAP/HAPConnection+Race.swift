public import Logging
import Synchronization

// Connecting to whichever of an accessory's addresses answers first. An accessory announces
// several (IPv4 and IPv6, global and link-local, one per interface); some may not answer from
// here (another network, a firewall, an address it no longer has). As in Happy Eyeballs
// (RFC 8305 §5), each attempt starts `stagger` after the one before without waiting for it to
// fail, or at once when an attempt fails; the first connection made is kept and every later
// one closed.

extension HAPConnection {
    /// The first of `hosts` to accept a TCP connection on `port`, tried in their order, each
    /// `stagger` seconds after the one before or as soon as one fails; each attempt gives up
    /// after `timeout`. Fails when every attempt failed, with their reasons.
    public static func connect(
        firstOf hosts: [String], port: Int, timeout: Double = 5, stagger: Double = 0.25,
        logger: Logger = Logger(label: "hap")
    ) async throws(HAPError) -> HAPConnection {
        guard let first = hosts.first else {
            throw HAPError(code: .unreachable, message: "no address to connect to")
        }
        guard hosts.count > 1 else {
            return try await connect(host: first, port: port, timeout: timeout, logger: logger)
        }
        let race = ConnectRace(attempts: hosts.count)
        /// Starts attempt `index` (when it is still the next one and the race is open), and
        /// the timer that starts the one after it.
        @Sendable func launch(_ index: Int) {
            guard race.start(index) else { return }
            // Unstructured: a losing attempt must not hold up the winner. It ends by itself
            // (at `timeout` at the latest) and closes what it made.
            Task {
                do throws(HAPError) {
                    let connection = try await connect(
                        host: hosts[index], port: port, timeout: timeout, logger: logger)
                    if !race.won(connection) { await connection.close() }
                } catch {
                    if let next = race.failed(error) { launch(next) }
                }
            }
            if index + 1 < hosts.count {
                Task {
                    try? await Task.sleep(for: .seconds(stagger))
                    launch(index + 1)
                }
            }
        }
        let outcome: Result<HAPConnection, HAPError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                race.wait(continuation)
                launch(0)
            }
        } onCancel: {
            race.cancel()
        }
        return try outcome.get()
    }
}

/// The state of one `connect(firstOf:)`: which attempt starts next, how many are out, and who
/// won. Every change is under one lock; the caller is resumed exactly once.
private final class ConnectRace: Sendable {
    typealias Waiter = CheckedContinuation<Result<HAPConnection, HAPError>, Never>

    private struct State {
        var waiter: Waiter?
        var decided = false
        let attempts: Int
        /// The index of the attempt to start next.
        var next = 0
        /// Started and not yet ended.
        var running = 0
        var failures: [String] = []
    }

    private let state: Mutex<State>

    init(attempts: Int) { state = Mutex(State(attempts: attempts)) }

    func wait(_ waiter: Waiter) {
        let cancelled = state.withLock { s in
            if s.decided { return true }
            s.waiter = waiter
            return false
        }
        if cancelled { waiter.resume(returning: .failure(HAPError(code: .cancelled, message: "cancelled"))) }
    }

    /// True when attempt `index` is the next one and the race is still open: it starts now.
    /// False when it started already (its timer and a failure both asked) or nobody waits.
    func start(_ index: Int) -> Bool {
        state.withLock { s in
            guard !s.decided, s.next == index, index < s.attempts else { return false }
            s.next += 1
            s.running += 1
            return true
        }
    }

    /// True when `connection` is the first made: it is the answer.
    func won(_ connection: HAPConnection) -> Bool {
        let waiter = state.withLock { s -> Waiter?? in
            s.running -= 1
            guard !s.decided else { return .none }
            s.decided = true
            defer { s.waiter = nil }
            return .some(s.waiter)
        }
        guard case .some(let waiting) = waiter else { return false }
        waiting?.resume(returning: .success(connection))
        return true
    }

    /// An attempt failed. Returns the attempt to start now in its place; when none is left and
    /// none is still out, the answer is every failure.
    func failed(_ error: HAPError) -> Int? {
        let (next, answer) = state.withLock { s -> (Int?, (Waiter?, String)?) in
            s.running -= 1
            s.failures.append(error.message)
            guard !s.decided else { return (nil, nil) }
            if s.next < s.attempts { return (s.next, nil) }
            guard s.running == 0 else { return (nil, nil) }
            s.decided = true
            defer { s.waiter = nil }
            return (nil, (s.waiter, s.failures.joined(separator: "; ")))
        }
        if let (waiter, reasons) = answer {
            waiter?.resume(returning: .failure(HAPError(code: .unreachable, message: reasons)))
        }
        return next
    }

    func cancel() {
        let waiter = state.withLock { s -> Waiter? in
            guard !s.decided else { return nil }
            s.decided = true
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(returning: .failure(HAPError(code: .cancelled, message: "cancelled")))
    }
}
