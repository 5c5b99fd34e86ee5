public import Logging
import NIOCore
import NIOPosix
import Synchronization

// Connecting to whichever of an accessory's addresses answers first. An accessory announces
// several (IPv4 and IPv6, global and link-local, one per interface); some may not answer from
// here (another network, a firewall, an address it no longer has). As in Happy Eyeballs
// (RFC 8305 §5), each attempt starts `stagger` after the one before without waiting for it to
// fail, or at once when an attempt fails; the first connection made is kept and every other
// attempt closed.
//
// As swift-nio's `HappyEyeballsConnector` does it: no task per attempt. The attempts are NIO
// connects (futures) and the stagger an event-loop timer, all feeding one state machine
// (`ConnectRaceState`); the caller awaits the outcome. A losing attempt does not hold up the
// winner, and does not outlive the race either: when the race is decided (won, lost or
// cancelled) its channel is closed at once, which ends its connect.

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
        let race = ConnectRace(stagger: .nanoseconds(Int64(stagger * 1e9)), attempts: hosts.count) {
            index, register in
            open(host: hosts[index], port: port, timeout: timeout, logger: logger, register: register)
        }
        let outcome = await withTaskCancellationHandler {
            await withCheckedContinuation { race.run($0) }
        } onCancel: {
            race.cancel()
        }
        return try outcome.get()
    }
}

/// Drives one `connect(firstOf:)`: performs what `ConnectRaceState` says, and holds what it
/// needs for that (the caller's continuation, the timer, each attempt's channels). Every
/// change is under one lock, and each action is done outside it; the caller is resumed exactly
/// once. Generic over the connection, so that tests can race attempts of their own.
final class ConnectRace<Connection: Sendable>: Sendable {
    typealias Outcome = Result<Connection, HAPError>
    /// Starts attempt `index`. Each channel it opens goes through `register` first, which
    /// throws when the attempt is abandoned already.
    typealias Attempt =
        @Sendable (_ index: Int, _ register: @escaping @Sendable (any Channel) throws -> Void) ->
        EventLoopFuture<Connection>

    private struct Shared {
        var state: ConnectRaceState<Connection>
        var waiter: CheckedContinuation<Outcome, Never>?
        /// Set once decided, for a caller that comes to wait afterwards (cancelled first).
        var outcome: Outcome?
        var timer: Scheduled<Void>?
        /// The channels of the attempts out: closing one ends its connect at once.
        var channels: [Int: [any Channel]] = [:]
    }

    private struct Abandoned: Error {}

    private let shared: Mutex<Shared>
    private let stagger: TimeAmount
    private let attempt: Attempt
    private let loop: any EventLoop

    init(
        stagger: TimeAmount, attempts: Int, loop: any EventLoop = MultiThreadedEventLoopGroup.singleton.any(),
        attempt: @escaping Attempt
    ) {
        shared = Mutex(Shared(state: ConnectRaceState(attempts: attempts)))
        self.stagger = stagger
        self.attempt = attempt
        self.loop = loop
    }

    /// Starts the race; `waiter` gets its outcome.
    func run(_ waiter: CheckedContinuation<Outcome, Never>) {
        let outcome = shared.withLock { s -> Outcome? in
            if let outcome = s.outcome { return outcome }
            s.waiter = waiter
            return nil
        }
        if let outcome { return waiter.resume(returning: outcome) }
        handle { $0.begin() }
    }

    func cancel() { handle { $0.cancel() } }

    /// What is left to do after an input, taken out of the shared state under the lock.
    private enum Work {
        case start(Int, armsTimer: Bool)
        case finish(Outcome, CheckedContinuation<Outcome, Never>?, Scheduled<Void>?, [any Channel])
        case close([any Channel])
        case nothing
    }

    /// Feeds one input to the state machine and does what it says. `ending`: the attempt the
    /// input ends, whose channels are no longer the race's to close (the winner's, or closed).
    private func handle(
        ending: Int? = nil, _ input: (inout ConnectRaceState<Connection>) -> ConnectRaceState<Connection>.Action
    ) {
        let work = shared.withLock { s -> Work in
            defer { if let ending { s.channels[ending] = nil } }
            switch input(&s.state) {
            case .start(let index, let armsTimer):
                return .start(index, armsTimer: armsTimer)
            case .win(let connection, let losers):
                return Self.decide(&s, .success(connection), closing: losers)
            case .fail(let error):
                return Self.decide(&s, .failure(error), closing: [])
            case .cancel(let losers):
                return Self.decide(&s, .failure(HAPError(code: .cancelled, message: "cancelled")), closing: losers)
            case .close(let index):
                return .close(s.channels.removeValue(forKey: index) ?? [])
            case .none:
                return .nothing
            }
        }
        switch work {
        case .start(let index, let armsTimer):
            start(index, armsTimer: armsTimer)
        case .finish(let outcome, let waiter, let timer, let losers):
            timer?.cancel()
            for channel in losers { channel.close(promise: nil) }
            waiter?.resume(returning: outcome)
        case .close(let channels):
            for channel in channels { channel.close(promise: nil) }
        case .nothing:
            break
        }
    }

    private static func decide(_ s: inout Shared, _ outcome: Outcome, closing losers: [Int]) -> Work {
        s.outcome = outcome
        defer {
            s.waiter = nil
            s.timer = nil
        }
        // Kept in the table until their attempt ends: one that connects all the same is closed
        // again (`close`), harmlessly.
        return .finish(outcome, s.waiter, s.timer, losers.flatMap { s.channels[$0] ?? [] })
    }

    private func start(_ index: Int, armsTimer: Bool) {
        // The timer armed before is stale (it was for this attempt): it is replaced.
        let next = armsTimer ? loop.scheduleTask(in: stagger) { self.handle { $0.timerFired(for: index + 1) } } : nil
        let stale = shared.withLock { s -> [Scheduled<Void>] in
            let old = s.timer
            if s.state.isDecided {
                s.timer = nil
                return [old, next].compactMap { $0 }
            }
            s.timer = next
            return [old].compactMap { $0 }
        }
        for timer in stale { timer.cancel() }
        attempt(index) { channel in try self.register(channel, for: index) }
            .whenComplete { result in
                switch result {
                case .success(let connection): self.handle(ending: index) { $0.connected(index, connection) }
                case .failure(let error as HAPError):
                    self.handle(ending: index) { $0.failed(index, reason: error.message) }
                case .failure(let error): self.handle(ending: index) { $0.failed(index, reason: "\(error)") }
                }
            }
    }

    /// A channel of attempt `index`, before it connects: kept to be closed when the attempt
    /// loses; refused (the connect fails at once) when the race is decided already.
    private func register(_ channel: any Channel, for index: Int) throws {
        try shared.withLock { s in
            guard s.state.isRunning(index) else { throw Abandoned() }
            s.channels[index, default: []].append(channel)
        }
    }
}
