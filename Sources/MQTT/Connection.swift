internal import CMosquitto
import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

// One libmosquitto session: its handle, the state its network thread shares with callers, and the
// handle's setup (options, TLS). The thread itself, the C callbacks and the calls from other
// threads are in Connection+NetworkThread.swift, Connection+Callbacks.swift and Connection+Calls.swift.

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
        var outstanding = OutstandingPublishes()
        /// Counts publishes handed to libmosquitto: the order they go out in.
        var sendOrder: UInt64 = 0
        /// The largest packet the broker acknowledged without a refusal.
        var largestKept = 0
        /// The most levels of a topic the broker acknowledged a publish to.
        var deepestKept = 0
        /// QoS 0 publishes written to the socket and not yet known kept (a later
        /// acknowledgement says the broker read past them): the connection may be lost for one.
        var writtenUnconfirmed: [Sent] = []
        /// The handle is being made anew (`replaceHandle`): nobody enters libmosquitto.
        var replacing = false
        /// A handle made anew is configured before its next connect.
        var needsConfiguring = false
        /// What `replaceHandle` kept to hand to the new handle once it has connected.
        var resendAfterConnect: [Connection.Sent] = []
        /// A handle made anew has not yet been through its first connect, which sets it up:
        /// libmosquitto drops the retain flag of a publish handed to it before that, so new
        /// publishes wait (as while `replacing`) until `resendAfterConnect` has run.
        var awaitingFirstConnect = false
        /// Topics whose publish the broker dropped the connection for: never sent again.
        var refusedTopics: Set<String> = []
        /// When the last CONNACK came.
        var connectedAt: Stamp?
        /// Publishes the broker refused (a PUBACK reason, or the connection dropped for it).
        var refusedCount = 0
        /// Which refusals to log and how many went unlogged.
        var refusalLog = PublishFailures()
        /// `on_publish` that beat the publishing thread's bookkeeping.
        var earlyPublishDone: [Int32: (epoch: UInt64, reason: Int32)] = [:]
        var highWater = 0
        var ackWaiters: [Int32: CheckedContinuation<Outcome, Never>] = [:]
        var earlyAcks: [Int32: Outcome] = [:]
        /// Mids of resubscriptions made by the network thread, whose SUBACK nobody awaits.
        var ignoredAcks: Set<Int32> = []
        var waiters: [UInt64: (kind: WaiterKind, continuation: CheckedContinuation<Outcome, Never>)] = [:]
        var nextWaiterID: UInt64 = 0
        /// What the broker accepts, from the last CONNACK and the configuration.
        var limits = MQTTBrokerLimits()
    }

    /// A publish libmosquitto holds until it is written (QoS 0) or acknowledged (QoS 1/2).
    struct Sent {
        var topic: String
        var qos: MQTTQoS
        var epoch: UInt64
        /// Its packet's size, and its place in the order of sending.
        var size: Int
        var levels: Int
        var order: UInt64
        var at: Stamp
        /// What to send again if libmosquitto's queue must be dropped (QoS 1/2 only). The
        /// payload is the caller's array, shared, not copied.
        var message: PendingPublish?
    }

    struct PendingPublish {
        var payload: [UInt8]
        var retain: Bool
        var properties: MQTTPublishProperties
    }

    let handle: MosquittoHandle
    let core: ClientCore
    let configuration: MQTTConfiguration
    let logger: Logger
    let control: Mutex<Control>
    /// Wakes the network thread while it hosts a guest (`NetworkThreadGuest.swift`); nil if no
    /// pipe could be made, and then no guest is hosted.
    let waker = LoopWaker()
    /// The network thread waits in `poll` with a guest: a call that queues a packet wakes it.
    let waitingInPoll = Atomic<Bool>(false)
    /// The property lists of plain publishes, made once (`PropertyLists`).
    let propertyLists = PropertyLists()

    init(handle: MosquittoHandle, core: ClientCore, configuration: MQTTConfiguration, logger: Logger) {
        self.handle = handle
        self.core = core
        self.configuration = configuration
        self.logger = logger
        control = Mutex(
            Control(
                limits: MQTTBrokerLimits(
                    configuredMaximumPacketSize: configuration.maximumPacketSize,
                    maximumTopicLevels: configuration.maximumTopicLevels)))
    }

    var h: OpaquePointer { handle.raw }

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
        guard config.maxQueuedBytes >= 1 else { throw .invalidConfiguration("maxQueuedBytes must be >= 1") }
        guard config.maximumTopicLevels >= 1 else { throw .invalidConfiguration("maximumTopicLevels must be >= 1") }
        if let size = config.maximumPacketSize, !(128...MQTTBrokerLimits.protocolMaximumPacketSize).contains(size) {
            throw .invalidConfiguration(
                "maximumPacketSize must be 128…\(MQTTBrokerLimits.protocolMaximumPacketSize) bytes")
        }
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

    static func configure(_ h: OpaquePointer, _ config: MQTTConfiguration) throws(MQTTError) {
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

}

extension Connection.Control {
    /// The broker read `sent` and kept the connection.
    mutating func keep(_ sent: Connection.Sent) {
        largestKept = max(largestKept, sent.size)
        deepestKept = max(deepestKept, sent.levels)
    }

    /// A publish written (QoS 0: remembered, if the broker could have refused it, until a later
    /// acknowledgement shows the broker read past it) or acknowledged (the largest and deepest
    /// kept grow).
    mutating func settleKept(_ sent: Connection.Sent, protocolVersion: MQTTProtocolVersion) {
        if sent.qos == .atMostOnce {
            // Only one larger or deeper than any kept can be blamed for a lost connection.
            guard sent.size > largestKept || sent.levels > max(deepestKept, 16) else { return }
            writtenUnconfirmed.append(sent)
            if writtenUnconfirmed.count > 256 { writtenUnconfirmed.removeFirst(64) }
            return
        }
        keep(sent)
        guard !writtenUnconfirmed.isEmpty else { return }
        // The broker reads in order: what was written before this one was read, and, under
        // MQTT 3.1.1 (whose only refusal is a lost connection), kept. An MQTT 5 broker may drop
        // a QoS 0 message and go on (mosquitto's message_size_limit).
        let before = writtenUnconfirmed.prefix { $0.order < sent.order }
        if protocolVersion == .v311 { for earlier in before { keep(earlier) } }
        writtenUnconfirmed.removeFirst(before.count)
    }

    mutating func takeWaiters(_ kind: Connection.WaiterKind) -> [CheckedContinuation<Outcome, Never>] {
        let ids = waiters.filter { $0.value.kind == kind }.keys.sorted()
        return ids.compactMap { waiters.removeValue(forKey: $0)?.continuation }
    }

    /// Oldest capacity waiters first, as many as there are free slots, once there is room.
    mutating func takeCapacityWaiters(_ configuration: MQTTConfiguration) -> [CheckedContinuation<Outcome, Never>] {
        takeCapacityWaiters(
            configuration, resumingAt: configuration.maxQueuedPublishes - 1, bytes: configuration.maxQueuedBytes)
    }

    /// As `takeCapacityWaiters(_:)`, once no more than `level` messages and fewer than `bytes`
    /// bytes are outstanding (or none at all).
    mutating func takeCapacityWaiters(_ configuration: MQTTConfiguration, resumingAt level: Int, bytes: Int)
        -> [CheckedContinuation<Outcome, Never>]
    {
        let free = configuration.maxQueuedPublishes - outstanding.count
        guard outstanding.hasRoom(limit: level + 1, bytes: bytes), free > 0, !waiters.isEmpty else { return [] }
        let ids = waiters.filter { $0.value.kind == .capacity }.keys.sorted().prefix(free)
        return ids.compactMap { waiters.removeValue(forKey: $0)?.continuation }
    }
}

func withOptionalCString<R>(_ string: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
    guard let string else { return body(nil) }
    return string.withCString { body($0) }
}
