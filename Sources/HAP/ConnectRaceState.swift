// The bookkeeping of `HAPConnection.connect(firstOf:)`, apart from sockets and clocks, as
// swift-nio's `HappyEyeballsConnector` keeps its own: every input (the stagger timer, an
// attempt connected or failed, the caller cancelled) changes the state and says what to do,
// and the driver (`ConnectRace`) does it. Being a plain value, it is tested input by input.

/// Which attempt starts next, which are out, what failed, and whether the race is decided.
/// Attempts are numbered in the order of the addresses; attempt `i + 1` starts `stagger` after
/// attempt `i`, or at once when an attempt fails. The first connection is the answer; once the
/// race is decided, every attempt still out is closed, as is anything that connects later.
struct ConnectRaceState<Connection> {
    enum Action {
        /// Start attempt `index` now, and (when `armsTimer`) the timer that starts the next.
        /// Any timer already armed is stale: it was for this attempt.
        case start(index: Int, armsTimer: Bool)
        /// The answer: hand `connection` to the caller, stop the timer, and close `losers`,
        /// the attempts still out.
        case win(Connection, losers: [Int])
        /// Attempt `index` connected after the race was decided: close what it made.
        case close(index: Int)
        /// Every attempt failed: the caller gets one error with every reason, in the order
        /// the attempts failed.
        case fail(HAPError)
        /// The caller gave up: it gets `cancelled`; stop the timer and close `losers`.
        case cancel(losers: [Int])
        case none
    }

    let attempts: Int
    /// The attempt to start next (`attempts` once all have started).
    private(set) var next = 0
    /// Started and not yet ended, in the order they started.
    private(set) var running: [Int] = []
    private(set) var failures: [String] = []
    private(set) var isDecided = false

    init(attempts: Int) { self.attempts = attempts }

    /// Whether attempt `index` is out and the race still open: its channel may go on.
    func isRunning(_ index: Int) -> Bool { !isDecided && running.contains(index) }

    /// The race begins: attempt 0 starts.
    mutating func begin() -> Action { timerFired(for: 0) }

    /// The stagger timer armed for attempt `index` fired. Nothing when that attempt already
    /// started (an attempt failed first and started it) or the race is decided.
    mutating func timerFired(for index: Int) -> Action {
        guard !isDecided, index == next, index < attempts else { return .none }
        return startNext()
    }

    /// Attempt `index` made `connection`: the first to do so wins.
    mutating func connected(_ index: Int, _ connection: Connection) -> Action {
        running.removeAll { $0 == index }
        guard !isDecided else { return .close(index: index) }
        isDecided = true
        return .win(connection, losers: running)
    }

    /// Attempt `index` failed for `reason`: the next starts at once in its place; when none is
    /// left to start and none is out, the race is lost.
    mutating func failed(_ index: Int, reason: String) -> Action {
        guard running.contains(index) else { return .none }
        running.removeAll { $0 == index }
        guard !isDecided else { return .none }
        failures.append(reason)
        if next < attempts { return startNext() }
        guard running.isEmpty else { return .none }
        isDecided = true
        return .fail(HAPError(code: .unreachable, message: failures.joined(separator: "; ")))
    }

    /// The caller was cancelled before an answer.
    mutating func cancel() -> Action {
        guard !isDecided else { return .none }
        isDecided = true
        return .cancel(losers: running)
    }

    private mutating func startNext() -> Action {
        let index = next
        next += 1
        running.append(index)
        return .start(index: index, armsTimer: next < attempts)
    }
}
