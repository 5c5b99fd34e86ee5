public import Logging
import Synchronization

// Connecting to whichever of an accessory's addresses answers first. An accessory announces
// several (IPv4 and IPv6, global and link-local, one per interface); some may not answer from
// here (another network, a firewall, an address it no longer has). As in Happy Eyeballs
// (RFC 8305 §5), each attempt starts `stagger` after the one before, without waiting for it to
// fail; the first connection made is kept and every later one closed.

extension HAPConnection {
    /// The first of `hosts` to accept a TCP connection on `port`, tried in their order, each
    /// `stagger` seconds after the one before; each attempt gives up after `timeout`. Fails when
    /// every attempt failed, with their reasons.
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
        let outcome: Result<HAPConnection, HAPError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                race.start(continuation)
                for (index, host) in hosts.enumerated() {
                    // Unstructured: a losing attempt must not hold up the winner. It ends by
                    // itself (at `timeout` at the latest) and closes what it made.
                    Task {
                        if index > 0 { try? await Task.sleep(for: .seconds(stagger * Double(index))) }
                        if race.isDecided { return race.skipped() }
                        do throws(HAPError) {
                            let connection = try await connect(host: host, port: port, timeout: timeout, logger: logger)
                            if !race.won(connection) { await connection.close() }
                        } catch {
                            race.failed(error)
                        }
                    }
                }
            }
        } onCancel: {
            race.cancel()
        }
        return try outcome.get()
    }
}

/// The state of one `connect(firstOf:)`: who won, or how many attempts are still out.
private final class ConnectRace: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Result<HAPConnection, HAPError>, Never>?
        var decided = false
        var outstanding: Int
        var failures: [String] = []
    }

    private let state: Mutex<State>

    init(attempts: Int) { state = Mutex(State(outstanding: attempts)) }

    var isDecided: Bool { state.withLock { $0.decided } }

    func start(_ continuation: CheckedContinuation<Result<HAPConnection, HAPError>, Never>) {
        let cancelled = state.withLock { s in
            if s.decided { return true }
            s.continuation = continuation
            return false
        }
        if cancelled { continuation.resume(returning: .failure(HAPError(code: .cancelled, message: "cancelled"))) }
    }

    /// True when `connection` is the first made: it is the answer.
    func won(_ connection: HAPConnection) -> Bool {
        let continuation = state.withLock { s -> CheckedContinuation<Result<HAPConnection, HAPError>, Never>?? in
            s.outstanding -= 1
            guard !s.decided else { return .none }
            s.decided = true
            defer { s.continuation = nil }
            return .some(s.continuation)
        }
        guard case .some(let waiting) = continuation else { return false }
        waiting?.resume(returning: .success(connection))
        return true
    }

    func failed(_ error: HAPError) { finish { $0.failures.append(error.message) } }

    /// An attempt not started: the race was decided before its turn.
    func skipped() { finish { _ in } }

    func cancel() {
        let waiting = state.withLock { s -> CheckedContinuation<Result<HAPConnection, HAPError>, Never>? in
            guard !s.decided else { return nil }
            s.decided = true
            defer { s.continuation = nil }
            return s.continuation
        }
        waiting?.resume(returning: .failure(HAPError(code: .cancelled, message: "cancelled")))
    }

    /// One attempt fewer; when none is left and nobody won, the answer is every failure.
    private func finish(_ change: (inout State) -> Void) {
        let answer = state.withLock { s -> (CheckedContinuation<Result<HAPConnection, HAPError>, Never>?, String)? in
            change(&s)
            s.outstanding -= 1
            guard s.outstanding == 0, !s.decided else { return nil }
            s.decided = true
            defer { s.continuation = nil }
            return (s.continuation, s.failures.joined(separator: "; "))
        }
        if let (waiting, reasons) = answer {
            waiting?.resume(returning: .failure(HAPError(code: .unreachable, message: reasons)))
        }
    }
}
