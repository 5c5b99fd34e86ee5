import HomeModel

/// `scope.rate-limits` on the actor: the limits of each published tree, the decision for each
/// change (`update` asks), the values released when their window closes, and a `get`'s value
/// shown at once. The decisions are `RateLimiter`'s; the windows run on `clock`.
extension Gateway {
    /// The published tree changed (or the scope did): each characteristic's limit, looked up once.
    func assignRateLimits() {
        rateLimiter.assign(scope.rateLimits(of: publishedTree))
    }

    /// Whether a change of a limited characteristic goes out now. `previous` is the value the
    /// change replaces (what the broker shows, when nothing was limited before it).
    func passesRateLimit(
        _ node: TopicTree.CharacteristicNode, _ value: CharacteristicValue, text: String,
        previous: CharacteristicValue?
    ) -> Bool {
        let metadata = node.characteristic.metadata
        let before = previous.map { previous -> (String, Double?) in
            let text = ValueCodec.text(previous, metadata: metadata)
            return (text, Self.number(previous, text: text))
        }
        let decision = rateLimiter.offer(
            node.address, text: text, number: Self.number(value, text: text), previous: before, now: clock.now)
        return decision == .publish
    }

    /// A number's value at the characteristic's precision (its `state` text); nil for others.
    static func number(_ value: CharacteristicValue, text: String) -> Double? {
        switch value {
        case .int, .uint, .float: Double(text)
        case .bool, .string, .data: nil
        }
    }

    /// A `get` (or a `set`) was answered with `value`: whatever is held for it goes out now, and
    /// the value itself when its source reports it (before or after this answer).
    func rateLimitedAnswer(_ node: TopicTree.CharacteristicNode, _ value: CharacteristicValue) {
        guard !rateLimiter.isEmpty else { return }
        let metadata = node.characteristic.metadata
        let current = currentValue(node.address).map { ValueCodec.text($0, metadata: metadata) }
        let text = ValueCodec.text(value, metadata: metadata)
        if rateLimiter.read(node.address, text: text, current: current) { release(node.address) }
    }

    /// Publishes the latest value of `address`, its window closed (or a `get` asked for it).
    private func release(_ address: CharacteristicAddress) {
        guard isStarted, let node = publishedTree.characteristic(address), let value = currentValue(address) else {
            return
        }
        let text = ValueCodec.text(value, metadata: node.characteristic.metadata)
        guard !rateLimiter.shows(address, text) else { return }
        rateLimiter.published(address, text: text, number: Self.number(value, text: text), at: clock.now)
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
