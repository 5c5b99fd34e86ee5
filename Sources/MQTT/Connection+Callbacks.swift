internal import CMosquitto
import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

// libmosquitto's C callbacks, on the network thread: connect, disconnect, publish, message,
// SUBACK/UNSUBACK and log, each copied out of C and handed to the waiting calls.
extension Connection {
    // MARK: C callbacks (network thread)

    private static func box(_ obj: UnsafeMutableRawPointer?) -> Connection? {
        guard let obj else { return nil }
        return Unmanaged<Connection>.fromOpaque(obj).takeUnretainedValue()
    }

    static func installCallbacks(_ h: OpaquePointer) {
        mosquitto_connect_v5_callback_set(h) { _, obj, rc, flags, properties in
            Connection.box(obj)?.didConnect(rc: rc, sessionPresent: flags & 1 != 0, properties: properties)
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
    /// callback is set (two per QoS 1 publish), which costs more than the publish itself.
    /// The lines explain why a connection attempt failed (TLS, DNS, refusals), so the callback
    /// is set while connecting and cleared once connected, unless trace logging wants them.
    static func installLogCallback(_ h: OpaquePointer) {
        mosquitto_log_callback_set(h) { _, obj, level, text in
            guard let text else { return }
            Connection.box(obj)?.didLog(level: level, String(cString: text))
        }
    }

    private func didConnect(rc: Int32, sessionPresent: Bool, properties: OpaquePointer?) {
        guard rc == 0 else {
            let error = MQTTError(refusal: rc, protocolVersion: configuration.protocolVersion)
            control.withLock { $0.refusal = error }
            return
        }
        let limits = readLimits(properties)
        // Mark connected before reading the subscription list (see ClientCore.remember).
        let waiters = control.withLock { state in
            state.limits = limits
            state.connected = true
            state.everConnected = true
            state.connectedAt = .now
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
        core.reportLimits(limits, logger: logger)
        core.setState(.connected, from: self)
        for waiter in waiters { waiter.resume(returning: .success(())) }
    }

    /// The CONNACK's limits (MQTT 5; a property it leaves out keeps the protocol's default)
    /// with the configured maximum packet size. A 3.1.1 CONNACK has no properties.
    private func readLimits(_ properties: OpaquePointer?) -> MQTTBrokerLimits {
        var limits = MQTTBrokerLimits(
            configuredMaximumPacketSize: configuration.maximumPacketSize,
            maximumTopicLevels: configuration.maximumTopicLevels)
        limits.learnedMaximumPacketSize = control.withLock { $0.limits.learnedMaximumPacketSize }
        guard let properties else { return limits }
        var size: UInt32 = 0
        if mosquitto_property_read_int32(properties, Int32(MQTT_PROP_MAXIMUM_PACKET_SIZE.rawValue), &size, false)
            != nil
        {
            limits.brokerMaximumPacketSize = Int(size)
        }
        var byte: UInt8 = 0
        if mosquitto_property_read_byte(properties, Int32(MQTT_PROP_MAXIMUM_QOS.rawValue), &byte, false) != nil {
            limits.maximumQoS = MQTTQoS(rawValue: Int(byte)) ?? .exactlyOnce
        }
        byte = 1
        if mosquitto_property_read_byte(properties, Int32(MQTT_PROP_RETAIN_AVAILABLE.rawValue), &byte, false) != nil {
            limits.retainAvailable = byte != 0
        }
        var word: UInt16 = 0
        if mosquitto_property_read_int16(properties, Int32(MQTT_PROP_RECEIVE_MAXIMUM.rawValue), &word, false) != nil {
            limits.receiveMaximum = Int(word)
        }
        word = 0
        if mosquitto_property_read_int16(properties, Int32(MQTT_PROP_TOPIC_ALIAS_MAXIMUM.rawValue), &word, false)
            != nil
        {
            limits.topicAliasMaximum = Int(word)
        }
        return limits
    }

    private func didDisconnect(rc: Int32) {
        // A server-sent DISCONNECT (MQTT 5) carries a reason ≥ 0x80; libmosquitto's own errors are MOSQ_ERR_*.
        guard configuration.protocolVersion == .v5, rc >= 0x80 else { return }
        let error = MQTTError(refusal: rc, protocolVersion: .v5)
        control.withLock { $0.serverDisconnect = error }
    }

    private func didPublish(mid: Int32, reason: Int32) {
        let (resumed, sent) = control.withLock { state -> ([CheckedContinuation<Outcome, Never>], Sent?) in
            var sent = state.outstanding.removeValue(forKey: mid)
            if sent == nil {
                state.earlyPublishDone[mid] = (state.epoch, reason)
            } else if let kept = sent, reason < 0x80 {
                // The common case settled under this lock: no second one per acknowledgement.
                state.settleKept(kept, protocolVersion: configuration.protocolVersion)
                sent = nil
            }
            let resumed = state.takeCapacityWaiters(
                configuration, resumingAt: Connection.resumeLevel(limit: configuration.maxQueuedPublishes),
                bytes: Connection.resumeLevel(limit: configuration.maxQueuedBytes))
            return (resumed, sent)
        }
        // A refusal: counted, logged and learned from outside the lock.
        if let sent { settle(sent, reason: reason) }
        for waiter in resumed { waiter.resume(returning: .success(())) }
    }

    /// How few messages (or bytes) are outstanding when a publisher that waited for room is resumed: a
    /// quarter of the limit below it. Resumed at each acknowledgement, a publisher that keeps
    /// the limit full would wake once per message, and the network thread with it; resumed a
    /// quarter down, it publishes that many at once and each side wakes once per batch.
    static func resumeLevel(limit: Int) -> Int { limit - max(1, limit / 4) }

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
            if mosquitto_property_read_int32(
                properties, Int32(MQTT_PROP_MESSAGE_EXPIRY_INTERVAL.rawValue), &expiry, false)
                != nil
            {
                copied.properties.messageExpiry = expiry
            }
            var format: UInt8 = 0
            if mosquitto_property_read_byte(
                properties, Int32(MQTT_PROP_PAYLOAD_FORMAT_INDICATOR.rawValue), &format, false) != nil
            {
                copied.properties.isUTF8Text = format == 1
            }
            copied.properties.contentType = Self.readString(properties, MQTT_PROP_CONTENT_TYPE)
            copied.properties.responseTopic = Self.readString(properties, MQTT_PROP_RESPONSE_TOPIC)
            var data: UnsafeMutableRawPointer?
            var length: UInt16 = 0
            if mosquitto_property_read_binary(
                properties, Int32(MQTT_PROP_CORRELATION_DATA.rawValue), &data, &length, false) != nil
            {
                copied.properties.correlationData =
                    data.map { Array(UnsafeRawBufferPointer(start: $0, count: Int(length))) } ?? []
                free(data)
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

    /// A string property of a received message, copied (libmosquitto's copy freed).
    private static func readString(_ properties: OpaquePointer, _ identifier: mqtt5_property) -> String? {
        var value: UnsafeMutablePointer<CChar>?
        guard mosquitto_property_read_string(properties, Int32(identifier.rawValue), &value, false) != nil, let value
        else { return nil }
        defer { free(value) }
        return String(cString: value)
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
}
