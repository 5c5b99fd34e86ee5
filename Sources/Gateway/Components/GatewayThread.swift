import Foundation
import MQTT

#if canImport(Glibc)
    import Glibc
#endif

/// The one thread a serving gateway's work runs on: the tasks that prefer it (workers, the
/// message reader, event readers, outputs), and the actors without an executor of their own
/// they call — the gateway's, an in-process source such as the simulator, the home database —
/// through Swift's task executor preference. `Gateway.run()` says which tasks prefer it.
///
/// Why: a notification or a `set` crosses the source, the source's event stream, the
/// gateway's actor and a worker. On the global pool each crossing enqueues a job that wakes
/// another thread (a futex, a context switch), and on two cores shared with the broker those
/// switches cost more than the work. Here a crossing appends to a queue this thread is already
/// draining: a hop is a function call's worth of work, and the thread sleeps only when there
/// is nothing to do. Isolation is unchanged: actors stay exclusive, on whichever thread.
///
/// While the MQTT client is connected, its network thread runs these jobs instead
/// (`MQTTNetworkThreadGuest`, `Gateway.run()` hosts it): a `set` is then read, performed and
/// answered on the thread that reads and writes the socket, with no thread switch inside the
/// process, and this thread sleeps. Work that takes the network thread longer than
/// `borrowerBudget` at a time (a burst of requests, a large republication, a stream of
/// notifications) comes back here while this thread stays busy more than half the time
/// (`loadWindow`) and the queue never stays empty for `keepAfterHandBack`: meanwhile the
/// network thread keeps reading and writing beside this thread's work, so a loaded gateway has
/// both threads, and the broker is never left holding (and, past its queue limit, dropping)
/// what the gateway is slow to work through.
///
/// What holds: a job never blocks waiting for another job of this thread (the gateway's code
/// awaits, it does not block), and blocking calls (file writes of the home database) are
/// short, as they were on a pool thread. Jobs may run on two threads at once for the moment
/// a batch taken before a hand-over takes to finish, as on any task executor; actors keep
/// their own exclusion. The thread ends once the executor is released and its queue is empty.
final class GatewayThread: TaskExecutor, MQTTNetworkThreadGuest, @unchecked Sendable {
    private let queue = JobQueue()

    /// `name`: at most 15 bytes, the system's limit for a thread's name.
    init(name: String = "homemqtt-gw") {
        let queue = self.queue
        // The thread holds the queue, not the executor: releasing the executor ends it.
        // Named from inside, as the MQTT client's network thread is (`ThreadName.set`).
        let thread = Thread { [weak self] in
            ThreadName.set(name)
            GatewayThread.drain(queue) { self }
        }
        thread.start()
    }

    deinit { queue.close() }

    func enqueue(_ job: consuming ExecutorJob) {
        queue.append(UnownedJob(job))
    }

    func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        UnownedTaskExecutor(ordinary: self)
    }

    // MARK: MQTTNetworkThreadGuest (on the network thread)

    func attach(wake: @escaping @Sendable () -> Void) { queue.lend(wake: wake) }

    func detach() { queue.takeBack() }

    func didWait() { queue.borrowerAwake() }

    /// How long the network thread runs jobs before it hands them back to this thread: a few
    /// `set`s' worth (about 50 µs each in a release build). With 1 ms, a stream of
    /// notifications kept the network thread working most of each turn, and went 0.91× as fast
    /// as on two threads (homemqtt-bench scenario 1, three alternated pairs); with 250 µs, level.
    static let borrowerBudget: Duration = .microseconds(250)

    /// How long this thread keeps work handed back to it once the queue is empty, before the
    /// network thread takes it again.
    static let keepAfterHandBack: Duration = .milliseconds(20)

    /// How long this thread measures its load on handed-back work before it decides whether
    /// to keep it.
    static let loadWindow: Duration = .milliseconds(10)

    /// Jobs until none is left, or until the budget is spent and the rest is handed back,
    /// first in the queue. The clock is read after each job: a batch (everything queued while
    /// the connection was down, say) may hold far more than the budget's worth.
    func runWaiting() {
        let unowned = asUnownedTaskExecutor()
        let start = ContinuousClock.now
        while let batch = queue.nextForBorrower() {
            for index in batch.indices {
                batch[index].runSynchronously(on: unowned)
                if ContinuousClock.now - start > Self.borrowerBudget {
                    queue.handBack(batch[(index + 1)...])
                    return
                }
            }
        }
    }

    /// Runs what is queued, a batch at a time, until the queue is closed and empty.
    private static func drain(_ queue: JobQueue, executor: () -> GatewayThread?) {
        var busy = Duration.zero
        while let batch = queue.next(afterWorking: busy) {
            // Jobs hold what enqueued them (a task preferring this executor keeps it), so the
            // executor is alive while a batch runs; a nil here means only the end is left.
            guard let executor = executor() else { continue }
            let unowned = executor.asUnownedTaskExecutor()
            let start = ContinuousClock.now
            for job in batch { job.runSynchronously(on: unowned) }
            busy = ContinuousClock.now - start
        }
    }
}

/// The jobs waiting for the gateway's thread, under one lock and one condition variable; or,
/// while lent, for the network thread that `borrowerWake` wakes — unless `handedBack`.
private final class JobQueue: @unchecked Sendable {
    /// What the lock guards. Behind a pointer, not in stored properties: every access to a
    /// class's stored `var` is checked for exclusivity at run time (`swift_beginAccess`, a
    /// thread-local look-up), and a job's trip through here made a dozen of them, ~6 k
    /// instructions a `set` (callgrind). What holds instead: every access is under `mutex`.
    private struct State {
        var jobs: [UnownedJob] = []
        var spare: [UnownedJob] = []
        var closed = false
        var sleeping = false
        var borrowerWake: (@Sendable () -> Void)?
        var borrowerWaiting = false
        var handedBack = false
        var window = (start: ContinuousClock.now, busy: Duration.zero)
    }

    private let state = UnsafeMutablePointer<State>.allocate(capacity: 1)
    /// Allocated, so that their addresses are stable (`&` on a stored property promises none).
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    private var jobs: [UnownedJob] {
        get { state.pointee.jobs }
        _modify { yield &state.pointee.jobs }
    }
    private var spare: [UnownedJob] {
        get { state.pointee.spare }
        _modify { yield &state.pointee.spare }
    }
    private var closed: Bool {
        get { state.pointee.closed }
        set { state.pointee.closed = newValue }
    }
    private var sleeping: Bool {
        get { state.pointee.sleeping }
        set { state.pointee.sleeping = newValue }
    }
    private var borrowerWake: (@Sendable () -> Void)? {
        get { state.pointee.borrowerWake }
        set { state.pointee.borrowerWake = newValue }
    }
    /// The borrower waits for its socket: the next job appended wakes it.
    private var borrowerWaiting: Bool {
        get { state.pointee.borrowerWaiting }
        set { state.pointee.borrowerWaiting = newValue }
    }
    /// Lent, but the borrower ran out of budget: the own thread drains until the queue is empty.
    private var handedBack: Bool {
        get { state.pointee.handedBack }
        set { state.pointee.handedBack = newValue }
    }
    /// Since when, and how long of it, the own thread has worked on handed-back work.
    private var window: (start: ContinuousClock.Instant, busy: Duration) {
        get { state.pointee.window }
        _modify { yield &state.pointee.window }
    }
    /// Who takes the next job: the borrower, or the own thread.
    private var borrowerTakes: Bool { state.pointee.borrowerWake != nil && !state.pointee.handedBack }

    init() {
        state.initialize(to: State())
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
        jobs.reserveCapacity(64)
        spare.reserveCapacity(64)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        state.deinitialize(count: 1)
        state.deallocate()
        condition.deallocate()
        mutex.deallocate()
    }

    /// Wakes whichever thread drains only if it waits: a job appended while it drains costs no
    /// syscall.
    func append(_ job: UnownedJob) {
        pthread_mutex_lock(mutex)
        jobs.append(job)
        var wakeBorrower: (@Sendable () -> Void)?
        var signal = false
        if borrowerTakes {
            if borrowerWaiting {
                borrowerWaiting = false
                wakeBorrower = borrowerWake
            }
        } else {
            signal = sleeping
        }
        pthread_mutex_unlock(mutex)
        wakeBorrower?()
        if signal { pthread_cond_signal(condition) }
    }

    func lend(wake: @escaping @Sendable () -> Void) {
        pthread_mutex_lock(mutex)
        borrowerWake = wake
        borrowerWaiting = false
        handedBack = false
        pthread_mutex_unlock(mutex)
    }

    func takeBack() {
        pthread_mutex_lock(mutex)
        borrowerWake = nil
        borrowerWaiting = false
        handedBack = false
        let signal = sleeping
        pthread_mutex_unlock(mutex)
        if signal { pthread_cond_signal(condition) }
    }

    /// For the borrower: everything queued, or nil (nothing, or handed back), and then it is
    /// woken for the next job it takes.
    func nextForBorrower() -> [UnownedJob]? {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        guard borrowerTakes, !jobs.isEmpty else {
            borrowerWaiting = true
            return nil
        }
        return takeAll()
    }

    /// The borrower spent its budget: the own thread drains until the queue is empty, from
    /// `rest` (the batch's jobs not run yet) on.
    func handBack(_ rest: ArraySlice<UnownedJob>) {
        pthread_mutex_lock(mutex)
        jobs.insert(contentsOf: rest, at: 0)
        handedBack = true
        window = (ContinuousClock.now, .zero)
        borrowerWaiting = true
        let signal = sleeping && !jobs.isEmpty
        pthread_mutex_unlock(mutex)
        if signal { pthread_cond_signal(condition) }
    }

    func borrowerAwake() {
        pthread_mutex_lock(mutex)
        borrowerWaiting = false
        pthread_mutex_unlock(mutex)
    }

    func close() {
        pthread_mutex_lock(mutex)
        closed = true
        let wake = sleeping
        pthread_mutex_unlock(mutex)
        if wake { pthread_cond_signal(condition) }
    }

    /// For the gateway's thread, having worked `busy` on the batch before: everything queued
    /// that is its to take, waiting for it if there is none; nil once closed and empty (a lent
    /// queue is held, so never closed). Handed-back work is kept while this thread is busy
    /// more than half the time and work keeps coming: under load the network thread reads and
    /// writes beside this one working, which is faster than one thread doing both. Otherwise
    /// (a lone slow job, then requests one at a time) it goes back to the borrower.
    func next(afterWorking busy: Duration) -> [UnownedJob]? {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        window.busy += busy
        while jobs.isEmpty || borrowerTakes {
            if jobs.isEmpty && closed { return nil }
            if jobs.isEmpty && handedBack && !stillLoaded() { handedBack = false }
            sleeping = true
            if jobs.isEmpty && handedBack {
                if waitOrTimeOut(GatewayThread.keepAfterHandBack) && jobs.isEmpty { handedBack = false }
            } else {
                pthread_cond_wait(condition, mutex)
            }
            sleeping = false
        }
        return takeAll()
    }

    /// Whether this thread has been busy more than half of the window, once the window is
    /// long enough to tell (`loadWindow`); a new window starts then.
    private func stillLoaded() -> Bool {
        let now = ContinuousClock.now
        let elapsed = now - window.start
        guard elapsed >= GatewayThread.loadWindow else { return true }
        defer { window = (now, .zero) }
        return window.busy * 2 > elapsed
    }

    /// Waits for a signal, or `duration`; true when the time ran out.
    private func waitOrTimeOut(_ duration: Duration) -> Bool {
        var deadline = timespec()
        clock_gettime(CLOCK_REALTIME, &deadline)
        let nanoseconds = Int(deadline.tv_nsec) + Int(duration.components.attoseconds / 1_000_000_000)
        deadline.tv_sec += time_t(nanoseconds / 1_000_000_000)
        deadline.tv_nsec = Int(nanoseconds % 1_000_000_000)
        return pthread_cond_timedwait(condition, mutex, &deadline) == ETIMEDOUT
    }

    /// The two arrays swap, so a batch reuses the storage of the one before (once the batch
    /// before is released; copy-on-write keeps a batch still held intact).
    private func takeAll() -> [UnownedJob] {
        spare.removeAll(keepingCapacity: true)
        swap(&jobs, &spare)
        return spare
    }
}
