import Logging
import NIOCore
import Synchronization

/// What the web view says of the connections it turns away as a matter of course: each at
/// debug level, and at most one warning per `interval` with how many of each kind there were
/// since the last one. A flood of half-open connections or oversized heads is then one line a
/// minute, not one per connection, and nothing is lost: the first refusal warns at once, the
/// next ones are counted and warned of when the interval is over.
final class RefusalLog: Sendable {
    enum Kind: String, CaseIterable, Sendable {
        /// Closed at the connection cap to make room (it had not sent a whole head).
        case evicted
        /// Answered 503: at the cap with every connection busy.
        case busy
        /// Answered 408, or closed when it had sent nothing, at the head timeout.
        case headTimeout = "head-timeout"
        /// Answered 431.
        case headTooLarge = "head-too-large"
        /// Answered 413, from the `Content-Length` its head declared.
        case bodyTooLarge = "body-too-large"

        var words: String {
            switch self {
            case .evicted: "closed at the connection cap to make room for a new one"
            case .busy: "refused (503): every connection busy"
            case .headTimeout: "closed (408): the request head did not arrive in time"
            case .headTooLarge: "refused (431): the request head is too large"
            case .bodyTooLarge: "refused (413): the declared body is too large"
            }
        }
    }

    private struct State {
        var counts: [Kind: Int] = [:]
        var lastWarning: ContinuousClock.Instant?
        var flushScheduled = false
    }

    private let logger: Logger
    let interval: Duration
    private let now: @Sendable () -> ContinuousClock.Instant
    private let state = Mutex(State())

    init(
        logger: Logger, interval: Duration = .seconds(60),
        now: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now }
    ) {
        self.logger = logger
        self.interval = interval
        self.now = now
    }

    /// Records one refusal of `peer`'s connection. Warns now when no warning came within the
    /// interval; otherwise counts it and, on `eventLoop`, makes sure a warning comes when the
    /// interval is over.
    func note(_ kind: Kind, peer: SocketAddress?, on eventLoop: (any EventLoop)?) {
        logger.debug(
            "web view: connection \(kind.words)",
            metadata: ["peer": "\(peer.map { "\($0)" } ?? "unknown")", "kind": "\(kind.rawValue)"])
        let time = now()
        let (warn, scheduleIn): ([Kind: Int]?, Duration?) = state.withLock { state in
            state.counts[kind, default: 0] += 1
            if let last = state.lastWarning, time - last < interval {
                guard !state.flushScheduled else { return (nil, nil) }
                state.flushScheduled = true
                return (nil, interval - (time - last))
            }
            state.lastWarning = time
            defer { state.counts = [:] }
            return (state.counts, nil)
        }
        if let warn { warning(warn) }
        if let scheduleIn, let eventLoop {
            let nanoseconds =
                scheduleIn.components.seconds * 1_000_000_000 + scheduleIn.components.attoseconds / 1_000_000_000
            eventLoop.scheduleTask(in: .nanoseconds(nanoseconds)) { [self] in flush() }
        }
    }

    /// Warns of what was counted since the last warning, if anything.
    func flush() {
        let time = now()
        let counts: [Kind: Int] = state.withLock { state in
            state.flushScheduled = false
            guard !state.counts.isEmpty else { return [:] }
            state.lastWarning = time
            defer { state.counts = [:] }
            return state.counts
        }
        if !counts.isEmpty { warning(counts) }
    }

    private func warning(_ counts: [Kind: Int]) {
        var metadata: Logger.Metadata = [:]
        for kind in Kind.allCases { metadata[kind.rawValue] = "\(counts[kind] ?? 0)" }
        let total = counts.values.reduce(0, +)
        logger.warning(
            "web view turned away \(total) connection(s) since the last such warning (each one is logged at debug level; at most one warning a minute)",
            metadata: metadata)
    }
}
