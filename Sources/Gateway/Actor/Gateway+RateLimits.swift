import HomeModel

/// `scope.rate-limits` on the actor: the values released when their window closes. The
/// decisions for each change (`update` asks `RateLimiter.passes`) and for a `get`'s answer
/// (`RateLimiter.answered`) are `RateLimiter`'s; the windows run on `clock`.
extension Gateway {
    /// Publishes the latest value of `address`, its window closed (or a `get` asked for it).
    func release(_ address: CharacteristicAddress) {
        guard isStarted, let node = publishedTree.characteristic(address), let value = currentValue(address) else {
            return
        }
        let text = ValueCodec.text(value, metadata: node.characteristic.metadata)
        guard !rateLimiter.shows(address, text) else { return }
        rateLimiter.published(address, value, text: text, at: clock.now)
        publishState(node, value, text: text)
    }

    /// Releases each held value when its window closes; runs until cancelled, then releases
    /// what it holds (the gateway stopping: the latest values go out before `offline`). With
    /// nothing held it waits for a wake-up and never wakes on its own.
    func runRateLimits() async {
        let clock = self.clock, wake = rateLimiter.wake
        while !Task.isCancelled {
            let due = rateLimiter.nextDue
            wake.sleeping(until: due)
            if let due, clock.now >= due {
                for address in rateLimiter.takeDue(now: clock.now) { release(address) }
                continue
            }
            // The window's end and an earlier one (a value held for a shorter interval) race;
            // the first to come ends the other.
            await withTaskGroup(of: Void.self) { group in
                if let due { group.addTask { try? await clock.sleep(until: due) } }
                group.addTask { await wake.wait() }
                await group.next()
                group.cancelAll()
            }
        }
        wake.sleeping(until: nil)
        for address in rateLimiter.takeAll() { release(address) }
    }
}
