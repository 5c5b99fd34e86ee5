import Logging
import MQTT

/// What the gateway says of its broker's limits, to whoever runs it: what the broker takes and
/// what the gateway does less because of it, a packet limit learned from a refusal, and a
/// broker that keeps closing the connection of an MQTT 3.1.1 client. Each line names the setting
/// that states the limit up front; none changes what is published.
enum BrokerReports {
    /// The broker's maximum packet size as logged and answered: `none` when there is none.
    static func packetLimitText(_ mqtt: any MQTTTransport) -> String {
        mqtt.brokerLimits.maximumPacketSize.map(String.init) ?? "none"
    }

    /// The start-up line that says what the broker takes and what the gateway does less
    /// because of it.
    static func limits(_ mqtt: any MQTTTransport, config: GatewayConfig, logger: Logger) {
        let limits = mqtt.brokerLimits
        let downgrades = limits.downgrades(requestedQoS: config.qos)
        logger.info(
            downgrades.isEmpty ? "broker limits" : "broker limits: publishing downgraded",
            metadata: [
                "protocol": "\(mqtt.protocolVersion == .v5 ? "5" : "3.1.1")",
                "max-packet-size": "\(packetLimitText(mqtt))", "max-qos": "\(limits.maximumQoS.rawValue)",
                "retain-available": "\(limits.retainAvailable)", "receive-maximum": "\(limits.receiveMaximum)",
                "topic-aliases": "not used (broker allows \(limits.topicAliasMaximum))",
                "downgraded": "\(downgrades.isEmpty ? "nothing" : downgrades.joined(separator: "; "))",
            ])
    }

    /// A packet limit the MQTT client learned from the broker's refusals, said once, with the
    /// key that states it up front.
    static func learned(_ limit: MQTTLearnedLimit, config: GatewayConfig, logger: Logger) {
        let size = limit.limits.maximumPacketSize.map(String.init) ?? "?"
        let text =
            "the broker refused a packet larger than any it kept and announced no limit: publishing packets of "
            + "at most \(size) bytes from now on (the tree in pages); set broker.max-packet-size to the "
            + "broker's limit to state it up front"
        logger.warning(
            "\(text)",
            metadata: [
                "refused-bytes": "\(limit.refusedPacketSize)", "largest-kept-bytes": "\(limit.largestKeptPacketSize)",
                "config": "\(config.file)",
            ])
    }

    /// The third lost connection within a minute under MQTT 3.1.1 with no packet limit known
    /// (`ConnectionWatch.countLoss`): a broker that limits the packet size closes the
    /// connection of a client that sends a larger packet, and 3.1.1 cannot say the limit.
    static func repeatedLosses(config: GatewayConfig, logger: Logger) {
        logger.error(
            """
            the broker closed the connection 3 times within a minute: a broker that limits the packet size does \
            so when a larger packet comes, and MQTT 3.1.1 cannot say the limit; set broker.max-packet-size to it \
            (mosquitto: max_packet_size, or message_size_limit)
            """,
            metadata: ["config": "\(config.file)"])
    }
}
