import Foundation

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
/// What holds: a job never blocks waiting for another job of this thread (the gateway's code
/// awaits, it does not block), and blocking calls (file writes of the home database) are
/// short, as they were on a pool thread. The thread ends once the executor is released and
/// its queue is empty.
final class GatewayThread: TaskExecutor, @unchecked Sendable {
    private let queue = JobQueue()

    init(name: String = "homemqtt-gateway") {
        let queue = self.queue
        // The thread holds the queue, not the executor: releasing the executor ends it.
        let thread = Thread { [weak self] in
            GatewayThread.drain(queue) { self }
        }
        thread.name = name
        thread.start()
    }

    deinit { queue.close() }

    func enqueue(_ job: consuming ExecutorJob) {
        queue.append(UnownedJob(job))
    }

    func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        UnownedTaskExecutor(ordinary: self)
    }

    /// Runs what is queued, a batch at a time, until the queue is closed and empty.
    private static func drain(_ queue: JobQueue, executor: () -> GatewayThread?) {
        while let batch = queue.next() {
            // Jobs hold what enqueued them (a task preferring this executor keeps it), so the
            // executor is alive while a batch runs; a nil here means only the end is left.
            guard let executor = executor() else { continue }
            let unowned = executor.asUnownedTaskExecutor()
            for job in batch { job.runSynchronously(on: unowned) }
        }
    }
}

/// The jobs waiting for the gateway's thread, under one lock and one condition variable.
private final class JobQueue: @unchecked Sendable {
    private var jobs: [UnownedJob] = []
    private var spare: [UnownedJob] = []
    private var closed = false
    private var sleeping = false
    private var mutex = pthread_mutex_t()
    private var condition = pthread_cond_t()

    init() {
        pthread_mutex_init(&mutex, nil)
        pthread_cond_init(&condition, nil)
        jobs.reserveCapacity(64)
        spare.reserveCapacity(64)
    }

    deinit {
        pthread_cond_destroy(&condition)
        pthread_mutex_destroy(&mutex)
    }

    /// Wakes the thread only if it sleeps: a job appended while it drains costs no syscall.
    func append(_ job: UnownedJob) {
        pthread_mutex_lock(&mutex)
        jobs.append(job)
        let wake = sleeping
        pthread_mutex_unlock(&mutex)
        if wake { pthread_cond_signal(&condition) }
    }

    func close() {
        pthread_mutex_lock(&mutex)
        closed = true
        let wake = sleeping
        pthread_mutex_unlock(&mutex)
        if wake { pthread_cond_signal(&condition) }
    }

    /// Everything queued, waiting for it if there is none; nil once closed and empty. The two
    /// arrays swap, so a batch reuses the storage of the one before.
    func next() -> [UnownedJob]? {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        while jobs.isEmpty {
            if closed { return nil }
            sleeping = true
            pthread_cond_wait(&condition, &mutex)
            sleeping = false
        }
        spare.removeAll(keepingCapacity: true)
        swap(&jobs, &spare)
        return spare
    }
}
