import Foundation
import Gateway
import HomeMQTTApp
import HomeModel
import Logging
import MQTT
import ServiceLifecycle
import Simulator
import Synchronization
import TopicAPI
import Harness
import WebView

// What the scenarios share: a broker of their own, counting subscribers, an in-process gateway on
// a simulated home, and timing.

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A mosquitto of our own on a free loopback port, set up so that no subscriber loses
/// messages (by default mosquitto drops what exceeds 1,000 queued messages per client, which
/// would make a fast publisher look slow to the counting subscriber), and without Nagle's
/// algorithm on its sockets (otherwise each answer waits for a delayed ACK: every round trip,
/// gateway or echo client alike, takes 40+ ms and measures the kernel, not the clients).
func withBroker<T>(_ body: (MosquittoBroker) async throws -> T) async throws -> T {
    try await MosquittoBroker.with(.init(extraConfiguration: ["max_queued_messages 0", "set_tcp_nodelay true"]), body)
}

let quietLogger: Logger = {
    var logger = Logger(label: "homemqtt.bench")
    logger.logLevel = .warning
    return logger
}()

/// Counts what arrives on one subscription; the counting happens as messages are taken from the
/// client's stream, so the time of the last one is when a consumer really had it.
final class Tally: Sendable {
    struct State {
        var count = 0
        var last: ContinuousClock.Instant?
        var recording = false
        var untilOnline = false
        var recorded: [MQTTMessage] = []
        var kinds: [String: Int] = [:]
        var onlineAt: ContinuousClock.Instant?
        /// The topic and payload `settle` waits for, and whether it came.
        var marker: (topic: String, payload: [UInt8])?
        var markerSeen = false
        /// The one wait in progress (`wait(until:seconds:)`): resumed by the message that
        /// makes its condition true.
        var waiter: Waiter?
    }

    struct Waiter {
        let condition: @Sendable (State) -> Bool
        let continuation: CheckedContinuation<Bool, Never>
    }

    let state = Mutex(State())
    let matches: @Sendable (MQTTMessage) -> Bool
    let statusTopic: String?

    init(statusTopic: String?, matches: @escaping @Sendable (MQTTMessage) -> Bool) {
        self.statusTopic = statusTopic
        self.matches = matches
    }

    func take(_ message: MQTTMessage) {
        let now = ContinuousClock.now
        let isOnline = message.topic == statusTopic && message.payload == Array("online".utf8)
        let counted = matches(message)
        var resumed: CheckedContinuation<Bool, Never>?
        defer { resumed?.resume(returning: true) }
        state.withLock { state in
            // Whatever the message did to the state, a wait it satisfies ends (after the lock).
            defer {
                if let waiter = state.waiter, waiter.condition(state) {
                    state.waiter = nil
                    resumed = waiter.continuation
                }
            }
            if let marker = state.marker, message.topic == marker.topic, message.payload == marker.payload {
                state.markerSeen = true
                return
            }
            // `online` is the last of a start-up's messages: with `untilOnline`, what comes after
            // it (a held request's answer, what stopping publishes) is not recorded.
            if isOnline {
                state.onlineAt = now
                if state.untilOnline { state.recording = false }
            }
            guard counted else { return }
            state.count += 1
            state.last = now
            if state.recording { state.recorded.append(message) }
            if let slash = message.topic.lastIndex(of: "/") {
                state.kinds[String(message.topic[message.topic.index(after: slash)...]), default: 0] += 1
            }
        }
    }

    /// Waits until `condition` holds for the state, at most `seconds`; whether it holds.
    ///
    /// Woken by the message that makes it true, not by polling: a wait runs beside the
    /// measured work (the gateway's notifications, a start-up), and a timer every millisecond
    /// took ~1 % of the machine's CPU from it (scenario 1, `perf`), but not from a baseline that
    /// waits only once its publishing is done. One wait at a time (checked).
    func wait(until condition: @escaping @Sendable (State) -> Bool, seconds: Double) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask { await self.arrival(condition) }
            group.addTask {
                try? await Task.sleep(for: .seconds(seconds))
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first || state.withLock { condition($0) }
        }
    }

    private func arrival(_ condition: @escaping @Sendable (State) -> Bool) async -> Bool {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                // Cancelled before the waiter is stored, the handler below found none: the
                // flag is set before the handler runs, so it is seen here.
                let now = state.withLock { state -> Bool? in
                    if condition(state) { return true }
                    if Task.isCancelled { return false }
                    // A second wait would take the first's place, and the first would never end.
                    precondition(state.waiter == nil, "one Tally wait at a time")
                    state.waiter = Waiter(condition: condition, continuation: continuation)
                    return nil
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            let waiter = state.withLock { state in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.continuation.resume(returning: false)
        }
    }
}

/// Our MQTT client on one filter, counting into a `Tally`, for the scope of `with`: its consumer
/// is a child of that scope, and ends when the client disconnects there (which finishes the
/// stream).
final class CountingSubscriber: Sendable {
    let client: MQTTClient
    let tally: Tally

    private init(client: MQTTClient, tally: Tally) {
        self.client = client
        self.tally = tally
    }

    /// Connects a subscriber on `filter`, runs `body` with it, and disconnects it, whether
    /// `body` returns or throws.
    static func with<Result>(
        broker: MosquittoBroker, filter: String, qos: MQTTQoS = .atMostOnce, statusTopic: String? = nil,
        matches: @escaping @Sendable (MQTTMessage) -> Bool = { _ in true },
        _ body: (CountingSubscriber) async throws -> Result
    ) async throws -> Result {
        var configuration = broker.clientConfiguration(clientID: "bench-counter-\(UInt32.random(in: 0...UInt32.max))")
        configuration.connectTimeout = 10
        let subscriber = CountingSubscriber(
            client: MQTTClient(configuration: configuration, logger: quietLogger),
            tally: Tally(statusTopic: statusTopic, matches: matches))
        let stream = subscriber.client.messages()
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { for await message in stream { subscriber.tally.take(message) } }
            do {
                try await subscriber.client.connect()
                try await subscriber.client.subscribe(filter, qos: qos)
                let result = try await body(subscriber)
                await subscriber.client.disconnect()
                return result
            } catch {
                await subscriber.client.disconnect()
                throw error
            }
        }
    }

    /// Counts from zero; `recording` keeps the messages, and `untilOnline` stops keeping them
    /// at the gateway's `online`.
    func reset(recording: Bool = false, untilOnline: Bool = false) {
        tally.state.withLock {
            $0 = Tally.State(marker: $0.marker, markerSeen: $0.markerSeen, waiter: $0.waiter)
            $0.recording = recording; $0.untilOnline = untilOnline
        }
    }

    /// Waits until the broker has delivered what it sent on subscribing: the retained messages
    /// the filter matches (20,000 `state` topics for scenario 1's home). A message published
    /// now on `marker` (a topic the filter matches, that nobody else publishes) is queued behind
    /// them, and arrives after the last of them: mosquitto sends a client's queued messages in
    /// order (MQTT promises order only per topic, so another broker might not). It is not
    /// counted.
    ///
    /// Why: otherwise a run that starts at once shares the broker and the subscriber with that
    /// flood, and a baseline run later on the same subscription does not.
    func settle(marker: String, timeout: Double = 60) async throws {
        let payload = Array("settled \(UInt64.random(in: 0...UInt64.max))".utf8)
        tally.state.withLock {
            $0.marker = (marker, payload)
            $0.markerSeen = false
        }
        try await client.publish(marker, payload: payload, qos: .atLeastOnce, retain: false)
        guard await tally.wait(until: { $0.markerSeen }, seconds: timeout) else {
            throw BenchError("timed out after \(timeout) s waiting for the retained messages to arrive")
        }
    }

    var count: Int { tally.state.withLock { $0.count } }
    var recorded: [MQTTMessage] { tally.state.withLock { $0.recorded } }
    var kinds: [String: Int] { tally.state.withLock { $0.kinds } }

    /// Waits until `count` matching messages arrived; returns when the last of them did.
    func waitFor(count: Int, timeout: Double, what: String) async throws -> ContinuousClock.Instant {
        _ = await tally.wait(until: { $0.count >= count && $0.last != nil }, seconds: timeout)
        let (have, last) = tally.state.withLock { ($0.count, $0.last) }
        if have >= count, let last { return last }
        throw BenchError("timed out after \(timeout) s waiting for \(what): \(have) of \(count) messages")
    }

    /// Waits for `online` on the status topic; returns when it arrived. `failIf` is asked every
    /// tenth of a second meanwhile (a child process that ended, say).
    func waitOnline(timeout: Double, what: String, failIf: () -> String? = { nil }) async throws
        -> ContinuousClock.Instant
    {
        let deadline = ContinuousClock.now + .seconds(timeout)
        while true {
            if let at = tally.state.withLock({ $0.onlineAt }) { return at }
            if let failure = failIf() { throw BenchError(failure) }
            let left = (deadline - .now).seconds
            if left <= 0 {
                throw BenchError("timed out after \(timeout) s waiting for \(what) (\(count) messages so far)")
            }
            _ = await tally.wait(until: { $0.onlineAt != nil }, seconds: min(left, 0.1))
        }
    }
}

/// The gateway in this process on a simulated home with a manual clock, the way the gateway
/// tests run it, against the bench's broker.
final class InProcessGateway: Sendable {
    let gateway: Gateway
    let home: SimulatedHome
    let group: ServiceGroup
    /// Opened when the service group's run has returned: it is a child of `with`'s scope.
    private let ended: Latch
    let state: TemporaryDirectory
    let config: GatewayConfig
    /// The web view's port, once it listens; 0 without one.
    var webPort: Int { listening.port.withLock { $0 } }
    private let listening: Listening

    /// Where the web view listens, told by its service once it does.
    final class Listening: Sendable {
        let port = Mutex(0)
    }

    private init(
        gateway: Gateway, home: SimulatedHome, group: ServiceGroup, ended: Latch,
        state: TemporaryDirectory, config: GatewayConfig, listening: Listening
    ) {
        self.gateway = gateway
        self.home = home
        self.group = group
        self.ended = ended
        self.state = state
        self.config = config
        self.listening = listening
    }

    /// Runs the gateway until it is online, then `body` with it, and stops it (if `body` did
    /// not) whether `body` returns or throws; the service group runs as a child of this scope.
    /// - Parameter web: with the web view on a free loopback port (also when `--web` says so).
    static func with<Result>(
        broker: MosquittoBroker, accessories directory: URL, web: Bool = false,
        _ body: (InProcessGateway) async throws -> Result
    ) async throws -> Result {
        let web = web || BenchSettings.web.withLock { $0 }
        let state = try TemporaryDirectory(prefix: "homemqtt-bench-state")
        let home = try SimulatedHome.load(directory: directory, clock: .manual)
        var config = GatewayConfig(file: "bench.yml", directory: directory.deletingLastPathComponent().path)
        config.mqtt = broker.clientConfiguration(clientID: "homemqtt-bench-gateway")
        config.mqtt.connectTimeout = 10
        config.stateDirectory = state.path
        config.pollInterval = 0
        config[AccessoryStateConfig.self].enabled = BenchSettings.accessoryState.withLock { $0 }
        if web { (config[WebConfig.self].enabled, config[WebConfig.self].port) = (true, 0) }
        let database = try HomeDatabase(directory: URL(fileURLWithPath: state.path))
        let listening = Listening()
        let parts = try HomeMQTTApp.build(
            config: config, source: home, database: database,
            options: .init(webListening: { port in listening.port.withLock { $0 = port } }), logger: quietLogger)
        let gateway = parts.gateway
        let group = ServiceGroup(configuration: .init(services: parts.services, logger: quietLogger))
        let ended = Latch()
        return try await withThrowingTaskGroup(of: Void.self) { tasks in
            // Subscribed to the status before the gateway starts, as a client that waits for it.
            let started = try await CountingSubscriber.with(
                broker: broker, filter: "\(config.baseTopic)/$gateway/status",
                statusTopic: "\(config.baseTopic)/$gateway/status"
            ) { status in
                tasks.addTask {
                    _ = try? await group.run()
                    ended.open()
                }
                let started = InProcessGateway(
                    gateway: gateway, home: home, group: group, ended: ended, state: state, config: config,
                    listening: listening)
                do {
                    _ = try await status.waitOnline(timeout: 120, what: "the gateway to say online") {
                        // A gateway that stopped will never say online.
                        nil
                    }
                } catch {
                    await started.stop()
                    throw error
                }
                return started
            }
            do {
                let result = try await body(started)
                await started.stop()
                return result
            } catch {
                await started.stop()
                throw error
            }
        }
    }

    /// Waits until the gateway has enabled notifications on `count` characteristics.
    func waitForNotifications(count: Int, timeout: Double = 60) async throws {
        try await waitUntil("notifications on \(count) characteristics", timeout: timeout, pollInterval: 0.005) {
            await home.notificationsEnabled().count >= count
        }
    }

    /// Stops the gateway and waits for its service group to end; a second call only waits.
    func stop() async {
        await group.triggerGracefulShutdown()
        await ended.wait()
    }
}

/// A one-way gate: `wait()` returns once `open()` was called, at once after it.
final class Latch: Sendable {
    private let state = Mutex<(isOpen: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func open() {
        let waiters = state.withLock { state in
            state.isOpen = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    func wait() async {
        await withCheckedContinuation { continuation in
            let isOpen = state.withLock { state in
                if !state.isOpen { state.waiters.append(continuation) }
                return state.isOpen
            }
            if isOpen { continuation.resume() }
        }
    }
}

/// A monotonic instant as seconds since `origin`.
func elapsed(_ origin: ContinuousClock.Instant, _ end: ContinuousClock.Instant = .now) -> Double {
    (end - origin).seconds
}

/// What the command line chose for every scenario's gateway.
enum BenchSettings {
    static let accessoryState = Mutex(true)
    /// Every scenario's gateway with its web view on (`--web`), to measure what it costs.
    static let web = Mutex(false)
    /// Where scenario 7 writes its profile of the set round trip (`--profile-dir`).
    static let profileDirectory = Mutex(NSTemporaryDirectory() + "homemqtt-bench-profile")
    /// Lines printed after the table: where the scenarios wrote files.
    static let notes = Mutex<[String]>([])
}
