import HomeModel

/// Views beside the MQTT topics (outputs on their own connection, the web page) observe the published home; they ask
/// through `perform` (`Gateway+Commands`) and `request(topic:payload:)` (`Gateway+Replies`).
extension Gateway {
    /// Changes from now on, starting with a snapshot once the gateway is online; finishes when
    /// the gateway stops.
    public func observe() -> AsyncStream<GatewayChange> {
        let (stream, continuation) = AsyncStream<GatewayChange>.makeStream()
        guard !isStopped else {
            continuation.finish()
            return stream
        }
        let key = observers.add(continuation)
        // Synchronous: the table is behind its own lock, so no task is needed to reach the actor.
        continuation.onTermination = { [observers] _ in observers.remove(key) }
        if isStarted { continuation.yield(.snapshot(snapshot)) }
        return stream
    }

    /// The published tree with its values and the connection, as an observer starts from.
    var snapshot: GatewaySnapshot {
        GatewaySnapshot(of: publishedTree, isConnected: mqtt.connectionState.isConnected, value: currentValue)
    }

    /// Every accessory heard from since it was described, by id (`LastSeen`); empty when
    /// `last-seen-interval` is 0. A view reads it when it wants to (it changes with every value
    /// heard: no observer is told each time).
    public var lastSeenByAccessory: [String: AccessorySeen] { lastSeen.records }

    /// Tells every observer; the snapshot is made only when someone observes.
    func notifyObservers(_ change: @autoclosure () -> GatewayChange) {
        guard !observers.isEmpty else { return }
        observers.yield(change())
    }
}
