internal import CMosquitto
import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

// A publish the broker refused: said in its PUBACK (MQTT 5), or the connection dropped right
// after it. `Refusals.swift` says why this matters; here the connection settles each publish,
// learns a packet limit the broker did not announce, and names and drops the message a
// connection was lost for, so that it is never sent again.
extension Connection {
    /// MQTT 5 reason "Packet too large" (mosquitto's answer to a payload over `message_size_limit`).
    static let packetTooLargeReason: Int32 = 0x95

    /// A publish's end: written (QoS 0: remembered until a later acknowledgement shows the
    /// broker read past it), acknowledged (the largest and deepest kept grow), or refused
    /// (counted, logged once per kind a while, and a "packet too large" teaches the limit).
    func settle(_ sent: Sent, reason: Int32) {
        guard reason >= 0x80 else {
            control.withLock { state in
                if sent.qos == .atMostOnce {
                    state.writtenUnconfirmed.append(sent)
                    if state.writtenUnconfirmed.count > 256 { state.writtenUnconfirmed.removeFirst(64) }
                    return
                }
                state.keep(sent)
                // The broker reads in order: what was written before this one was read.
                let before = state.writtenUnconfirmed.prefix { $0.order < sent.order }
                for earlier in before { state.keep(earlier) }
                state.writtenUnconfirmed.removeFirst(before.count)
            }
            return
        }
        let (log, suppressed) = control.withLock { state in
            state.refusedCount += 1
            return state.refusalLog.admit("reason-\(reason)", now: .now)
        }
        if log {
            var metadata: Logger.Metadata = [
                "topic": "\(MQTTTopicShape.describe(sent.topic))", "bytes": "\(sent.size)",
                "reason": "\(String(cString: mosquitto_reason_string(reason)))",
            ]
            if suppressed > 0 { metadata["not-logged-before"] = "\(suppressed) more like it" }
            logger.warning("the broker refused a publish", metadata: metadata)
        }
        if reason == Self.packetTooLargeReason { learn(refused: sent.size) }
    }

    /// Lowers the learned packet limit after a refusal of `size` bytes and tells the client's
    /// observers (`MQTTClient.learnedLimits()`); nothing when the refusal was no larger than a
    /// packet kept, or the limit in force is already below it.
    func learn(refused size: Int) {
        let learned = control.withLock { state -> MQTTBrokerLimits? in
            guard let limit = LearnedPacketLimit.limit(refused: size, kept: state.largestKept) else { return nil }
            if let current = state.limits.maximumPacketSize, current <= limit { return nil }
            state.limits.learnedMaximumPacketSize = limit
            return state.limits
        }
        guard let learned else { return }
        core.learned(
            MQTTLearnedLimit(
                limits: learned, refusedPacketSize: size,
                largestKeptPacketSize: control.withLock { $0.largestKept }))
    }

    /// The message the connection was lost for, when it was lost right after a publish the
    /// broker may have refused. Among the publishes not acknowledged (or, QoS 0, not written)
    /// and the QoS 0 ones written and not known read, in their order: the first larger than any the broker kept
    /// (a packet over a limit it did not announce); when the broker said the packet was
    /// malformed or not allowed (an MQTT 5 DISCONNECT reason), the first; or the first to a
    /// topic deeper than any kept and than 16 levels (a level limit). Only within 3 s of its
    /// sending or of the CONNACK that resent it: a broker that restarts some time after a large
    /// publish refused nothing. Nil: an ordinary loss, reconnected as such.
    func culprit(after error: MQTTError) -> (sent: Sent, mid: Int32?, bySize: Bool)? {
        let byReason = error.reasonCode.map { Self.publishRefusalReasons.contains($0) } ?? false
        guard byReason || [.connectionLost, .protocolError, .io].contains(error.code) else { return nil }
        return control.withLock { state -> (Sent, Int32?, Bool)? in
            let now = ContinuousClock.now
            var candidates: [(sent: Sent, mid: Int32?)] = state.writtenUnconfirmed.map { ($0, nil) }
            // QoS 0 ones still outstanding too: a large packet may be cut off while written.
            for (mid, sent) in state.outstanding { candidates.append((sent, sent.qos == .atMostOnce ? nil : mid)) }
            candidates.sort { $0.sent.order < $1.sent.order }
            func recent(_ sent: Sent) -> Bool {
                now - max(sent.at, state.connectedAt ?? sent.at) < .seconds(3)
            }
            if let large = candidates.first(where: { $0.sent.size > max(state.largestKept, 1024) }),
                recent(large.sent)
            {
                return (large.sent, large.mid, true)
            }
            if byReason, let first = candidates.first, recent(first.sent) { return (first.sent, first.mid, false) }
            // A broker that allows fewer levels than mosquitto (EMQX: 128) and says nothing.
            if let deep = candidates.first(where: { $0.sent.levels > max(state.deepestKept, 16) }), recent(deep.sent) {
                return (deep.sent, deep.mid, false)
            }
            return nil
        }
    }

    /// MQTT 5 DISCONNECT reasons a broker gives for a PUBLISH it will not take: malformed
    /// packet, protocol error, topic name invalid, packet too large, payload format invalid,
    /// retain or QoS not supported.
    static let publishRefusalReasons: Set<Int> = [0x81, 0x82, 0x90, 0x95, 0x99, 0x9A, 0x9B]

    /// Drops `mid` from what libmosquitto would send again: libmosquitto has no call that
    /// removes one queued message, so the handle is made anew (`mosquitto_reinitialise`, then
    /// configured as at the start) and every other unacknowledged QoS 1/2 publish is handed
    /// to it again in its order. Calls from other threads wait meanwhile (`replacing`). The
    /// next connect is a first one (`connectFirst`). False if the handle could not be made
    /// anew (then libmosquitto's queue is as it was).
    func replaceHandle(dropping mid: Int32) -> Bool {
        let again = control.withLock { state -> [Sent] in
            state.replacing = true
            return state.outstanding.filter { $0.key != mid && $0.value.message != nil }.values.sorted {
                $0.order < $1.order
            }
        }
        defer { finishReplacing() }
        while control.withLock({ $0.users > 0 }) { usleep(1000) }
        let userdata = Unmanaged.passUnretained(self).toOpaque()
        let id = configuration.clientID.isEmpty ? nil : configuration.clientID
        let rc = withOptionalCString(id) { mosquitto_reinitialise(h, $0, configuration.cleanStart, userdata) }
        do throws(MQTTError) {
            guard rc == MOSQ_ERR_SUCCESS.rawValue else { throw MQTTError(mosquitto: rc) }
            try Connection.configure(h, configuration)
        } catch {
            logger.error("MQTT: could not make the connection's handle anew", metadata: ["error": "\(error)"])
            return false
        }
        var resent: [Int32: Sent] = [:]
        for var sent in again {
            guard let message = sent.message else { continue }
            var newMid: Int32 = 0
            let rc = send(
                sent.topic, payload: message.payload, qos: sent.qos, retain: message.retain,
                properties: message.properties, mid: &newMid)
            guard rc == MOSQ_ERR_SUCCESS.rawValue || rc == MOSQ_ERR_NO_CONN.rawValue else { continue }
            sent.at = .now
            resent[newMid] = sent
        }
        control.withLock { state in
            state.outstanding = resent
            state.earlyPublishDone.removeAll()
        }
        return true
    }

    private func finishReplacing() {
        let resumed = control.withLock { state in
            state.replacing = false
            return state.takeCapacityWaiters(limit: configuration.maxQueuedPublishes)
        }
        for waiter in resumed { waiter.resume(returning: .success(())) }
    }

    /// After a lost connection: when a publish caused it, the message is named in the log,
    /// dropped from libmosquitto's queue, and either teaches a packet limit (larger than any
    /// kept) or is never sent again (its topic refused from now on). True when the handle was
    /// made anew, so that the next connect is a first one.
    func dropCulprit(after error: MQTTError) -> Bool {
        guard let (sent, mid, bySize) = culprit(after: error) else { return false }
        let kept = control.withLock { state in
            state.refusedCount += 1
            state.writtenUnconfirmed.removeAll()
            if !bySize, state.refusedTopics.count < 1024 { state.refusedTopics.insert(sent.topic) }
            return state.largestKept
        }
        logger.warning(
            "the broker closed the connection right after a publish: that message is dropped and not sent again",
            metadata: [
                "topic": "\(MQTTTopicShape.describe(sent.topic))", "bytes": "\(sent.size)",
                "largest-kept": "\(kept)", "error": "\(error)",
            ])
        if bySize { learn(refused: sent.size) }
        // A QoS 0 message is gone with the connection; a QoS 1/2 one libmosquitto would resend.
        guard let mid else { return false }
        return replaceHandle(dropping: mid)
    }
}

/// Which refusals to log: the first of each kind, then one per kind every 10 s with how many
/// went unlogged before it.
struct RefusalLog {
    private var kinds: [String: (logged: ContinuousClock.Instant, suppressed: Int)] = [:]

    mutating func admit(_ kind: String, now: ContinuousClock.Instant) -> (log: Bool, suppressed: Int) {
        guard let previous = kinds[kind], now - previous.logged < .seconds(10) else {
            let suppressed = kinds[kind]?.suppressed ?? 0
            kinds[kind] = (now, 0)
            return (true, suppressed)
        }
        kinds[kind] = (previous.logged, previous.suppressed + 1)
        return (false, 0)
    }
}

/// A packet limit the client learned: the limits now in force, the packet refused, and the
/// largest the broker had kept.
public struct MQTTLearnedLimit: Sendable, Hashable {
    public var limits: MQTTBrokerLimits
    public var refusedPacketSize: Int
    public var largestKeptPacketSize: Int

    public init(limits: MQTTBrokerLimits, refusedPacketSize: Int, largestKeptPacketSize: Int) {
        self.limits = limits
        self.refusedPacketSize = refusedPacketSize
        self.largestKeptPacketSize = largestKeptPacketSize
    }
}
