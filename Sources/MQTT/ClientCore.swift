import Logging
import Synchronization

/// State that outlives a single connection: the public connection state, streams and remembered subscriptions.
final class ClientCore: Sendable {
    struct State {
        var connectionState: MQTTConnectionState = .idle
        var connection: Connection?
        var subscriptions: [(filter: String, qos: MQTTQoS)] = []
        /// Filters added while not connected: sent on the next CONNACK even when the session is present.
        var unconfirmed: Set<String> = []
        var messageContinuations: [UInt64: AsyncStream<MQTTMessage>.Continuation] = [:]
        var stateContinuations: [UInt64: AsyncStream<MQTTConnectionState>.Continuation] = [:]
        var learnedContinuations: [UInt64: AsyncStream<MQTTLearnedLimit>.Continuation] = [:]
        var nextID: UInt64 = 0
        /// The broker refused MQTT 5 and accepted 3.1.1: every later connection uses 3.1.1.
        var fellBackToMQTT311 = false
        /// Whether the broker's address answered in TLS, once asked (`BrokerTLSProbe`).
        var answersInTLS: Bool?
        /// The limits of the last CONNACK, to tell when a reconnect brings others.
        var limits: MQTTBrokerLimits?
        /// What the network thread runs beside its own work (`MQTTClient.host(_:)`).
        var guest: (any MQTTNetworkThreadGuest)?
    }

    let state = Mutex(State())

    /// Changes the state if `connection` is still the current one (a late, superseded thread must not).
    /// Yields inside the lock so that observers see changes in order; `yield` never calls back into us.
    func setState(_ new: MQTTConnectionState, from connection: Connection?, onlyIfNotIdle: Bool = false) {
        state.withLock { state in
            if let connection, state.connection !== connection { return }
            if onlyIfNotIdle, state.connectionState == .idle { return }
            guard state.connectionState != new else { return }
            state.connectionState = new
            for continuation in state.stateContinuations.values { continuation.yield(new) }
        }
    }

    func detach(_ connection: Connection, finalState: MQTTConnectionState) {
        state.withLock { state in
            guard state.connection === connection else { return }
            state.connection = nil
            guard state.connectionState != finalState else { return }
            state.connectionState = finalState
            for continuation in state.stateContinuations.values { continuation.yield(finalState) }
        }
    }

    func deliver(_ message: MQTTMessage) {
        state.withLock { state in
            for continuation in state.messageContinuations.values { continuation.yield(message) }
        }
    }

    func learned(_ limit: MQTTLearnedLimit) {
        state.withLock { state in
            for continuation in state.learnedContinuations.values { continuation.yield(limit) }
        }
    }

    /// Finishing runs `onTermination` handlers, which take the lock: so finish outside it.
    func finishStreams() {
        let (messages, states, learned) = state.withLock { state in
            let taken = (
                Array(state.messageContinuations.values), Array(state.stateContinuations.values),
                Array(state.learnedContinuations.values)
            )
            state.messageContinuations.removeAll()
            state.stateContinuations.removeAll()
            state.learnedContinuations.removeAll()
            return taken
        }
        for continuation in messages { continuation.finish() }
        for continuation in states { continuation.finish() }
        for continuation in learned { continuation.finish() }
    }

    /// Records filters; returns the connection to send them on, or nil when not connected (then they are
    /// marked unconfirmed and sent at the next CONNACK).
    func remember(_ filters: [(String, MQTTQoS)]) -> Connection? {
        let connection = state.withLock { state -> Connection? in
            for (filter, qos) in filters {
                if let index = state.subscriptions.firstIndex(where: { $0.filter == filter }) {
                    state.subscriptions[index].qos = qos
                } else {
                    state.subscriptions.append((filter, qos))
                }
                state.unconfirmed.insert(filter)
            }
            return state.connection
        }
        // Checked after recording: the network thread marks itself connected before it reads the list.
        guard let connection, connection.control.withLock({ $0.connected }) else { return nil }
        state.withLock { state in for (filter, _) in filters { state.unconfirmed.remove(filter) } }
        return connection
    }

    func forget(_ filters: [String]) {
        state.withLock { state in
            state.subscriptions.removeAll { filters.contains($0.filter) }
            for filter in filters { state.unconfirmed.remove(filter) }
        }
    }

    /// Logs the broker's limits when a reconnect brings other ones than the connection before
    /// (a broker replaced or reconfigured behind the same address); the first ones are the
    /// client user's to report (`MQTTClient.brokerLimits`).
    func reportLimits(_ limits: MQTTBrokerLimits, logger: Logger) {
        let previous = state.withLock { state in
            defer { state.limits = limits }
            return state.limits
        }
        // A limit the client learned is its own, not the broker's change.
        var told = limits
        told.learnedMaximumPacketSize = previous?.learnedMaximumPacketSize
        guard let previous, previous != told else { return }
        logger.warning("the broker's limits changed at the reconnect", metadata: ["limits": "\(limits)"])
    }

    /// What to (re)subscribe after a CONNACK.
    func subscriptionsToRestore(sessionPresent: Bool) -> [(String, MQTTQoS)] {
        state.withLock { state in
            let list = state.subscriptions.filter { !sessionPresent || state.unconfirmed.contains($0.filter) }
            state.unconfirmed.removeAll()
            return list.map { ($0.filter, $0.qos) }
        }
    }
}
