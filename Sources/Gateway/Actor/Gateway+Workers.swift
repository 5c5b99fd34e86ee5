import Foundation
import HomeModel
import MQTT

/// Requests to accessories (`set`, `get`, `$toggle`, `$identify`): one worker per accessory
/// keeps them in order; each gets exactly one answer on its `result` topic, or `timeout`.
extension Gateway {
    /// Requests for one accessory go to the same worker, so they reach it in the order sent.
    func dispatch(_ job: Job) {
        switch job.kind {
        case .set: activity.requested(write: true)
        case .get: activity.requested(write: false)
        case .identify: break
        }
        if let node = tree.accessory(id: job.accessoryID), !node.accessory.isReachable {
            sendResult(
                job.resultTopic, op: job.op, id: job.id,
                .failure(
                    GatewayFailure(
                        code: .unreachable, message: "\(node.displayName) is unreachable",
                        hapStatus: AccessoryError.Status.communicationFailure.rawValue)), reply: job.reply,
                part: job.part)
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
        let token = work.deadlines.start(job, timeout: config.requestTimeout)
        let started = ContinuousClock.now
        let outcome: Result<CharacteristicValue?, GatewayFailure>
        do throws(AccessoryError) {
            switch job.kind {
            case .set(let value):
                guard let node = job.node else { return }
                try await source.write(node.address, value: value)
                outcome = .success(value)
            case .get:
                guard let node = job.node else { return }
                // At the characteristic's precision, as on `state`.
                let value = try await source.read(node.address)
                outcome = .success(ValueCodec.rounded(value, metadata: node.characteristic.metadata))
            case .identify:
                try await source.identify(accessoryID: job.accessoryID)
                outcome = .success(nil)
            }
        } catch {
            outcome = .failure(GatewayFailure(error))
        }
        activity.finished(job.op, since: started)
        // The value itself reaches `state` as the source's `valueUpdated` event, in order with
        // the accessory's other changes; publishing it from here could put it after a newer one.
        // False when the watchdog has answered `timeout` meanwhile: no second answer.
        guard work.deadlines.finish(token) else { return }
        await sendResult(job.resultTopic, op: job.op, id: job.id, outcome, reply: job.reply, part: job.part)
    }

    /// Answers every request that overstays its deadline; runs until cancelled.
    /// Every 100 ms while requests come; after a second with none, it waits for the next one
    /// (`RequestDeadlines.waitForWork`), so an idle gateway does not wake for it.
    nonisolated func watchDeadlines() async {
        let timeout = config.requestTimeout
        var wakes = work.deadlines.wakes.makeAsyncIterator()
        var quietSince: ContinuousClock.Instant?
        while !Task.isCancelled {
            if work.deadlines.isEmpty {
                let now = ContinuousClock.now
                if let since = quietSince, now - since >= .seconds(1) {
                    await work.deadlines.waitForWork(&wakes)
                    quietSince = nil
                } else if quietSince == nil {
                    quietSince = now
                }
            } else {
                quietSince = nil
            }
            try? await Task.sleep(for: .milliseconds(100))
            for job in work.deadlines.takeExpired() {
                await sendResult(
                    job.resultTopic, op: job.op, id: job.id,
                    .failure(
                        GatewayFailure(
                            code: .timeout, message: "the accessory did not answer within \(timeout) s",
                            hapStatus: AccessoryError.Status.timedOut.rawValue)), reply: job.reply, part: job.part)
            }
            let local = work.deadlines.takeExpiredLocal()
            if !local.isEmpty { await timeOutLocalRequests(local) }
        }
    }

    func sendResult(
        _ topic: String, op: String, id: JSONValue, _ outcome: Result<CharacteristicValue?, GatewayFailure>,
        reply: Reply? = nil, part: WriteMany.Part? = nil
    ) {
        activity.answered(topic, op: op, outcome)
        if let part {
            record(part, outcome)
            return
        }
        switch outcome {
        case .success(let value):
            answer(topic, json: Payloads.result(id: id, op: op, value: value), reply: reply)
        case .failure(let failure):
            activity.failed()
            answer(topic, json: Payloads.error(id: id, op: op, failure), reply: reply)
        }
    }
}
