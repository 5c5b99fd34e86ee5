public import Foundation
import HomeModel
import Metrics
import Synchronization

/// What the gateway did, for `/metrics` and the web view's events page: messages in and out,
/// answers by result code, source events, reconnects and request latency as swift-metrics
/// counters and timers, and the last errors it answered.
///
/// The metric handles come from whatever factory `MetricsSystem` has when the gateway is made:
/// without the web view nobody bootstraps one, and every call here is a no-op handler's, so a
/// gateway without `web:` pays nothing measurable. The Gateway files call it in one line each.
public final class GatewayActivity: Sendable {
    /// An error the gateway answered or reported, as the events page lists it.
    public struct ErrorRecord: Sendable {
        /// Increases by one per record: a reader asks for what came after the last it saw.
        public var sequence: Int
        public var time: Date
        /// Where the answer went (`…/brightness/result`, `$gateway/response/pair`, `$gateway/error`).
        public var topic: String
        public var op: String
        public var code: String
        public var message: String
    }

    /// The code `reportUnknown` publishes on `$gateway/error`.
    static let unknownTopicCode = ErrorCode.unknownTopic.rawValue

    /// How many errors are kept: a page opened later sees these.
    public static let recentErrorLimit = 100

    private let messagesIn: Counter
    private let messagesOut: Counter
    private let reconnects: Counter
    /// `homemqtt_source_events_total` by kind, one property each: at every value a source
    /// reports, looking the kind up by name hashed it (~300 instructions of each notification,
    /// callgrind).
    private let valueEvents, reachabilityEvents, addedEvents, changedEvents, removedEvents: Counter
    private let factory: any MetricsFactory
    /// Handles by label values, made on first use: result codes and ops are open-ended.
    private let answers = Mutex<[String: Counter]>([:])
    private let timers = Mutex<[String: Metrics.Timer]>([:])
    private let errors = Mutex<(records: [ErrorRecord], next: Int)>(([], 1))
    /// What the health report counts: writes and reads handed to accessories, and requests
    /// answered with an error.
    private let sets = Atomic<Int>(0)
    private let gets = Atomic<Int>(0)
    private let failures = Atomic<Int>(0)
    /// The same messages and reconnects `/metrics` counts, for the health document (whose rates
    /// need the totals, which a swift-metrics counter does not give back).
    private let receivedCount = Atomic<Int>(0)
    private let publishedCount = Atomic<Int>(0)
    private let reconnectCount = Atomic<Int>(0)

    init(factory: any MetricsFactory = MetricsSystem.factory) {
        self.factory = factory
        messagesIn = Counter(label: "homemqtt_mqtt_messages_received_total", factory: factory)
        messagesOut = Counter(label: "homemqtt_mqtt_messages_published_total", factory: factory)
        reconnects = Counter(label: "homemqtt_broker_reconnects_total", factory: factory)
        func sourceEvents(_ kind: String) -> Counter {
            Counter(label: "homemqtt_source_events_total", dimensions: [("kind", kind)], factory: factory)
        }
        valueEvents = sourceEvents("value")
        reachabilityEvents = sourceEvents("reachability")
        addedEvents = sourceEvents("added")
        changedEvents = sourceEvents("changed")
        removedEvents = sourceEvents("removed")
    }

    func received() {
        messagesIn.increment()
        receivedCount.add(1, ordering: .relaxed)
    }

    /// A write (`set`, `$toggle`) or a read (`get`) handed to an accessory.
    func requested(write: Bool) {
        if write { sets.add(1, ordering: .relaxed) } else { gets.add(1, ordering: .relaxed) }
    }

    /// A request answered with an error (a write of several counts once).
    public func failed() { failures.add(1, ordering: .relaxed) }

    /// The health report's counts.
    var requestCounts: (sets: Int, gets: Int, errors: Int) {
        (sets.load(ordering: .relaxed), gets.load(ordering: .relaxed), failures.load(ordering: .relaxed))
    }

    func published(_ count: Int = 1) {
        messagesOut.increment(by: count)
        publishedCount.add(count, ordering: .relaxed)
    }

    func reconnected() {
        reconnects.increment()
        reconnectCount.add(1, ordering: .relaxed)
    }

    /// Messages received and published, and reconnects, since the start.
    var totals: (received: Int, published: Int, reconnects: Int) {
        (
            receivedCount.load(ordering: .relaxed), publishedCount.load(ordering: .relaxed),
            reconnectCount.load(ordering: .relaxed)
        )
    }

    func sourceEvent(_ event: SourceEvent) {
        switch event {
        case .valueUpdated: valueEvents.increment()
        case .reachabilityChanged: reachabilityEvents.increment()
        case .accessoryAdded: addedEvents.increment()
        case .accessoryChanged: changedEvents.increment()
        case .accessoryRemoved: removedEvents.increment()
        }
    }

    /// An answer on `topic` (`result`, `$result`, `response/<op>`): counted by op and result
    /// code, and kept when it is an error. `op` nil: a gateway request's, read from the topic.
    public func answered<T>(_ topic: String, op: String?, _ outcome: Result<T, GatewayFailure>) {
        let op = op ?? topic.components(separatedBy: "/$gateway/response/").last ?? "request"
        let code: String
        switch outcome {
        case .success: code = "ok"
        case .failure(let failure):
            code = failure.code.rawValue
            remember(topic: topic, op: op, code: code, message: failure.message)
        }
        let key = op + " " + code
        let counter = answers.withLock { table in
            if let found = table[key] { return found }
            let made = Counter(
                label: "homemqtt_answers_total", dimensions: [("op", op), ("code", code)], factory: factory)
            table[key] = made
            return made
        }
        counter.increment()
    }

    /// A message on a topic under the base that the gateway does not serve (`$gateway/error`).
    public func unknownTopic(_ topic: String, _ message: String) {
        remember(topic: topic, op: Self.unknownTopicCode, code: Self.unknownTopicCode, message: message)
    }

    /// How long an accessory took to answer a request (`set`, `get`, `toggle`, `identify`).
    func finished(_ op: String, since start: ContinuousClock.Instant) {
        let elapsed = ContinuousClock.now - start
        let nanoseconds = elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000
        let timer = timers.withLock { table in
            if let found = table[op] { return found }
            let made = Metrics.Timer(
                label: "homemqtt_request_duration_seconds", dimensions: [("op", op)], factory: factory)
            table[op] = made
            return made
        }
        timer.recordNanoseconds(nanoseconds)
    }

    private func remember(topic: String, op: String, code: String, message: String) {
        errors.withLock { state in
            state.records.append(
                ErrorRecord(sequence: state.next, time: Date(), topic: topic, op: op, code: code, message: message))
            state.next += 1
            if state.records.count > Self.recentErrorLimit {
                state.records.removeFirst(state.records.count - Self.recentErrorLimit)
            }
        }
    }

    /// The errors kept whose sequence is above `sequence` (all of them for 0), oldest first.
    public func recentErrors(after sequence: Int = 0) -> [ErrorRecord] {
        errors.withLock { state in state.records.filter { $0.sequence > sequence } }
    }
}
