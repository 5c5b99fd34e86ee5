import Foundation
import HomeModel

/// Commands to accessories (write, read, identify): one worker per accessory keeps them in
/// order; each gets exactly one outcome, its own or `timeout`.
extension Gateway {
    /// A command to an accessory, for a worker: what to do, and who gets the outcome.
    struct Job: Sendable {
        enum Action: Sendable { case set(CharacteristicValue), get, identify }
        var action: Action
        var node: TopicTree.CharacteristicNode?
        var accessoryID: String
        /// `set`, `get`, `toggle` or `identify`: for counts and timings.
        var kind: String
        /// Where it was asked, for the events page.
        var label: String
        /// Its completion's number in `awaiting`.
        var ticket: UInt64
        /// One characteristic of a `writeMany`: its outcome goes into the whole, which alone
        /// counts as failed.
        var isPart = false

        init(_ action: Action, node: TopicTree.CharacteristicNode, label: String, kind: String? = nil, ticket: UInt64) {
            let kinds: String =
                switch action {
                case .set: "set"
                case .get: "get"
                case .identify: "identify"
                }
            (self.action, self.node, accessoryID) = (action, node, node.address.accessoryID)
            (self.kind, self.label, self.ticket) = (kind ?? kinds, label, ticket)
        }

        init(_ action: Action, accessoryID: String, label: String, ticket: UInt64) {
            (self.action, node, self.accessoryID, kind, self.label, self.ticket) =
                (action, nil, accessoryID, "identify", label, ticket)
        }
    }

    /// Commands for one accessory go to the same worker, so they reach it in the order sent.
    func dispatch(_ job: Job) {
        switch job.action {
        case .set: activity.requested(write: true)
        case .get: activity.requested(write: false)
        case .identify: break
        }
        if let node = tree.accessory(id: job.accessoryID), !node.accessory.isReachable {
            let failure = GatewayFailure(
                code: .unreachable, message: "\(node.displayName) is unreachable",
                hapStatus: AccessoryError.Status.communicationFailure.rawValue)
            complete(job, .failure(failure))
            return
        }
        work.pendingJobs.add(1, ordering: .relaxed)
        var hasher = Hasher()
        hasher.combine(job.accessoryID)
        let index = Int(UInt(bitPattern: hasher.finalize()) % UInt(WorkQueues.workerCount))
        work.workers[index].yield(job)
    }

    nonisolated func runWorker(_ jobs: EventStream<Job>) async {
        for await job in jobs {
            await execute(job)
            work.pendingJobs.subtract(1, ordering: .relaxed)
        }
    }

    private nonisolated func execute(_ job: Job) async {
        let token = work.deadlines.start(job, timeout: config.requestTimeout, now: clock.now)
        let started = ContinuousClock.now
        let outcome: GatewayOutcome
        do throws(AccessoryError) {
            switch job.action {
            case .set(let value):
                guard let node = job.node else { return }
                try await source.write(node.address, value: value)
                outcome = .success(.value(value))
            case .get:
                guard let node = job.node else { return }
                // At the characteristic's precision, as on `state`.
                let value = try await source.read(node.address)
                outcome = .success(.value(ValueCodec.rounded(value, metadata: node.characteristic.metadata)))
            case .identify:
                try await source.identify(accessoryID: job.accessoryID)
                outcome = .success(.value(nil))
            }
        } catch {
            outcome = .failure(GatewayFailure(error))
        }
        activity.finished(job.kind, since: started)
        // The value itself reaches `state` as the source's `valueUpdated` event, in order with
        // the accessory's other changes; publishing it from here could put it after a newer one.
        // False when the watchdog has answered `timeout` meanwhile: no second answer.
        guard work.deadlines.finish(token) else { return }
        await complete(job, outcome)
    }

    /// Hands a job's outcome to whoever waits, once: a second (a late worker after the
    /// watchdog, anything after `stop`) finds no one.
    func complete(_ job: Job, _ outcome: GatewayOutcome) {
        // A value read or written on request is never held back by `scope.rate-limits`.
        if let node = job.node, case .success(.value(let value?)) = outcome,
            rateLimiter.answered(node, value, current: currentValue(node.address))
        {
            release(node.address)
        }
        if case .success = outcome { lastSeen.heard(job.accessoryID) }
        guard let then = awaiting.take(job.ticket) else { return }
        guard job.isPart else { return answered(job.kind, job.label, outcome, then) }
        activity.answered(job.label, op: job.kind, outcome)
        then(self, outcome)
    }

    /// Answers every command that overstays its deadline; runs until cancelled.
    /// Every 100 ms while commands come; after a second with none, it waits for the next one
    /// (`RequestDeadlines.waitForWork`), so an idle gateway does not wake for it.
    nonisolated func watchDeadlines() async {
        let timeout = config.requestTimeout
        var wakes = work.deadlines.wakes.makeAsyncIterator()
        var quietSince: ContinuousClock.Instant?
        while !Task.isCancelled {
            if work.deadlines.isEmpty {
                let now = clock.now
                if let since = quietSince, now - since >= .seconds(1) {
                    await work.deadlines.waitForWork(&wakes)
                    quietSince = nil
                } else if quietSince == nil {
                    quietSince = now
                }
            } else {
                quietSince = nil
            }
            try? await clock.sleep(for: .milliseconds(100))
            for job in work.deadlines.takeExpired(now: clock.now) {
                let failure = GatewayFailure(
                    code: .timeout, message: "the accessory did not answer within \(timeout) s",
                    hapStatus: AccessoryError.Status.timedOut.rawValue)
                await complete(job, .failure(failure))
            }
            await answerLocally(
                work.deadlines.takeExpiredLocal(now: clock.now), .timeout,
                "no answer within \(LocalRequests.timeout(config)) s")
        }
    }
}
