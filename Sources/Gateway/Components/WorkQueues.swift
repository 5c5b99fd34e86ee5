import HomeModel
import Synchronization

/// The streams through which the gateway hands work to its long-lived children, and the
/// accessory workers' bookkeeping. Made once with the gateway; read from any task.
final class WorkQueues: Sendable {
    /// The characteristics that should notify, for `syncNotifications` (only the latest counts).
    let notificationTargets: AsyncStream<CharacteristicAddressSet>.Continuation
    let notificationStream: AsyncStream<CharacteristicAddressSet>
    /// Home events ask for a rebuild here rather than rebuilding each: a rebuild costs the whole
    /// tree, and a burst of events (the first start adopts every room and accessory, one event
    /// each) would otherwise cost events × tree. Requests made while a rebuild runs collapse
    /// into one more.
    let rebuildRequests: AsyncStream<Void>.Continuation
    let rebuildStream: AsyncStream<Void>
    /// Gateway requests run one at a time off the message loop: a `pair` or `discover` takes
    /// seconds, and `set`/`get` must not wait for it.
    let requestQueue: AsyncStream<Gateway.GatewayRequest>.Continuation
    let requestStream: AsyncStream<Gateway.GatewayRequest>
    /// Requests to accessories, one worker per accessory (by hash), so each accessory gets its
    /// requests in the order sent and a slow one holds up no other.
    static let workerCount = 8
    let workers: [EventStream<Gateway.Job>.Continuation]
    let workerStreams: [EventStream<Gateway.Job>]
    /// The deadlines of the requests workers are running, for the one watchdog.
    let deadlines = RequestDeadlines()
    /// Requests dispatched to a worker and not yet answered; `stop` waits for them.
    let pendingJobs = Atomic<Int>(0)

    init() {
        (notificationStream, notificationTargets) = AsyncStream<CharacteristicAddressSet>.makeStream(
            bufferingPolicy: .bufferingNewest(1))
        (requestStream, requestQueue) = AsyncStream<Gateway.GatewayRequest>.makeStream()
        (rebuildStream, rebuildRequests) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        var streams: [EventStream<Gateway.Job>] = []
        var continuations: [EventStream<Gateway.Job>.Continuation] = []
        for _ in 0..<Self.workerCount {
            let (stream, continuation) = EventStream<Gateway.Job>.makeStream()
            streams.append(stream)
            continuations.append(continuation)
        }
        workerStreams = streams
        workers = continuations
    }

    /// Ends every stream: their readers finish what they hold and end.
    func finish() {
        notificationTargets.finish()
        rebuildRequests.finish()
        requestQueue.finish()
        workers.forEach { $0.finish() }
    }
}
