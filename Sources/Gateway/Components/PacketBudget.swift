import MQTT

/// How large a payload may be on a topic under the broker's maximum packet size (announced in
/// its CONNACK, configured, or learned from its refusals: `MQTTTransport.brokerLimits`, read at
/// each call, so a limit learned later counts at once), and a retained tree document under
/// `tree-page-size` besides.
struct PacketBudget: Sendable {
    let mqtt: any MQTTTransport
    /// `tree-page-size`; 0: only the broker's limit.
    let treePageSize: Int

    /// The largest payload a retained, typed JSON publication on `topic` may have (the remaining
    /// length's varint may grow by 3 bytes with it); `.max` with no limit known.
    func payload(_ topic: String) -> Int {
        guard let limit = mqtt.brokerLimits.maximumPacketSize else { return .max }
        let overhead = mqtt.packetSize(
            topic: topic, payloadCount: 0, qos: TreeDocuments.qos(size: 0, mqtt: mqtt), properties: Outbox.json)
        return limit - overhead - 3
    }

    /// The largest payload of a retained tree document on `topic`.
    func tree(_ topic: String) -> Int {
        let packet = payload(topic)
        return treePageSize > 0 ? min(packet, treePageSize) : packet
    }

    /// The broker's limit as the log and errors say it.
    var limitText: String { BrokerReports.packetLimitText(mqtt) }
}
