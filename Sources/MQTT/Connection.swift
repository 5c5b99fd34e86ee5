internal import CMosquitto
import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A libmosquitto handle pointer. The network thread owns it; other threads only use it inside
/// `enter`/`leave`, which keeps it alive.
struct MosquittoHandle: @unchecked Sendable {
    let raw: OpaquePointer
}

typealias Outcome = Result<Void, MQTTError>

/// One libmosquitto session (handle + network thread), from `connect()` until it stops. Also the `Unmanaged`
/// userdata box the C callbacks reach.
final class Connection: Sendable {
    enum WaiterKind { case connect, capacity, finish }

    struct Control {
        var stopRequested = false
        var cleanStop = false
        /// Calls from other threads currently inside libmosquitto with this handle.
        var users = 0
        /// CONNACK accepted and the connection not lost since.
        var connected = false
        var everConnected = false
        var finished = false
        var finalError: MQTTError?
        /// A broker refusal seen in a callback, picked up by the network thread.
        var refusal: MQTTError?
        /// A server DISCONNECT reason (MQTT 5), picked up by the network thread.
        var serverDisconnect: MQTTError?
        var lastLogError: String?
        /// Incremented when a connection drops; QoS 0 publishes of older epochs are gone.
        var epoch: UInt64 = 0
        var outstanding: [Int32: (qos: MQTTQoS, epoch: UInt64)] = [:]
        /// `on_publish` that beat the publishing thread's bookkeeping.
        var earlyPublishDone: [Int32: UInt64] = [:]
        var highWater = 0
        var ackWaiters: [Int32: CheckedContinuation<Outcome, Never>] = [:]
        var earlyAcks: [Int32: Outcome] = [:]
        /// Mids of resubscriptions made by the network thread, whose SUBACK nobody awaits.
        var ignoredAcks: Set<Int32> = []
        var waiters: [UInt64: (kind: WaiterKind, continuation: CheckedContinuation<Outcome, Never>)] = [:]
        var nextWaiterID: UInt64 = 0
    }

    let handle: MosquittoHandle
    let core: ClientCore
    let configuration: MQTTConfiguration
    let logger: Logger
    let control = Mutex(Control())

    init(handle: MosquittoHandle, core: ClientCore, configuration: MQTTConfiguration, logger: Logger) {
        self.handle = handle
        self.core = core
        self.configuration = configuration
        self.logger = logger
    }

    private var h: OpaquePointer { handle.raw }

    // MARK: Handle setup

    static func makeHandle(_ configuration: MQTTConfiguration) throws(MQTTError) -> MosquittoHandle {
        let config = configuration
        guard !config.host.isEmpty else { throw .invalidConfiguration("host is empty") }
        guard (1...65535).contains(config.port) else { throw .invalidConfiguration("port \(config.port) out of range") }
        guard (5...65535).contains(config.keepAlive) else {
            throw .invalidConfiguration("keepAlive must be 5...65535 seconds, not \(config.keepAlive)")
        }
        guard config.connectTimeout > 0, config.reconnectDelayMin > 0,
            config.reconnectDelayMax >= config.reconnectDelayMin
        else { throw .invalidConfiguration("timeouts and reconnect delays must be positive (max >= min)") }
        guard config.maxQueuedPublishes >= 1 else { throw .invalidConfiguration("maxQueuedPublishes must be >= 1") }
        guard config.cleanStart || !config.clientID.isEmpty else {
            throw .invalidConfiguration("a persistent session (cleanStart = false) needs a client ID")
        }
        guard config.clientID.utf8.count <= 65535, !config.clientID.utf8.contains(0) else {
            throw .invalidConfiguration("client ID is too long or contains NUL")
        }

        errno = 0
        let created: OpaquePointer? =
            config.clientID.isEmpty
            ? mosquitto_new(nil, config.cleanStart, nil)
            : config.clientID.withCString { mosquitto_new($0, config.cleanStart, nil) }
        guard let raw = created else {
            throw MQTTError(code: .noMemory, message: "mosquitto_new failed: \(String(cString: strerror(errno)))")
        }
        let handle = MosquittoHandle(raw: raw)
        do {
            try configure(raw, config)
        } catch {
            mosquitto_destroy(raw)
            throw error
        }
        return handle
    }

    private static func check(_ rc: Int32, _ what: String) throws(MQTTError) {
        guard rc == MOSQ_ERR_SUCCESS.rawValue else {
            var error = MQTTError(mosquitto: rc, errno: errno)
            if error.code == .invalidArgument { error.code = .invalidConfiguration }
            error.message = "\(what): \(error.message)"
            throw error
        }
    }

    private static func configure(_ h: OpaquePointer, _ config: MQTTConfiguration) throws(MQTTError) {
        try check(mosquitto_threaded_set(h, true), "threaded mode")
        // Every MQTT packet is a small write. With Nagle's algorithm on, a packet waits for the
        // TCP ACK of the previous one, which the broker delays (delayed ACK, 40 ms and more) while
        // it has nothing to send back: a publisher then trickles at a packet per delayed ACK
        // instead of going at the speed of the broker, and every request/answer pays the delay.
        try check(mosquitto_int_option(h, MOSQ_OPT_TCP_NODELAY, 1), "TCP_NODELAY")
        let version = config.protocolVersion == .v5 ? MQTT_PROTOCOL_V5 : MQTT_PROTOCOL_V311
        try check(mosquitto_int_option(h, MOSQ_OPT_PROTOCOL_VERSION, version), "protocol version")
        if config.username != nil || config.password != nil {
            try check(
                withOptionalCString(config.username) { user in
                    withOptionalCString(config.password) { mosquitto_username_pw_set(h, user, $0) }
                }, "username/password")
        }
        if let will = config.will {
            try validatePublishTopic(will.topic)
            guard will.payload.count <= 268_435_455 else {
                throw MQTTError(code: .payloadTooLarge, message: "will payload is too large")
            }
            try check(
                will.topic.withCString { topic in
                    will.payload.withUnsafeBytes { bytes in
                        mosquitto_will_set(
                            h, topic, Int32(bytes.count), bytes.baseAddress, Int32(will.qos.rawValue), will.retain)
                    }
                }, "will")
        }
        if let tls = config.tls { try configureTLS(h, tls) }
        installCallbacks(h)
    }

    private static func configureTLS(_ h: OpaquePointer, _ tls: MQTTTLS) throws(MQTTError) {
        func readable(_ path: String?, _ what: String, directory: Bool = false) throws(MQTTError) {
            guard let path else { return }
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory),
                isDirectory.boolValue == directory, access(path, R_OK) == 0
            else {
                throw MQTTError(code: .tls, message: "\(what) '\(path)' does not exist or is not readable")
            }
        }
        try readable(tls.caFile, "CA file")
        try readable(tls.caDirectory, "CA directory", directory: true)
        try readable(tls.certificateFile, "client certificate")
        try readable(tls.keyFile, "client key")
        if (tls.certificateFile == nil) != (tls.keyFile == nil) {
            throw MQTTError(code: .tls, message: "a client certificate needs its key and vice versa")
        }
        if tls.caFile == nil && tls.caDirectory == nil {
            try check(mosquitto_int_option(h, MOSQ_OPT_TLS_USE_OS_CERTS, 1), "TLS system trust store")
        }
        if tls.caFile != nil || tls.caDirectory != nil || tls.certificateFile != nil {
            let rc = withOptionalCString(tls.caFile) { ca in
                withOptionalCString(tls.caDirectory) { dir in
                    withOptionalCString(tls.certificateFile) { cert in
                        withOptionalCString(tls.keyFile) { key in mosquitto_tls_set(h, ca, dir, cert, key, nil) }
                    }
                }
            }
            guard rc == MOSQ_ERR_SUCCESS.rawValue else {
                throw MQTTError(
                    code: .tls, message: "TLS setup failed: \(String(cString: mosquitto_strerror(rc)))",
                    mosquittoCode: rc)
            }
        }
        if tls.insecure {
            // SSL_VERIFY_NONE: no chain verification; plus no hostname check.
            try check(mosquitto_tls_opts_set(h, 0, nil, nil), "TLS options")
            try check(mosquitto_tls_insecure_set(h, true), "TLS insecure")
        }
    }

    func discardUnstarted() {
        mosquitto_destroy(h)
    }

    // MARK: C callbacks (network thread)

    private static func box(_ obj: UnsafeMutableRawPointer?) -> Connection? {
        guard let obj else { return nil }
        return Unmanaged<Connection>.fromOpaque(obj).takeUnretainedValue()
    }

    private static func installCallbacks(_ h: OpaquePointer) {
        mosquitto_connect_v5_callback_set(h) { _, obj, rc, flags, _ in
            Connection.box(obj)?.didConnect(rc: rc, sessionPresent: flags & 1 != 0)
        }
        mosquitto_disconnect_v5_callback_set(h) { _, obj, rc, _ in
            Connection.box(obj)?.didDisconnect(rc: rc)
        }
        mosquitto_publish_v5_callback_set(h) { _, obj, mid, reason, _ in
            Connection.box(obj)?.didPublish(mid: mid, reason: reason)
        }
        mosquitto_message_v5_callback_set(h) { _, obj, message, properties in
            guard let connection = Connection.box(obj), let message else { return }
            connection.didReceive(message.pointee, properties: properties)
        }
        mosquitto_subscribe_v5_callback_set(h) { _, obj, mid, count, granted, _ in
            var refused: Int32?
            if let granted {
                for index in 0..<Int(count) where granted[index] >= 0x80 { refused = granted[index] }
            }
            Connection.box(obj)?.didAck(mid: mid, refusedReason: refused)
        }
        mosquitto_unsubscribe_v5_callback_set(h) { _, obj, mid, _ in
            Connection.box(obj)?.didAck(mid: mid, refusedReason: nil)
        }
        installLogCallback(h)
    }

    /// libmosquitto formats a log line for every packet it sends or receives while a log
    /// callback is set (two per QoS 1 publish), which cost more than the publish itself.
    /// The lines explain why a connection attempt failed (TLS, DNS, refusals), so the callback
    /// is set while connecting and cleared once connected, unless trace logging wants them.
    private static func installLogCallback(_ h: OpaquePointer) {
        mosquitto_log_callback_set(h) { _, obj, level, text in
            guard let text else { return }
            Connection.box(obj)?.didLog(level: level, String(cString: text))
        }
    }

    private func didConnect(rc: Int32, sessionPresent: Bool) {
        guard rc == 0 else {
            let error = MQTTError(refusal: rc, protocolVersion: configuration.protocolVersion)
            control.withLock { $0.refusal = error }
            return
        }
        // Mark connected before reading the subscription list (see ClientCore.remember).
        let waiters = control.withLock { state in
            state.connected = true
            state.everConnected = true
            return state.takeWaiters(.connect)
        }
        logger.debug("MQTT connected", metadata: ["sessionPresent": "\(sessionPresent)"])
        if logger.logLevel > .trace { mosquitto_log_callback_set(h, nil) }
        let restore = core.subscriptionsToRestore(sessionPresent: sessionPresent)
        for group in Connection.groupByQoS(restore) {
            // In a callback on the network thread: the SUBACK cannot be processed before we record the mid.
            let (rc, mid) = subscribeCall(group.filters, qos: group.qos)
            if rc == MOSQ_ERR_SUCCESS.rawValue {
                control.withLock { _ = $0.ignoredAcks.insert(mid) }
            } else {
                logger.warning("MQTT resubscribe failed", metadata: ["error": "\(MQTTError(mosquitto: rc))"])
            }
        }
        core.setState(.connected, from: self)
        for waiter in waiters { waiter.resume(returning: .success(())) }
    }

    private func didDisconnect(rc: Int32) {
        // A server-sent DISCONNECT (MQTT 5) carries a reason ≥ 0x80; libmosquitto's own errors are MOSQ_ERR_*.
        guard configuration.protocolVersion == .v5, rc >= 0x80 else { return }
        let error = MQTTError(refusal: rc, protocolVersion: .v5)
        control.withLock { $0.serverDisconnect = error }
    }

    private func didPublish(mid: Int32, reason: Int32) {
        if reason >= 0x80 {
            logger.warning(
                "MQTT broker rejected a publish",
                metadata: ["mid": "\(mid)", "reason": "\(String(cString: mosquitto_reason_string(reason)))"])
        }
        let resumed = control.withLock { state -> [CheckedContinuation<Outcome, Never>] in
            if state.outstanding.removeValue(forKey: mid) == nil {
                state.earlyPublishDone[mid] = state.epoch
            }
            return state.takeCapacityWaiters(limit: configuration.maxQueuedPublishes)
        }
        for waiter in resumed { waiter.resume(returning: .success(())) }
    }

    private func didReceive(_ message: mosquitto_message, properties: OpaquePointer?) {
        guard let topicPointer = message.topic else { return }
        let payload: [UInt8] =
            if let bytes = message.payload, message.payloadlen > 0 {
                Array(UnsafeRawBufferPointer(start: bytes, count: Int(message.payloadlen)))
            } else {
                []
            }
        var copied = MQTTMessage(
            topic: String(cString: topicPointer), payload: payload,
            qos: MQTTQoS(rawValue: Int(message.qos)) ?? .atMostOnce, retain: message.retain)
        if let properties {
            var expiry: UInt32 = 0
            if mosquitto_property_read_int32(properties, Int32(MQTT_PROP_MESSAGE_EXPIRY_INTERVAL.rawValue), &expiry, false)
                != nil
            {
                copied.properties.messageExpiry = expiry
            }
            var skipFirst = false
            var cursor: OpaquePointer? = properties
            while let current = cursor {
                var name: UnsafeMutablePointer<CChar>?
                var value: UnsafeMutablePointer<CChar>?
                cursor = mosquitto_property_read_string_pair(
                    current, Int32(MQTT_PROP_USER_PROPERTY.rawValue), &name, &value, skipFirst)
                skipFirst = true
                if cursor != nil, let name, let value {
                    copied.properties.userProperties.append(
                        MQTTUserProperty(name: String(cString: name), value: String(cString: value)))
                }
                free(name)
                free(value)
            }
        }
        core.deliver(copied)
    }

    private func didAck(mid: Int32, refusedReason: Int32?) {
        let outcome: Outcome =
            if let refusedReason {
                .failure(
                    MQTTError(
                        code: .subscriptionRefused,
                        message: "the broker refused the subscription: "
                            + String(cString: mosquitto_reason_string(refusedReason)),
                        reasonCode: Int(refusedReason)))
            } else {
                .success(())
            }
        let waiter = control.withLock { state -> CheckedContinuation<Outcome, Never>? in
            if state.ignoredAcks.remove(mid) != nil { return nil }
            if let waiter = state.ackWaiters.removeValue(forKey: mid) { return waiter }
            state.earlyAcks[mid] = outcome
            return nil
        }
        if case .failure(let error) = outcome, waiter == nil {
            logger.warning("MQTT resubscription refused", metadata: ["error": "\(error)"])
        }
        waiter?.resume(returning: outcome)
    }

    private func didLog(level: Int32, _ text: String) {
        if level == MOSQ_LOG_ERR {
            control.withLock { $0.lastLogError = text }
            logger.debug("libmosquitto: \(text)")
        } else if level == MOSQ_LOG_WARNING {
            logger.debug("libmosquitto: \(text)")
        } else {
            logger.trace("libmosquitto: \(text)")
        }
    }

    // MARK: Network thread

    func start() {
        mosquitto_user_data_set(h, Unmanaged.passRetained(self).toOpaque())
        let thread = Thread { [self] in self.networkThreadMain() }
        thread.name = "mqtt-network"
        thread.start()
    }

    private var stopRequested: Bool { control.withLock { $0.stopRequested } }

    private func networkThreadMain() {
        var attempt = 0
        var first = true
        var lastError: MQTTError?
        while !stopRequested {
            if !first { core.setState(.reconnecting(lastError), from: self) }
            let (rc, savedErrno) = first ? connectFirst() : reconnect()
            first = false
            var wasConnected = false
            if rc == MOSQ_ERR_SUCCESS.rawValue {
                (lastError, wasConnected) = runUntilConnectionEnds()
            } else {
                lastError = MQTTError(mosquitto: rc, errno: savedErrno, detail: takeLastLogError())
            }
            if stopRequested { break }
            let error = lastError ?? MQTTError(code: .connectionLost, message: "the connection ended")
            let (everConnected, waiters) = connectionDropped(error: error)
            for waiter in waiters { waiter.resume(returning: .failure(error)) }
            if !everConnected {
                // The first connection failed: connect() reports it; no background retrying.
                control.withLock { $0.finalError = error }
                break
            }
            logger.info("MQTT connection lost, reconnecting", metadata: ["error": "\(error)"])
            core.setState(.reconnecting(error), from: self)
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
            mosquitto_connect_bind_v5(h, host, Int32(configuration.port), Int32(configuration.keepAlive), nil, properties)
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
        while true {
            errno = 0
            let rc = mosquitto_loop(h, 100, 1)
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
            state.earlyPublishDone.removeAll()
            state.earlyAcks.removeAll()
            state.ignoredAcks.removeAll()
            var released = Array(state.ackWaiters.values)
            state.ackWaiters.removeAll()
            released += state.takeCapacityWaiters(limit: configuration.maxQueuedPublishes)
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

    private func shutdown() {
        let (connected, clean) = control.withLock { ($0.connected, $0.cleanStop) }
        if connected && clean {
            // Let accepted publishes go out (bounded), then DISCONNECT so the broker drops the will.
            let drainEnd = Date().addingTimeInterval(2)
            while control.withLock({ !$0.outstanding.isEmpty }) && Date() < drainEnd {
                if mosquitto_loop(h, 50, 1) != MOSQ_ERR_SUCCESS.rawValue { break }
            }
        }
        if connected {
            if mosquitto_disconnect_v5(h, 0, nil) == MOSQ_ERR_SUCCESS.rawValue {
                let end = Date().addingTimeInterval(1)
                while Date() < end, mosquitto_loop(h, 50, 1) == MOSQ_ERR_SUCCESS.rawValue {}
            }
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
            control.withLock { $0.waiters.removeValue(forKey: id) }?.continuation.resume(returning: .failure(.cancelled))
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

    func awaitFinished(timeout: Double) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                _ = await self.suspend(.finish) { state in state.finished ? .success(()) : nil }
            }
            group.addTask { try? await Task.sleep(for: .seconds(timeout)) }
            await group.next()
            group.cancelAll()
        }
    }

    /// Marks the start of a call into libmosquitto from another thread; false when stopping.
    private func enter() -> Bool {
        control.withLock { state in
            guard !state.stopRequested else { return false }
            state.users += 1
            return true
        }
    }

    private func leave() {
        control.withLock { $0.users -= 1 }
    }

    // MARK: Publish

    func publish(
        _ topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool, properties: MQTTPublishProperties
    ) async -> Outcome {
        let limit = configuration.maxQueuedPublishes
        while true {
            if let outcome = publishWithoutWaiting(topic, payload: payload, qos: qos, retain: retain, properties: properties) {
                return outcome
            }
            let outcome = await suspend(.capacity) { state in
                if state.stopRequested || state.finished { return .failure(.closed) }
                return state.outstanding.count < limit ? .success(()) : nil
            }
            if case .failure = outcome { return outcome }
        }
    }

    /// `publish` when it needs no waiting; nil when it would wait for room (the outstanding limit).
    func publishWithoutWaiting(
        _ topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool, properties: MQTTPublishProperties
    ) -> Outcome? {
        guard payload.count <= 268_435_455 else {
            return .failure(MQTTError(code: .payloadTooLarge, message: "payload of \(payload.count) bytes"))
        }
        let limit = configuration.maxQueuedPublishes
        enum Decision { case fail(MQTTError), drop, wait, go(UInt64) }
        let decision = control.withLock { state -> Decision in
            if state.stopRequested || state.finished { return .fail(.closed) }
            if qos == .atMostOnce && !state.connected { return state.everConnected ? .drop : .fail(.notConnected) }
            if state.outstanding.count >= limit { return .wait }
            state.users += 1
            return .go(state.epoch)
        }
        switch decision {
        case .fail(let error):
            return .failure(error)
        case .drop:
            return .success(())
        case .wait:
            return nil
        case .go(let epoch):
            var mid: Int32 = 0
            let rc = send(topic, payload: payload, qos: qos, retain: retain, properties: properties, mid: &mid)
            let savedErrno = errno
            // QoS 1/2 while the socket is down: libmosquitto keeps the message queued and returns NO_CONN.
            let queued =
                rc == MOSQ_ERR_SUCCESS.rawValue || (rc == MOSQ_ERR_NO_CONN.rawValue && qos != .atMostOnce)
            control.withLock { state in
                state.users -= 1
                guard queued else { return }
                if state.earlyPublishDone.removeValue(forKey: mid) != nil { return }
                // A QoS 0 message queued on a connection that has since dropped is already gone.
                if qos == .atMostOnce && epoch != state.epoch { return }
                state.outstanding[mid] = (qos, epoch)
                state.highWater = max(state.highWater, state.outstanding.count)
            }
            if queued || (rc == MOSQ_ERR_NO_CONN.rawValue && qos == .atMostOnce) { return .success(()) }
            return .failure(MQTTError(mosquitto: rc, errno: savedErrno))
        }
    }

    private func send(
        _ topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool, properties: MQTTPublishProperties,
        mid: inout Int32
    ) -> Int32 {
        var list: OpaquePointer?
        defer { mosquitto_property_free_all(&list) }
        if configuration.protocolVersion == .v5 {
            if let expiry = properties.messageExpiry {
                mosquitto_property_add_int32(&list, Int32(MQTT_PROP_MESSAGE_EXPIRY_INTERVAL.rawValue), expiry)
            }
            for property in properties.userProperties {
                let rc = property.name.withCString { name in
                    property.value.withCString { value in
                        mosquitto_property_add_string_pair(&list, Int32(MQTT_PROP_USER_PROPERTY.rawValue), name, value)
                    }
                }
                if rc != MOSQ_ERR_SUCCESS.rawValue { return rc }
            }
        }
        errno = 0
        return topic.withCString { topicPointer in
            payload.withUnsafeBytes { bytes in
                mosquitto_publish_v5(
                    h, &mid, topicPointer, Int32(bytes.count), bytes.baseAddress, Int32(qos.rawValue), retain, list)
            }
        }
    }

    // MARK: Subscribe

    private struct QoSGroup {
        var qos: MQTTQoS
        var filters: [String]
    }

    private static func groupByQoS(_ filters: [(String, MQTTQoS)]) -> [QoSGroup] {
        MQTTQoS.allCases.compactMap { qos in
            let matching = filters.filter { $0.1 == qos }.map(\.0)
            return matching.isEmpty ? nil : QoSGroup(qos: qos, filters: matching)
        }
    }

    /// MQTT 5 subscription options from the configuration (3.1.1 has none).
    private var subscriptionOptions: Int32 {
        guard configuration.protocolVersion == .v5 else { return 0 }
        var options: Int32 = 0
        if configuration.noLocal { options |= Int32(MQTT_SUB_OPT_NO_LOCAL.rawValue) }
        if configuration.retainAsPublished { options |= Int32(MQTT_SUB_OPT_RETAIN_AS_PUBLISHED.rawValue) }
        return options
    }

    private func subscribeCall(_ filters: [String], qos: MQTTQoS) -> (Int32, Int32) {
        var mid: Int32 = 0
        let copies = filters.map { strdup($0) }
        defer { copies.forEach { free($0) } }
        let rc = copies.withUnsafeBufferPointer { buffer in
            mosquitto_subscribe_multiple(h, &mid, Int32(buffer.count), buffer.baseAddress, Int32(qos.rawValue), subscriptionOptions, nil)
        }
        return (rc, mid)
    }

    func subscribe(_ filters: [(String, MQTTQoS)]) async -> Outcome {
        var mids: [Int32] = []
        for group in Connection.groupByQoS(filters) {
            guard enter() else { return .failure(.closed) }
            let (rc, mid) = subscribeCall(group.filters, qos: group.qos)
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

    // MARK: Validation

    static func validatePublishTopic(_ topic: String) throws(MQTTError) {
        let valid =
            !topic.isEmpty && !topic.utf8.contains(0)
            && topic.withCString { mosquitto_pub_topic_check2($0, topic.utf8.count) } == MOSQ_ERR_SUCCESS.rawValue
            && topic.utf8.count <= 65535
        guard valid else {
            throw MQTTError(code: .invalidTopic, message: "'\(topic)' is not a valid topic to publish to")
        }
    }

    static func validateFilter(_ filter: String) throws(MQTTError) {
        let valid =
            !filter.isEmpty && !filter.utf8.contains(0)
            && filter.withCString { mosquitto_sub_topic_check2($0, filter.utf8.count) } == MOSQ_ERR_SUCCESS.rawValue
            && filter.utf8.count <= 65535
        guard valid else {
            throw MQTTError(code: .invalidTopic, message: "'\(filter)' is not a valid topic filter")
        }
    }
}

extension Connection.Control {
    mutating func takeWaiters(_ kind: Connection.WaiterKind) -> [CheckedContinuation<Outcome, Never>] {
        let ids = waiters.filter { $0.value.kind == kind }.keys.sorted()
        return ids.compactMap { waiters.removeValue(forKey: $0)?.continuation }
    }

    /// Oldest capacity waiters first, as many as there are free slots.
    mutating func takeCapacityWaiters(limit: Int) -> [CheckedContinuation<Outcome, Never>] {
        let free = limit - outstanding.count
        guard free > 0, !waiters.isEmpty else { return [] }
        let ids = waiters.filter { $0.value.kind == .capacity }.keys.sorted().prefix(free)
        return ids.compactMap { waiters.removeValue(forKey: $0)?.continuation }
    }
}

private func withOptionalCString<R>(_ string: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
    guard let string else { return body(nil) }
    return string.withCString { body($0) }
}
