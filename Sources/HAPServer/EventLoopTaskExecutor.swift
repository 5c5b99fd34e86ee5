import NIOCore

/// Runs a connection's tasks on its channel's event loop.
///
/// Why: a request crossed threads three times on its way through (the event loop's read, the
/// task that takes it, the write back on the event loop), and each crossing wakes a sleeping
/// thread — most of a read's CPU time was those wake-ups, not the work. With this executor
/// preferred, the connection's tasks, its child tasks and the non-isolated code they call run as
/// jobs on the loop that reads and writes its socket; a request is served on one thread.
///
/// What holds: every job runs on `eventLoop`, in the order enqueued (the loop runs its tasks in
/// order). Work that blocks would stall the loop's other channels, so pair-setup's SRP (a few
/// milliseconds, once per pairing) is the heaviest thing run here; actors keep their own
/// isolation wherever they run.
final class EventLoopTaskExecutor: TaskExecutor {
    let eventLoop: any EventLoop

    init(_ eventLoop: any EventLoop) { self.eventLoop = eventLoop }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
