import HomeModel
import Logging
import MQTT

/// The gateway under the broker's limits: the tree whole or in pages (`TreeDocuments`), answers
/// that fit or an error that does (`Outbox.fitting`), and the reports of what the broker takes
/// (`BrokerReports`).
extension Gateway {
    /// The tree's retained topics in publish order (`TreeDocuments.messages`), each payload
    /// made when asked for.
    var treeMessages: [TreeDocuments.Message] { publication.treeDocuments.messages(treeInputs, logger: logger) }

    /// Publishes what changed of the tree's topics (`TreeDocuments.messages`, through
    /// `setRetained`) and returns them all. Each page is made as its turn comes and let go once
    /// queued.
    @discardableResult
    func applyTree() -> [String] {
        let messages = treeMessages
        for message in messages {
            let payload = message.payload()
            setRetained(message.topic, payload, qos: TreeDocuments.qos(size: payload.count, mqtt: mqtt))
        }
        return messages.map(\.topic)
    }

    /// `applyTree` for the first publication: a page at a time, each made once the outbox has
    /// room, so that a large home's pages are never all in memory while the broker takes them
    /// (as `publishAll` does with the accessories' topics). Nothing else runs on the actor
    /// meanwhile, so the tree cannot change under it.
    func applyTreePaced() async {
        for message in treeMessages {
            if Task.isCancelled { return }
            let payload = message.payload()
            setRetained(message.topic, payload, qos: TreeDocuments.qos(size: payload.count, mqtt: mqtt))
            await outbox.wait(below: publication.backlog, bytes: Publication.backlogBytes)
        }
    }

    /// The `tree` request's answer (`TreeDocuments.answer`).
    func treeAnswer() throws(GatewayFailure) -> JSONValue { try TreeDocuments.answer(treeInputs) }

    private var treeInputs: TreeDocuments.Inputs {
        TreeDocuments.Inputs(
            tree: tree, home: currentHome, base: base, treeTopic: treeTopic, budget: budget.payload,
            pageBudget: budget.tree, packetLimit: budget.limitText)
    }

    /// Payload sizes under the broker's limits (`PacketBudget`).
    nonisolated var budget: PacketBudget { PacketBudget(mqtt: mqtt, treePageSize: config.treePageSize) }

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
