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
            reportTreeForm(pages: 0, omitted: [])
            return [(treeTopic, bytes)]
        case .paged(let paged):
            reportTreeForm(pages: paged.pages.count, omitted: paged.omitted)
            if paged.index == nil {
                logger.error(
                    "the tree's index does not fit the broker's maximum packet size: the tree topic is cleared",
                    metadata: [
                        "topic": "\(treeTopic)", "pages": "\(paged.pages.count)", "limit": "\(packetLimitText)",
                    ])
            }
            return paged.pages + [(treeTopic, paged.index ?? [])]
        }
    }

    /// Publishes what changed of the tree's topics (`setRetained`) and returns them all.
    @discardableResult
    func applyTree() -> [String] {
        let messages = treeMessages()
        for (topic, payload) in messages { setRetained(topic, payload, qos: Self.treeQoS) }
        return messages.map(\.topic)
    }

    /// The largest payload a retained, typed JSON publication on `topic` may have under the
    /// broker's maximum packet size (the remaining length's varint may grow by 3 bytes with it).
    nonisolated func payloadBudget(_ topic: String) -> Int {
        guard let limit = mqtt.brokerLimits.maximumPacketSize else { return Int.max }
        let overhead = mqtt.packetSize(topic: topic, payloadCount: 0, qos: Self.treeQoS, properties: Outbox.json)
        return limit - overhead - 3
    }

    var packetLimitText: String { mqtt.brokerLimits.maximumPacketSize.map(String.init) ?? "none" }

    /// One log line when the tree's form changes (whole, or how many pages), not at every rebuild.
    private func reportTreeForm(pages: Int, omitted: [TopicTree.AccessoryNode]) {
        let form = TreeForm(pages: pages, omitted: omitted.map(\.id))
        guard form != reportedTreeForm else { return }
        reportedTreeForm = form
        if pages > 0 {
            logger.info(
                "the tree is larger than the broker's maximum packet size: published in pages",
                metadata: [
                    "index": "\(treeTopic)", "pages": "\(pages)", "limit": "\(packetLimitText)",
                ])
        }
        if !omitted.isEmpty {
            logger.error(
                "accessories too large for a page of the tree: listed under `omitted` in the index",
                metadata: ["accessories": "\(omitted.map(\.displayName).joined(separator: ", "))"])
        }
    }

    /// The `tree` request's answer: the whole tree when it fits an answer, else the paged
    /// index (the pages are retained), else a `too-large` failure.
    func treeAnswer() throws(GatewayFailure) -> JSONValue {
        guard let currentHome else { return treeJSON() }
        // The answer wraps the tree with an id and a status: room for them besides the tree.
        let responseTopic = "\(base)/$gateway/response/tree"
        let room = payloadBudget(responseTopic) - 256
        switch TreePublication.make(tree, home: currentHome, treeTopic: treeTopic, budget: { _ in room }) {
        case .whole(let bytes):
            return (try? JSONValue(parsing: bytes)) ?? treeJSON()
        case .paged(let paged):
            guard let index = paged.index, let json = try? JSONValue(parsing: index) else {
                throw GatewayFailure(
                    code: .tooLarge,
                    message: "the tree does not fit the broker's maximum packet size (\(packetLimitText)) "
                        + "even as an index of pages")
            }
            return json
        }
    }

    /// `payload` for an answer on `topic`, or, when its packet would exceed the broker's
    /// maximum, a `too-large` error answer in its place (with the request's `id` and `op`).
    func fitting(_ topic: String, _ payload: [UInt8], json: JSONValue, properties: MQTTPublishProperties) -> [UInt8] {
        let size = mqtt.packetSize(topic: topic, payloadCount: payload.count, qos: config.qos, properties: properties)
        guard !mqtt.brokerLimits.allows(packetSize: size) else { return payload }
        outbox.refused(topic, size: size, limit: mqtt.brokerLimits.maximumPacketSize ?? 0)
        var object: [String: JSONValue] = [
            "id": json["id"] ?? .null, "status": .string("error"), "code": .string(ErrorCode.tooLarge.rawValue),
            "message": .string(
                "the answer is a packet of \(size) bytes, more than the broker's maximum packet size (\(packetLimitText))"
            ),
        ]
        if let op = json["op"] { object["op"] = op }
        return Array(JSONValue.object(object).encoded().utf8)
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

/// The tree's form last logged: whole (0 pages) or paged, and the accessories left out.
struct TreeForm: Equatable {
    var pages: Int
    var omitted: [String]
}
