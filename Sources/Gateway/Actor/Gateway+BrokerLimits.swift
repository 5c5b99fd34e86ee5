import HomeModel
import Logging
import MQTT

/// The gateway under the broker's limits: the tree whole or in pages, answers that fit or an
/// error that does, and the start-up report of what the broker takes.
extension Gateway {
    /// The tree's retained topics and payloads in publish order: the pages, then the index;
    /// or the whole tree alone. (`TreePublication` describes the paged form.)
    func treeMessages() -> [(topic: String, payload: [UInt8])] {
        guard let currentHome else { return [(treeTopic, treeBytes())] }
        switch TreePublication.make(tree, home: currentHome, treeTopic: treeTopic, budget: payloadBudget) {
        case .whole(let bytes):
            reportTreeForm(TreeForm(pages: 0, omitted: [], indexFits: true))
            return [(treeTopic, bytes)]
        case .paged(let paged):
            reportTreeForm(
                TreeForm(
                    pages: paged.pages.count, omitted: paged.omitted.map(\.displayName), indexFits: paged.index != nil))
            // Pages that no index lists are no tree: none is published, and the topic is cleared.
            guard let index = paged.index else { return [(treeTopic, [])] }
            return paged.pages + [(treeTopic, index)]
        }
    }

    /// Publishes what changed of the tree's topics (`setRetained`) and returns them all.
    @discardableResult
    func applyTree() -> [String] {
        let messages = treeMessages()
        for (topic, payload) in messages { setRetained(topic, payload, qos: treeQoS(size: payload.count)) }
        return messages.map(\.topic)
    }

    /// The largest payload a retained, typed JSON publication on `topic` may have under the
    /// broker's maximum packet size (the remaining length's varint may grow by 3 bytes with it).
    nonisolated func payloadBudget(_ topic: String) -> Int {
        guard let limit = mqtt.brokerLimits.maximumPacketSize else { return .max }
        let overhead = mqtt.packetSize(topic: topic, payloadCount: 0, qos: treeQoS(size: 0), properties: Outbox.json)
        return limit - overhead - 3
    }

    var packetLimitText: String { mqtt.brokerLimits.maximumPacketSize.map(String.init) ?? "none" }

    /// A log line when the tree's form changes (whole, how many pages, what is left out), not
    /// at every rebuild.
    private func reportTreeForm(_ form: TreeForm) {
        guard publication.noteTreeForm(form) else { return }
        let metadata: Logger.Metadata = [
            "index": "\(treeTopic)", "pages": "\(form.pages)", "limit": "\(packetLimitText)",
        ]
        if !form.indexFits {
            logger.error(
                "the tree's index does not fit the broker's maximum packet size: no tree is published",
                metadata: metadata)
        } else if form.pages > 0 {
            logger.info(
                "the tree is larger than the broker's maximum packet size: published in pages", metadata: metadata)
        }
        if !form.omitted.isEmpty {
            logger.error(
                "accessories too large for a page of the tree: listed under `omitted` in the index",
                metadata: ["accessories": "\(form.omitted.joined(separator: ", "))"])
        }
    }

    /// The `tree` request's answer: the whole tree when it fits an answer, else the index of
    /// the retained pages, else a `too-large` failure.
    func treeAnswer() throws(GatewayFailure) -> JSONValue {
        guard let currentHome else { return treeJSON() }
        // The answer wraps the document with an id and a status: room for them besides it.
        let budget = payloadBudget("\(base)/$gateway/response/tree")
        let room = budget == .max ? .max : budget - 256
        switch TreePublication.make(tree, home: currentHome, treeTopic: treeTopic, budget: payloadBudget) {
        case .whole(let bytes) where bytes.count <= room:
            if let json = try? JSONValue(parsing: bytes) { return json }
        case .paged(let paged):
            if let index = paged.index, index.count <= room, let json = try? JSONValue(parsing: index) { return json }
        default:
            break
        }
        throw GatewayFailure(
            code: .tooLarge,
            message: "the tree does not fit an answer under the broker's maximum packet size (\(packetLimitText)); "
                + "read it at \(treeTopic)")
    }

    /// A packet limit the MQTT client learned from the broker's refusals (the broker announced
    /// none): said once, with the key that states it up front, and the retained topics made
    /// again under it, the tree in pages. After a lost connection the reconnect's
    /// republication does that already.
    func learned(_ limit: MQTTLearnedLimit) {
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
        guard isStarted, mqtt.connectionState.isConnected else { return }
        applyRetained()
    }

    /// The start-up line that says what the broker takes and what the gateway does less
    /// because of it.
    func reportBrokerLimits() {
        let limits = mqtt.brokerLimits
        let downgrades = limits.downgrades(requestedQoS: config.qos)
        logger.info(
            downgrades.isEmpty ? "broker limits" : "broker limits: publishing downgraded",
            metadata: [
                "protocol": "\(mqtt.protocolVersion == .v5 ? "5" : "3.1.1")",
                "max-packet-size": "\(packetLimitText)", "max-qos": "\(limits.maximumQoS.rawValue)",
                "retain-available": "\(limits.retainAvailable)", "receive-maximum": "\(limits.receiveMaximum)",
                "topic-aliases": "not used (broker allows \(limits.topicAliasMaximum))",
                "downgraded": "\(downgrades.isEmpty ? "nothing" : downgrades.joined(separator: "; "))",
            ])
    }
}

/// The tree's form last logged: whole (0 pages) or paged, the accessories left out (their
/// names), and whether the index fits.
struct TreeForm: Equatable {
    var pages: Int
    var omitted: [String]
    var indexFits: Bool
}
