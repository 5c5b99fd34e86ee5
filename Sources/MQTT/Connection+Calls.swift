internal import CMosquitto
import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

// What other threads ask of a connection: stop, wait for the CONNACK or the end, publish,
// subscribe and unsubscribe. The checks of topics and filters are in Connection+Validation.swift.
extension Connection {
    // MARK: Control from other threads

    /// Asks the network thread to end; true when it is connected, so has a DISCONNECT to send.
    @discardableResult
    func requestStop(clean: Bool) -> Bool {
        let (released, connected) = control.withLock { state -> ([CheckedContinuation<Outcome, Never>], Bool) in
            guard !state.stopRequested else { return ([], state.connected) }
            state.stopRequested = true
            state.cleanStop = clean
            return (state.takeWaiters(.connect) + state.takeWaiters(.capacity), state.connected)
        }
        for waiter in released { waiter.resume(returning: .failure(.closed)) }
        waker?.wake()
        return connected
    }

    /// Suspends until `immediate` yields an outcome or the waiter is resumed; cancellation resumes it.
    private func suspend(_ kind: WaiterKind, immediate: (inout Control) -> Outcome?) async -> Outcome {
        let id = control.withLock { state -> UInt64 in
            state.nextWaiterID += 1
            return state.nextWaiterID
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Outcome, Never>) in
                let now = control.withLock { state -> Outcome? in
                    if let outcome = immediate(&state) { return outcome }
                    // Checked under the lock: a cancel handler that already ran found nothing to resume.
                    if Task.isCancelled { return .failure(.cancelled) }
                    state.waiters[id] = (kind, continuation)
                    return nil
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            control.withLock { $0.waiters.removeValue(forKey: id) }?.continuation.resume(
                returning: .failure(.cancelled))
        }
    }

    func awaitConnected(timeout: Double) async -> Outcome {
        await withTaskGroup(of: Outcome?.self) { group in
            group.addTask {
                await self.suspend(.connect) { state in
                    if state.connected { return .success(()) }
                    if state.stopRequested || state.finished { return .failure(state.finalError ?? .closed) }
                    return nil
                }
            }
            group.addTask {
                do {
                    try await Task.sleep(for: .seconds(timeout))
                } catch {
                    return nil
                }
                return .failure(
                    MQTTError(
                        code: .timeout,
                        message: "could not connect to \(self.configuration.host):\(self.configuration.port) "
                            + "within \(timeout) s"))
            }
            var result: Outcome = .failure(.cancelled)
            for await outcome in group {
                if let outcome {
                    result = outcome
                    break
                }
            }
            group.cancelAll()
            return result
        }
    }

    /// Waits, up to `timeout` seconds, for the network thread to finish, whether or not the
    /// caller is cancelled: no cancellation handler, and the timeout is a dispatch timer that
    /// resumes the waiter, not a sleep that cancellation would end at once. The waiter is
    /// resumed exactly once: by the thread's end or by the timer, whichever removes it first.
    func awaitFinishedEvenIfCancelled(timeout: Double) async {
        let id = control.withLock { state -> UInt64 in
            state.nextWaiterID += 1
            return state.nextWaiterID
        }
        _ = await withCheckedContinuation { (continuation: CheckedContinuation<Outcome, Never>) in
            let finished = control.withLock { state -> Bool in
                if state.finished { return true }
                state.waiters[id] = (.finish, continuation)
                return false
            }
            if finished {
                continuation.resume(returning: .success(()))
                return
            }
            DispatchQueue.global().asyncAfter(deadline: .now() + max(0, timeout)) {
                self.control.withLock { $0.waiters.removeValue(forKey: id) }?.continuation.resume(
                    returning: .success(()))
            }
        }
    }

    /// Marks the start of a call into libmosquitto from another thread; false when stopping.
    /// While the network thread makes the handle anew (`replaceHandle`, a few milliseconds)
    /// the call waits for it.
    private func enter() -> Bool {
        while true {
            let entered = control.withLock { state -> Bool? in
                guard !state.stopRequested else { return false }
                if state.replacing { return nil }
                state.users += 1
                return true
            }
            if let entered { return entered }
            usleep(1000)
        }
    }

    private func leave() {
        control.withLock { $0.users -= 1 }
        wakeIfWaiting()
    }

    // MARK: Publish

    func publish(
        _ topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool, properties: MQTTPublishProperties
    ) async -> Outcome {
        while true {
            if let outcome = publishWithoutWaiting(
                topic, payload: payload, qos: qos, retain: retain, properties: properties)
            {
                return outcome
            }
            let outcome = await suspend(.capacity) { state in
                if state.stopRequested || state.finished { return .failure(.closed) }
                let ready = !state.replacing && !state.awaitingFirstConnect
                let room = state.outstanding.hasRoom(
                    limit: configuration.maxQueuedPublishes, bytes: configuration.maxQueuedBytes)
                return room && ready ? .success(()) : nil
            }
            if case .failure = outcome { return outcome }
        }
    }

    /// `publish` when it needs no waiting; nil when it would wait for room (the outstanding limit).
    /// The one place the broker's limits apply: QoS above its maximum is lowered, the retain
    /// flag dropped when it has no retained messages, and a packet larger than its maximum
    /// is refused here, unsent (a broker that receives one drops the connection).
    func publishWithoutWaiting(
        _ topic: String, payload: [UInt8], qos requested: MQTTQoS, retain requestedRetain: Bool,
        properties: MQTTPublishProperties
    ) -> Outcome? {
        guard payload.count <= 268_435_455 else {
            return .failure(MQTTError(code: .payloadTooLarge, message: "payload of \(payload.count) bytes"))
        }
        let levels = MQTTTopicShape.levels(topic)
        guard levels <= configuration.maximumTopicLevels else {
            return .failure(PublishCheck.topicTooDeep(topic, levels: levels, limit: configuration.maximumTopicLevels))
        }
        let limit = configuration.maxQueuedPublishes
        enum Decision { case fail(MQTTError), drop, wait, go(UInt64, MQTTQoS, Bool, size: Int, order: UInt64) }
        let decision = control.withLock { state -> Decision in
            if state.stopRequested || state.finished { return .fail(.closed) }
            let qos = state.limits.qos(for: requested)
            let size = MQTTBrokerLimits.publishPacketSize(
                topic: topic, payloadCount: payload.count, qos: qos, properties: properties,
                protocolVersion: configuration.protocolVersion)
            guard state.limits.allows(packetSize: size) else {
                return .fail(Connection.tooLarge(topic, size: size, limits: state.limits))
            }
            if !state.refusedTopics.isEmpty, state.refusedTopics.contains(topic) {
                return .fail(PublishCheck.refusedBefore(topic))
            }
            // A handle being made anew, or not yet set up by its first connect (which would
            // drop the retain flag), takes nothing new.
            if state.replacing || state.awaitingFirstConnect { return .wait }
            if qos == .atMostOnce && !state.connected { return state.everConnected ? .drop : .fail(.notConnected) }
            if !state.outstanding.hasRoom(limit: limit, bytes: configuration.maxQueuedBytes) { return .wait }
            state.users += 1
            state.sendOrder += 1
            return .go(
                state.epoch, qos, requestedRetain && state.limits.retainAvailable, size: size, order: state.sendOrder)
        }
        switch decision {
        case .fail(let error):
            return .failure(error)
        case .drop:
            return .success(())
        case .wait:
            return nil
        case .go(let epoch, let qos, let retain, let size, let order):
            var mid: Int32 = 0
            let rc = send(topic, payload: payload, qos: qos, retain: retain, properties: properties, mid: &mid)
            let savedErrno = errno
            // QoS 1/2 while the socket is down: libmosquitto keeps the message queued and returns NO_CONN.
            let queued =
                rc == MOSQ_ERR_SUCCESS.rawValue || (rc == MOSQ_ERR_NO_CONN.rawValue && qos != .atMostOnce)
            let sent = Sent(
                topic: topic, qos: qos, epoch: epoch, size: size, levels: levels, order: order, at: .now,
                message: qos == .atMostOnce || payload.count > Self.largestCopyKept
                    ? nil : PendingPublish(payload: payload, retain: retain, properties: properties))
            let early = control.withLock { state -> Int32? in
                state.users -= 1
                guard queued else { return nil }
                // Acknowledged before this thread got here: settled now (a refusal outside the lock).
                if let early = state.earlyPublishDone.removeValue(forKey: mid) {
                    // It was in libmosquitto's hands beside the others all the same. On a busy
                    // machine every page of a test could be acknowledged before its sender got
                    // here, and a high water that left them out read 0.
                    state.highWater = max(state.highWater, state.outstanding.count + 1)
                    guard early.reason >= 0x80 else {
                        state.settleKept(sent, protocolVersion: configuration.protocolVersion)
                        return nil
                    }
                    return early.reason
                }
                // A QoS 0 message queued on a connection that has since dropped is already gone.
                if qos == .atMostOnce && epoch != state.epoch { return nil }
                state.outstanding.insert(sent, mid: mid)
                state.highWater = max(state.highWater, state.outstanding.count)
                return nil
            }
            if let early { settle(sent, reason: early) }
            wakeIfWaiting()
            if queued || (rc == MOSQ_ERR_NO_CONN.rawValue && qos == .atMostOnce) { return .success(()) }
            return .failure(MQTTError(mosquitto: rc, errno: savedErrno))
        }
    }

    /// The largest payload kept to hand to a handle made anew (`replaceHandle`): holding a
    /// large home's tree until its PUBACK would double its memory at start-up. A larger
    /// message is a retained document, which the gateway publishes again after a reconnect.
    static let largestCopyKept = 65_536

    static func tooLarge(_ topic: String, size: Int, limits: MQTTBrokerLimits) -> MQTTError {
        let limit = limits.maximumPacketSize ?? MQTTBrokerLimits.protocolMaximumPacketSize
        let source =
            limits.brokerMaximumPacketSize == limit ? "the broker's maximum packet size" : "the maximum packet size"
        return MQTTError(
            code: .packetTooLarge,
            message:
                "a publish to '\(MQTTTopicShape.describe(topic))' would be a packet of \(size) bytes, more than "
                + "\(source) (\(limit)); not sent"
        )
    }

    func send(
        _ topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool, properties: MQTTPublishProperties,
        mid: inout Int32
    ) -> Int32 {
        var list: OpaquePointer?
        defer { mosquitto_property_free_all(&list) }
        if configuration.protocolVersion == .v5, PropertyLists.isPlain(properties),
            let kept = propertyLists.list(for: properties)
        {
            return publish(topic, payload: payload, qos: qos, retain: retain, properties: kept, mid: &mid)
        }
        if configuration.protocolVersion == .v5 {
            let rc = PropertyLists.add(properties, to: &list)
            if rc != MOSQ_ERR_SUCCESS.rawValue { return rc }
        }
        return publish(topic, payload: payload, qos: qos, retain: retain, properties: list, mid: &mid)
    }

    private func publish(
        _ topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool, properties: OpaquePointer?, mid: inout Int32
    ) -> Int32 {
        errno = 0
        return topic.withCString { topicPointer in
            payload.withUnsafeBytes { bytes in
                mosquitto_publish_v5(
                    h, &mid, topicPointer, Int32(bytes.count), bytes.baseAddress, Int32(qos.rawValue), retain,
                    properties)
            }
        }
    }

    // MARK: Subscribe

    struct QoSGroup {
        var qos: MQTTQoS
        var filters: [String]
    }

    static func groupByQoS(_ filters: [(String, MQTTQoS)]) -> [QoSGroup] {
        MQTTQoS.allCases.compactMap { qos in
            let matching = filters.filter { $0.1 == qos }.map(\.0)
            return matching.isEmpty ? nil : QoSGroup(qos: qos, filters: matching)
        }
    }

    /// MQTT 5 subscription options from the configuration (3.1.1 has none); `ownMessages`
    /// overrides the configuration's No Local for one subscription.
    private func subscriptionOptions(ownMessages: Bool = false) -> Int32 {
        guard configuration.protocolVersion == .v5 else { return 0 }
        var options: Int32 = 0
        if configuration.noLocal && !ownMessages { options |= Int32(MQTT_SUB_OPT_NO_LOCAL.rawValue) }
        if configuration.retainAsPublished { options |= Int32(MQTT_SUB_OPT_RETAIN_AS_PUBLISHED.rawValue) }
        return options
    }

    func subscribeCall(_ filters: [String], qos: MQTTQoS, ownMessages: Bool = false) -> (Int32, Int32) {
        var mid: Int32 = 0
        let copies = filters.map { strdup($0) }
        defer { copies.forEach { free($0) } }
        let rc = copies.withUnsafeBufferPointer { buffer in
            mosquitto_subscribe_multiple(
                h, &mid, Int32(buffer.count), buffer.baseAddress, Int32(qos.rawValue),
                subscriptionOptions(ownMessages: ownMessages), nil)
        }
        return (rc, mid)
    }

    func subscribe(_ filters: [(String, MQTTQoS)], ownMessages: Bool = false) async -> Outcome {
        var mids: [Int32] = []
        for group in Connection.groupByQoS(filters) {
            guard enter() else { return .failure(.closed) }
            let (rc, mid) = subscribeCall(group.filters, qos: group.qos, ownMessages: ownMessages)
            leave()
            if rc == MOSQ_ERR_NO_CONN.rawValue {
                // Lost the connection meanwhile: the filters are remembered and restored on reconnect.
                core.state.withLock { state in for filter in group.filters { state.unconfirmed.insert(filter) } }
                continue
            }
            guard rc == MOSQ_ERR_SUCCESS.rawValue else { return .failure(MQTTError(mosquitto: rc)) }
            mids.append(mid)
        }
        for mid in mids {
            let outcome = await awaitAck(mid)
            if case .failure = outcome { return outcome }
        }
        return .success(())
    }

    func unsubscribe(_ filter: String) async -> Outcome {
        guard enter() else { return .failure(.closed) }
        var mid: Int32 = 0
        let rc = filter.withCString { mosquitto_unsubscribe_v5(h, &mid, $0, nil) }
        leave()
        if rc == MOSQ_ERR_NO_CONN.rawValue { return .success(()) }
        guard rc == MOSQ_ERR_SUCCESS.rawValue else { return .failure(MQTTError(mosquitto: rc)) }
        return await awaitAck(mid)
    }

    private func awaitAck(_ mid: Int32) async -> Outcome {
        await withCheckedContinuation { continuation in
            let now = control.withLock { state -> Outcome? in
                if let early = state.earlyAcks.removeValue(forKey: mid) { return early }
                if state.stopRequested || state.finished { return .failure(.closed) }
                // Dropped meanwhile: the filter is restored on reconnect.
                if !state.connected { return .success(()) }
                state.ackWaiters[mid] = continuation
                return nil
            }
            if let now { continuation.resume(returning: now) }
        }
    }
}
