import HomeModel
import Logging
import MQTT

/// The gateway under the broker's limits: the tree whole or in pages (`TreeDocuments`), answers
/// that fit or an error that does (`Outbox.fitting`), and the reports of what the broker takes
/// (`BrokerReports`).
extension Gateway {
    /// The tree's retained topics and payloads in publish order (`TreeDocuments.messages`).
    func treeMessages() -> [(topic: String, payload: [UInt8])] {
        publication.treeDocuments.messages(treeInputs, logger: logger)
    }

    /// Publishes what changed of the tree's topics (`setRetained`) and returns them all.
    @discardableResult
    func applyTree() -> [String] {
        let messages = treeMessages()
        for (topic, payload) in messages {
            setRetained(topic, payload, qos: TreeDocuments.qos(size: payload.count, mqtt: mqtt))
        }
        return messages.map(\.topic)
    }

    /// The `tree` request's answer (`TreeDocuments.answer`).
    func treeAnswer() throws(GatewayFailure) -> JSONValue { try TreeDocuments.answer(treeInputs) }

    private var treeInputs: TreeDocuments.Inputs {
        TreeDocuments.Inputs(
            tree: tree, home: currentHome, base: base, treeTopic: treeTopic, budget: payloadBudget,
            pageBudget: treeBudget, packetLimit: packetLimitText)
    }

    /// The largest payload of a retained tree document on `topic`: the broker's limit, and
    /// `tree-page-size` below it.
    nonisolated func treeBudget(_ topic: String) -> Int {
        let packet = payloadBudget(topic)
        return config.treePageSize > 0 ? min(packet, config.treePageSize) : packet
    }

    /// The largest payload a retained, typed JSON publication on `topic` may have under the
    /// broker's maximum packet size (the remaining length's varint may grow by 3 bytes with it).
    nonisolated func payloadBudget(_ topic: String) -> Int {
        guard let limit = mqtt.brokerLimits.maximumPacketSize else { return .max }
        let overhead = mqtt.packetSize(
            topic: topic, payloadCount: 0, qos: TreeDocuments.qos(size: 0, mqtt: mqtt), properties: Outbox.json)
        return limit - overhead - 3
    }

    var packetLimitText: String { BrokerReports.packetLimitText(mqtt) }

    /// A packet limit the MQTT client learned from the broker's refusals (the broker announced
    /// none): said once (`BrokerReports.learned`), and the retained topics made again under it,
    /// the tree in pages. After a lost connection the reconnect's republication does that
    /// already.
    func learned(_ limit: MQTTLearnedLimit) {
        BrokerReports.learned(limit, config: config, logger: logger)
        guard isStarted, mqtt.connectionState.isConnected else { return }
        applyRetained()
    }
}
