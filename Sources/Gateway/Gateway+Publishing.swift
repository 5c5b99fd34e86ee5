import Foundation
import HomeModel
import MQTT

/// Everything the gateway publishes goes through here to the outbox: plain and retained
/// messages, `$gateway/event`, and republications after a reconnect or Home Assistant's birth.
extension Gateway {
    func enqueue(
        _ topic: String, _ payload: [UInt8], retain: Bool, qos: MQTTQoS? = nil, properties: MQTTPublishProperties? = nil
    ) {
        guard !isStopped else { return }
        counters.published += 1
        activity.published()
        outbox.publish(topic, payload, retain: retain, qos: qos, properties: properties)
    }

    /// An answer on its own topic (`result`, `$result`, `response/<op>`) and, for an MQTT 5
    /// request that named a response topic, there too with its correlation data.
    /// One that does not fit the broker's maximum packet size becomes a `too-large` error.
    func answer(_ topic: String, json: JSONValue, reply: Reply?) {
        let payload = Array(json.encoded().utf8)
        enqueue(topic, fitting(topic, payload, json: json, properties: Outbox.json), retain: false)
        if let reply, !answerLocally(replyTopic: reply.topic, json) {
            var properties = Outbox.json
            properties.correlationData = reply.correlationData
            enqueue(
                reply.topic, fitting(reply.topic, payload, json: json, properties: properties), retain: false,
                properties: properties)
        }
    }

    func enqueue(_ topic: String, json: JSONValue, retain: Bool = false) {
        enqueue(topic, Array(json.encoded().utf8), retain: retain)
    }

    func enqueue(_ list: [CharacteristicTopics]) {
        guard !list.isEmpty, !isStopped else { return }
        counters.published += CharacteristicTopics.messages(in: list)
        activity.published(CharacteristicTopics.messages(in: list))
        outbox.queue(list)
    }

    /// Queues a republication behind what the outbox holds.
    func enqueue(_ republication: Outbox.Republication) {
        guard !isStopped else { return }
        outbox.queue(republication)
    }

    /// Publishes a retained topic if its payload changed; an empty payload clears it.
    func setRetained(_ topic: String, _ payload: [UInt8], qos: MQTTQoS? = nil) {
        guard retained.record(topic, payload) else { return }
        enqueue(topic, payload, retain: true, qos: qos)
    }

    /// `setRetained` for a discovery config. Home Assistant drops one entity of a device that
    /// stays only when told its platform: a changed config also lists, platform only, the
    /// components of the one it replaces (made again from the tree it was made from).
    func setDiscovery(_ topic: String, _ document: JSONValue, previous: () -> JSONValue?) {
        let payload = Array(document.encoded().utf8)
        let replaces = retained.contains(topic)
        guard retained.record(topic, payload) else { return }
        guard replaces, let previous = previous() else {
            enqueue(topic, payload, retain: true)
            return
        }
        let merged = HomeAssistantDiscovery.withRemovedComponents(previous: previous, next: document)
        enqueue(topic, Array(merged.encoded().utf8), retain: true)
    }

    /// Makes a republication when the outbox comes to it, one accessory at a time (a large
    /// home's whole retained tree would otherwise be in memory at once), with one discovery
    /// context for all of them (it knows every accessory's node id). `online` comes last: a
    /// client that sees it knows the whole tree is there.
    nonisolated func republish(_ kind: Outbox.Republication) async {
        let discoveryOnly = kind == .discovery
        let discovery = await publishedDiscoveryContext()
        for id in await publishedAccessoryIDs() {
            for (topic, payload) in await republication(of: id, discovery: discovery, discoveryOnly: discoveryOnly) {
                await outbox.send(topic, payload, retain: true)
            }
            if !discoveryOnly { await outbox.send(await characteristicRepublication(of: id)) }
        }
        guard !discoveryOnly else { return }
        for (topic, payload) in await treeMessages() {
            await outbox.send(topic, payload, retain: true, qos: Self.treeQoS)
        }
        await outbox.send(statusTopic, Array("online".utf8), retain: true)
    }

    func publishedAccessoryIDs() -> [String] { publishedTree.accessories.map(\.id) }

    func publishedDiscoveryContext() -> HomeAssistantDiscovery.Context? { discoveryContext(publishedTree) }

    /// An accessory's retained documents as they are on the broker, to publish again.
    func republication(
        of id: String, discovery: HomeAssistantDiscovery.Context?, discoveryOnly: Bool
    ) -> [(String, [UInt8])] {
        guard let node = publishedTree.accessory(id: id) else { return [] }
        var out: [(String, [UInt8])] = []
        if !discoveryOnly {
            out.append((node.topic + "/$info", Array(Payloads.info(node).encoded().utf8)))
            out.append((node.topic + "/$availability", availabilityPayload(node)))
            if config[AccessoryStateConfig.self].enabled {
                out.append((accessoryStateTopic(node), Array(accessoryState(node).encoded().utf8)))
            }
        }
        if let (topic, document) = discovery?.config(node) {
            out.append((topic, Array(document.encoded().utf8)))
        }
        return out
    }

    func characteristicRepublication(of id: String) -> [CharacteristicTopics] {
        guard let node = publishedTree.accessory(id: id) else { return [] }
        var texts: [String: [UInt8]] = [:]
        return characteristicTopics(of: node, old: TopicTree(base: base), texts: &texts)
    }

    func announceChanges(from old: TopicTree) {
        for node in tree.accessories {
            guard let before = old.accessory(id: node.id) else {
                event(.accessoryAdded, accessory: node)
                continue
            }
            if before.displayName != node.displayName {
                event(
                    .accessoryRenamed, accessory: node,
                    extra: ["old-name": .string(before.displayName), "old-topic": .string(before.topic)])
            }
            if before.room.id != node.room.id {
                event(
                    .accessoryMoved, accessory: node,
                    extra: ["old-room": .string(before.room.name), "old-topic": .string(before.topic)])
            } else if before.topic != node.topic && before.displayName == node.displayName {
                event(.accessoryTopicChanged, accessory: node, extra: ["old-topic": .string(before.topic)])
            }
        }
        for node in old.accessories where tree.accessory(id: node.id) == nil {
            let reason: GatewayEvent =
                accessories[node.id] == nil || removedAccessories.contains(node.id)
                ? .accessoryRemoved : .accessoryLeftScope
            event(reason, accessory: node)
        }
    }

    func event(_ name: GatewayEvent, accessory node: TopicTree.AccessoryNode, extra: [String: JSONValue] = [:]) {
        var object: [String: JSONValue] = [
            "event": .string(name.rawValue),
            "accessory": .object([
                "id": .string(node.id), "name": .string(node.displayName),
                "room": .string(node.room.name), "topic": .string(node.topic),
            ]),
        ]
        object.merge(extra) { a, _ in a }
        enqueue("\(base)/$gateway/event", json: .object(object))
        notifyObservers(.event(.object(object)))
    }

    func event(_ name: GatewayEvent, fields: [String: JSONValue]) {
        var object = fields
        object["event"] = .string(name.rawValue)
        enqueue("\(base)/$gateway/event", json: .object(object))
        notifyObservers(.event(.object(object)))
    }
}
