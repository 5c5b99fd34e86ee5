internal import CMosquitto
import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

// The connection's network thread: the first connect, the loop, reconnects with backoff, and
// the shutdown that destroys the handle.
extension Connection {
    // MARK: Network thread

    func start() {
        mosquitto_user_data_set(h, Unmanaged.passRetained(self).toOpaque())
        // Named from inside (`ThreadName.set` says why).
        let thread = Thread { [self] in
            ThreadName.set("mqtt-network")
            self.networkThreadMain()
        }
        thread.start()
    }

    private var stopRequested: Bool { control.withLock { $0.stopRequested } }

    private func networkThreadMain() {
        var attempt = 0
        var first = true
        // A handle made anew (`replaceHandle`) connects as the first time.
        var fresh = true
        var lastError: MQTTError?
        while !stopRequested {
            if !first { core.setState(.reconnecting(lastError), from: self) }
            first = false
            var wasConnected = false
            if fresh, let error = configureIfNeeded() {
                // A handle made anew that could not be configured (a TLS file unreadable for a
                // moment): tried again at the next attempt.
                lastError = error
            } else {
                let (rc, savedErrno) = fresh ? connectFirst() : reconnect()
                // connect_init has set the handle up: a new one's kept publishes can go in now.
                if fresh { resendAfterConnect() }
                fresh = false
                if rc == MOSQ_ERR_SUCCESS.rawValue {
                    (lastError, wasConnected) = runUntilConnectionEnds()
                } else {
                    lastError = MQTTError(mosquitto: rc, errno: savedErrno, detail: takeLastLogError())
                }
            }
            if stopRequested { break }
            let error = lastError ?? MQTTError(code: .connectionLost, message: "the connection ended")
            // Before anything else: libmosquitto would send the message the broker refused
            // again at the reconnect.
            var learned: MQTTLearnedLimit?
            if wasConnected { (fresh, learned) = dropCulprit(after: error) }
            let (everConnected, waiters) = connectionDropped(error: error)
            for waiter in waiters { waiter.resume(returning: .failure(error)) }
            if !everConnected {
                // The first connection failed: connect() reports it; no background retrying.
                control.withLock { $0.finalError = error }
                break
            }
            logger.info("MQTT connection lost, reconnecting", metadata: ["error": "\(error)"])
            core.setState(.reconnecting(error), from: self)
            // Told once the loss is: an observer does not act on a connection that is gone.
            if let learned { core.learned(learned) }
            if wasConnected { attempt = 0 }
            let delay = min(
                configuration.reconnectDelayMax, configuration.reconnectDelayMin * pow(2, Double(min(attempt, 30))))
            attempt += 1
            sleepUnlessStopped(delay)
        }
        shutdown()
    }

    private func connectFirst() -> (Int32, Int32) {
        var properties: OpaquePointer?
        defer { mosquitto_property_free_all(&properties) }
        if configuration.protocolVersion == .v5 {
            let expiry = configuration.sessionExpiry ?? (configuration.cleanStart ? nil : UInt32.max)
            if let expiry, expiry > 0 {
                mosquitto_property_add_int32(
                    &properties, Int32(MQTT_PROP_SESSION_EXPIRY_INTERVAL.rawValue), expiry)
            }
        }
        errno = 0
        // Blocking TCP (and TLS) connect on this thread; the CONNECT properties are kept for reconnects.
        let rc = configuration.host.withCString { host in
            mosquitto_connect_bind_v5(
                h, host, Int32(configuration.port), Int32(configuration.keepAlive), nil, properties)
        }
        return (rc, errno)
    }

    private func reconnect() -> (Int32, Int32) {
        Connection.installLogCallback(h)
        errno = 0
        let rc = mosquitto_reconnect(h)
        return (rc, errno)
    }

    /// Runs the loop until the connection drops (its error) or a stop is requested (nil error).
    private func runUntilConnectionEnds() -> (MQTTError?, wasConnected: Bool) {
        let deadline = Date().addingTimeInterval(configuration.connectTimeout)
        var guest: (any MQTTNetworkThreadGuest)?
        var descriptors = [pollfd](repeating: pollfd(), count: 2)
        defer { _ = follow(nil, hosted: guest) }
        while true {
            guest = follow(core.state.withLock { $0.guest }, hosted: guest)
            errno = 0
            let rc: Int32
            if let guest, let waker {
                rc = turn(hosting: guest, waker: waker, &descriptors)
            } else {
                rc = mosquitto_loop(h, 100, 1)
            }
            let savedErrno = errno
            let (stop, refusal, serverDisconnect, connected) = control.withLock { state in
                let taken = (state.stopRequested, state.refusal, state.serverDisconnect, state.connected)
                state.refusal = nil
                state.serverDisconnect = nil
                return taken
            }
            if stop { return (nil, connected) }
            if let refusal { return (refusal, connected) }
            if let serverDisconnect { return (serverDisconnect, connected) }
            if rc != MOSQ_ERR_SUCCESS.rawValue {
                return (MQTTError(mosquitto: rc, errno: savedErrno, detail: takeLastLogError()), connected)
            }
            if !connected && Date() > deadline {
                return (
                    MQTTError(
                        code: .timeout,
                        message: "no CONNACK from \(configuration.host):\(configuration.port) within "
                            + "\(configuration.connectTimeout) s"),
                    false
                )
            }
        }
    }

    private func takeLastLogError() -> String? {
        control.withLock { state in
            defer { state.lastLogError = nil }
            return state.lastLogError
        }
    }

    /// Bookkeeping when a connection (or attempt) ended: QoS 0 messages queued in libmosquitto are discarded
    /// by it, pending SUBACK/UNSUBACK waiters are released (the filters are restored on reconnect).
    private func connectionDropped(error: MQTTError) -> (Bool, [CheckedContinuation<Outcome, Never>]) {
        let (everConnected, connectWaiters, released) = control.withLock { state in
            state.connected = false
            state.epoch += 1
            state.outstanding = state.outstanding.filter { $0.value.qos != .atMostOnce }
            state.connectedAt = nil
            state.earlyPublishDone.removeAll()
            state.writtenUnconfirmed.removeAll()
            state.earlyAcks.removeAll()
            state.ignoredAcks.removeAll()
            var released = Array(state.ackWaiters.values)
            state.ackWaiters.removeAll()
            released += state.takeCapacityWaiters(configuration)
            let connectWaiters = state.everConnected ? [] : state.takeWaiters(.connect)
            return (state.everConnected, connectWaiters, released)
        }
        for waiter in released { waiter.resume(returning: .success(())) }
        return (everConnected, connectWaiters)
    }

    private func sleepUnlessStopped(_ seconds: Double) {
        let end = Date().addingTimeInterval(seconds)
        while !stopRequested {
            let remaining = end.timeIntervalSinceNow
            if remaining <= 0 { return }
            usleep(UInt32(min(remaining, 0.05) * 1_000_000))
        }
    }

    /// Writes what libmosquitto has queued, the DISCONNECT last, and reads nothing: once
    /// `mosquitto_disconnect` has run, a PUBLISH read from the broker (a set, our own `offline`
    /// echoed back) is a protocol error to libmosquitto (handle_publish.c wants an active
    /// state), which closes the socket with the DISCONNECT unsent, and the broker publishes
    /// the will. libmosquitto closes its socket itself once the DISCONNECT is written; a
    /// second descriptor keeps the connection open for `drainUntilClosed`.
    private func writeDisconnect() {
        let socket = mosquitto_socket(h)
        guard socket >= 0 else { return }
        let held = dup(socket)
        let end = Date().addingTimeInterval(1)
        while Date() < end, mosquitto_socket(h) >= 0 {
            var descriptor = pollfd(fd: socket, events: Int16(POLLOUT), revents: 0)
            _ = poll(&descriptor, 1, 50)
            if mosquitto_loop_write(h, 1) != MOSQ_ERR_SUCCESS.rawValue { break }
        }
        if held >= 0 { drainUntilClosed(held) }
    }

    /// Reads and drops what the broker still sends until it closes the connection, having read
    /// the DISCONNECT (at most a second). Closing a socket with unread data resets the
    /// connection, and a broker whose write to it then fails (mosquitto: "Broken pipe") takes
    /// it for lost, without reading the DISCONNECT, and publishes the will.
    private func drainUntilClosed(_ descriptor: Int32) {
        defer { close(descriptor) }
        let end = Date().addingTimeInterval(1)
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while Date() < end {
            var polled = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let ready = poll(&polled, 1, 50)
            if ready < 0 && errno != EINTR { return }
            guard ready > 0 else { continue }
            if read(descriptor, &buffer, buffer.count) <= 0 { return }
        }
    }

    private func shutdown() {
        let (connected, clean) = control.withLock { ($0.connected, $0.cleanStop) }
        if connected && clean {
            // Let accepted publishes go out (bounded), then DISCONNECT so the broker drops the will.
            let drainEnd = Date().addingTimeInterval(2)
            while control.withLock({ !$0.outstanding.isEmpty }) && Date() < drainEnd {
                if mosquitto_loop(h, 50, 1) != MOSQ_ERR_SUCCESS.rawValue { break }
            }
        }
        if connected, mosquitto_disconnect_v5(h, 0, nil) == MOSQ_ERR_SUCCESS.rawValue {
            writeDisconnect()
        }
        // No new user can enter (stopRequested is set); wait for calls already inside libmosquitto.
        while control.withLock({ $0.users > 0 }) { usleep(1000) }
        mosquitto_destroy(h)
        let (waiters, acks, finalError) = control.withLock { state in
            state.finished = true
            state.connected = false
            state.outstanding.removeAll()
            let waiters = state.waiters.values.map(\.continuation)
            state.waiters.removeAll()
            let acks = Array(state.ackWaiters.values)
            state.ackWaiters.removeAll()
            return (waiters, acks, state.finalError)
        }
        for waiter in acks { waiter.resume(returning: .failure(.closed)) }
        // Finish waiters succeed; anyone else waiting learns why the session ended.
        for waiter in waiters { waiter.resume(returning: .failure(finalError ?? .closed)) }
        core.detach(self, finalState: .disconnected(finalError))
        logger.debug("MQTT network thread finished")
        Unmanaged.passUnretained(self).release()
    }
}
