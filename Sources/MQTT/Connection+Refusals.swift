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

    /// A publish's end: written or acknowledged (`Control.settleKept`, done under the lock
    /// that found it), or refused (counted, logged once per kind a while, and a "packet too
    /// large" teaches the limit).
    func settle(_ sent: Sent, reason: Int32) {
        guard reason >= 0x80 else {
            control.withLock { $0.settleKept(sent, protocolVersion: configuration.protocolVersion) }
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
        if reason == Self.packetTooLargeReason, let learned = learn(refused: sent.size, fromLostConnection: false) {
            core.learned(learned)
        }
    }

    /// Lowers the learned packet limit after a refusal of `size` bytes, by the rule
    /// `MQTTBrokerLimits.learn` states; the limit to tell the client's observers
    /// (`MQTTClient.learnedLimits()`), or nil when nothing was learned.
    func learn(refused size: Int, fromLostConnection: Bool) -> MQTTLearnedLimit? {
        control.withLock { state -> MQTTLearnedLimit? in
            state.limits.learn(refusedPacketSize: size, kept: state.largestKept, fromLostConnection: fromLostConnection)
        }
    }

    /// The message the connection was lost for, when it was lost right after a publish the
    /// broker may have refused. Among the publishes sent within 3 s (of their sending, or of
    /// the CONNACK that resent them) and not acknowledged (or, QoS 0, not written or not known
    /// read), in their order: the first larger than any the broker kept (a packet over a limit
    /// it did not announce); when the broker said the packet was malformed or not allowed (an
    /// MQTT 5 DISCONNECT reason), the first; or the first to a topic deeper than any kept and
    /// than 16 levels (a level limit). Nil: an ordinary loss, reconnected as such.
    func culprit(after error: MQTTError) -> (sent: Sent, mid: Int32?, bySize: Bool)? {
        let byReason = error.reasonCode.map { Self.publishRefusalReasons.contains($0) } ?? false
        guard byReason || [.connectionLost, .protocolError, .io].contains(error.code) else { return nil }
        return control.withLock { state -> (Sent, Int32?, Bool)? in
            let now = Stamp.now
            func recent(_ sent: Sent) -> Bool {
                now - max(sent.at, state.connectedAt ?? sent.at) < .seconds(3)
            }
            var candidates: [(sent: Sent, mid: Int32?)] = state.writtenUnconfirmed.filter(recent).map { ($0, nil) }
            // QoS 0 ones still outstanding too: a large packet may be cut off while written.
            for (mid, sent) in state.outstanding where recent(sent) {
                candidates.append((sent, sent.qos == .atMostOnce ? nil : mid))
            }
            candidates.sort { $0.sent.order < $1.sent.order }
            if let large = candidates.first(where: { $0.sent.size > max(state.largestKept, 1024) }) {
                return (large.sent, large.mid, true)
            }
            if byReason, let first = candidates.first { return (first.sent, first.mid, false) }
            // A broker that allows fewer levels than mosquitto (EMQX: 128) and says nothing.
            if let deep = candidates.first(where: { $0.sent.levels > max(state.deepestKept, 16) }) {
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
    /// configured as at the start). Every other unacknowledged QoS 1/2 publish that the limits
    /// now allow is kept to hand to it again, in order, once the next connect has set it up
    /// (`resendAfterConnect`: before that, libmosquitto would drop their retain flag); one too
    /// large for a limit just learned is counted refused. Calls from other threads wait
    /// meanwhile (`replacing`). Not done for a persistent session with QoS 2 messages in
    /// flight, whose message ids the broker holds.
    func replaceHandle(dropping mid: Int32) -> Bool {
        let holdsQoS2 = control.withLock { state in
            state.outstanding.values.contains { $0.qos == .exactlyOnce }
        }
        if holdsQoS2 && !configuration.cleanStart { return false }
        control.withLock { $0.replacing = true }
        defer { finishReplacing() }
        // Taken once no other thread is inside libmosquitto: a publish that was has recorded
        // its message by then.
        var again: [Sent] = []
        while true {
            let taken = control.withLock { state -> [Sent]? in
                guard state.users == 0 else { return nil }
                let kept = state.outstanding.filter { $0.key != mid && $0.value.message != nil }.values.sorted {
                    $0.order < $1.order
                }
                let allowed = kept.filter {
                    state.limits.allows(packetSize: $0.size) && !state.refusedTopics.contains($0.topic)
                }
                state.refusedCount += kept.count - allowed.count
                state.outstanding.removeAll()
                state.earlyPublishDone.removeAll()
                return allowed
            }
            if let taken {
                again = taken
                break
            }
            usleep(1000)
        }
        let userdata = Unmanaged.passUnretained(self).toOpaque()
        let id = configuration.clientID.isEmpty ? nil : configuration.clientID
        let rc = withOptionalCString(id) { mosquitto_reinitialise(h, $0, configuration.cleanStart, userdata) }
        guard rc == MOSQ_ERR_SUCCESS.rawValue else {
            // The handle is as it was (reinitialise checks its arguments first): reconnected as such.
            logger.error(
                "MQTT: could not make the connection's handle anew", metadata: ["error": "\(MQTTError(mosquitto: rc))"])
            return false
        }
        control.withLock { state in
            state.needsConfiguring = true
            state.resendAfterConnect = again
            state.awaitingFirstConnect = true
        }
        return true
    }

    /// A handle made anew is configured before its first connect; false (and logged) when that
    /// fails, to be tried again at the next attempt.
    func configureIfNeeded() -> MQTTError? {
        guard control.withLock({ $0.needsConfiguring }) else { return nil }
        do throws(MQTTError) {
            try Connection.configure(h, configuration)
        } catch {
            return error
        }
        control.withLock { $0.needsConfiguring = false }
        return nil
    }

    /// After the first connect of a handle made anew (`mosquitto_connect_bind_v5` set it up):
    /// the publishes kept by `replaceHandle`, handed to it again in their order.
    func resendAfterConnect() {
        let again = control.withLock { state in
            defer { state.resendAfterConnect = [] }
            return state.resendAfterConnect
        }
        // Publishes that came meanwhile go in after these, now that the handle is set up.
        defer { finishFirstConnect() }
        guard !again.isEmpty else { return }
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
        control.withLock { state in state.outstanding.merge(resent) }
    }

    private func finishFirstConnect() {
        let resumed = control.withLock { state -> [CheckedContinuation<Outcome, Never>] in
            guard state.awaitingFirstConnect else { return [] }
            state.awaitingFirstConnect = false
            return state.takeCapacityWaiters(configuration)
        }
        for waiter in resumed { waiter.resume(returning: .success(())) }
    }

    private func finishReplacing() {
        let resumed = control.withLock { state in
            state.replacing = false
            return state.takeCapacityWaiters(configuration)
        }
        for waiter in resumed { waiter.resume(returning: .success(())) }
    }

    /// After a lost connection: when a publish caused it, the message is named in the log,
    /// dropped from libmosquitto's queue, and either teaches a packet limit (larger than any
    /// kept) or is never sent again (its topic refused from now on). Returns whether the handle
    /// was made anew (the next connect is then a first one) and the limit learned, to tell once
    /// the connection's loss is known.
    func dropCulprit(after error: MQTTError) -> (replaced: Bool, learned: MQTTLearnedLimit?) {
        // Weighed once no other thread is inside libmosquitto: a publisher that was may have
        // written its packet (libmosquitto writes from the caller's thread) and not yet
        // recorded it, and that packet may be the one the broker refused.
        control.withLock { $0.replacing = true }
        defer { finishReplacing() }
        while control.withLock({ $0.users > 0 }) { usleep(1000) }
        guard let (sent, mid, bySize) = culprit(after: error) else { return (false, nil) }
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
        let learned = bySize ? learn(refused: sent.size, fromLostConnection: true) : nil
        // A QoS 0 message is gone with the connection; a QoS 1/2 one libmosquitto would resend.
        guard let mid else { return (false, learned) }
        return (replaceHandle(dropping: mid), learned)
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
