import Foundation
import Gateway
import HummingbirdCore
import Logging
import NIOCore
import Synchronization

/// The web view's connections open now, under a cap, so that HTTP can never take the
/// descriptors the broker connection, HAP sessions and state files need.
///
/// At the cap, a new connection takes the place of the oldest one that has not yet sent a whole
/// request head (such a connection has cost the server nothing it would lose, and a flood of
/// them — a partial head, then silence — must not keep out a supervisor's `/healthz` or the
/// page); when every connection is busy (a request, a WebSocket), the new one is answered 503
/// and closed.
final class ConnectionLimiter: Sendable {
    /// Descriptors kept for the rest of the gateway beyond those open once the server listens:
    /// broker reconnections, HAP sessions, state files written by rename, mosquitto tools.
    static let reserve = 64

    struct Entry {
        let channel: any Channel
        var waitingForHead: Bool
    }

    enum Admission {
        /// Served; `evicted` (if any) is to be closed to make room.
        case admitted(id: Int, evicted: (any Channel)?)
        case refused
    }

    private struct State {
        var cap: Int
        var next = 0
        var open: [Int: Entry] = [:]
        var refused = 0
        var evicted = 0
    }

    private let state: Mutex<State>

    init(cap: Int) {
        state = Mutex(State(cap: max(1, cap)))
    }

    var cap: Int { state.withLock { $0.cap } }
    var openCount: Int { state.withLock { $0.open.count } }
    /// Connections refused (every one busy) and closed to make room, since the start.
    var counts: (refused: Int, evicted: Int) { state.withLock { ($0.refused, $0.evicted) } }

    func admit(_ channel: any Channel) -> Admission {
        state.withLock { state in
            var evicted: (any Channel)?
            if state.open.count >= state.cap {
                // Ids grow with time: the smallest waiting one is the oldest.
                guard let oldest = state.open.filter(\.value.waitingForHead).keys.min() else {
                    state.refused += 1
                    return .refused
                }
                evicted = state.open.removeValue(forKey: oldest)?.channel
                state.evicted += 1
            }
            let id = state.next
            state.next += 1
            state.open[id] = Entry(channel: channel, waitingForHead: true)
            return .admitted(id: id, evicted: evicted)
        }
    }

    /// The connection sent its first request head: from now on it is busy, never evicted.
    func headCompleted(_ id: Int) {
        state.withLock { $0.open[id]?.waitingForHead = false }
    }

    func release(_ id: Int) {
        _ = state.withLock { $0.open.removeValue(forKey: id) }
    }

    /// Sets the cap from the process's descriptor limit, once the server listens (the event
    /// loops, the broker connection and the listening socket are open by then): at most
    /// `configured`, and never so many that the rest of the gateway is left fewer than
    /// `reserve` descriptors. Returns the figures it used, for the log.
    @discardableResult
    func fitToDescriptorLimit(configured: Int) -> (cap: Int, limit: Int, open: Int) {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        let soft = limit.rlim_cur == rlim_t.max ? Int.max : Int(clamping: limit.rlim_cur)
        let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0
        let room = soft == Int.max ? configured : soft - open - Self.reserve
        let cap = max(1, min(configured, room))
        state.withLock { $0.cap = cap }
        return (cap, soft, open)
    }
}

/// Hummingbird's child channel with a `ConnectionGuard` first in every connection's pipeline:
/// it sees the bytes before the HTTP parser does.
struct GuardedChildChannel<Base: ServerChildChannel>: ServerChildChannel {
    typealias Value = Base.Value

    let base: Base
    let limiter: ConnectionLimiter
    let limits: ConnectionGuard.Limits
    let refusals: RefusalLog
    let upgradeCheck: ConnectionGuard.UpgradeCheck

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        do {
            try channel.pipeline.syncOperations.addHandler(
                ConnectionGuard(limiter: limiter, limits: limits, refusals: refusals, upgradeCheck: upgradeCheck),
                position: .first)
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        return base.setup(channel: channel, logger: logger)
    }

    func handle(value: Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}
