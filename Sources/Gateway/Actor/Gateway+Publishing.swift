import Foundation
import HomeModel
import MQTT

/// Everything the gateway publishes goes through here to the outbox: plain and retained
/// messages, `$gateway/event`, and republications after a reconnect or when an output asks.
extension Gateway {
    func enqueue(
        _ topic: String, _ payload: [UInt8], retain: Bool, qos: MQTTQoS? = nil, properties: MQTTPublishProperties? = nil
    ) {
        guard !isStopped else { return }
        activity.published()
        outbox.publish(topic, payload, retain: retain, qos: qos, properties: properties)
    }

    func enqueue(_ list: [CharacteristicTopics]) {
        guard !list.isEmpty, !isStopped else { return }
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
        guard publication.record(topic, payload) else { return }
        enqueue(topic, payload, retain: true, qos: qos)
    }

    /// Makes a republication when the outbox comes to it, one accessory at a time (a large
    /// home's whole retained tree would otherwise be in memory at once), after one pass begins
    /// for the outputs (an output may need the whole tree, as every accessory's node id).
    /// `online` comes last: a client that sees it knows the whole tree is there. Each message is
    /// counted as published, as `enqueue` counts the others (health and `/metrics`).
    nonisolated func republish(_ kind: Outbox.Republication) async {
        let only: ObjectIdentifier?
        switch kind {
        case .all: only = nil
        case .output(let output): only = output
        }
        let (outbox, activity) = (outbox, activity)
        let send = { (topic: String, payload: [UInt8], qos: MQTTQoS?) async in
            activity.published()
            await outbox.send(topic, payload, retain: true, qos: qos)
        }
        for id in await beginRepublication() {
            for (topic, payload) in await republication(of: id, only: only) { await send(topic, payload, nil) }
            if only == nil {
                let characteristics = await characteristicRepublication(of: id)
                activity.published(CharacteristicTopics.messages(in: characteristics))
                await outbox.send(characteristics)
            }
        }
        for (topic, payload) in await gatewayRepublication(only: only) { await send(topic, payload, nil) }
        guard only == nil else { return }
        // A page is made as its turn comes, and let go once the outbox took it.
        for message in await treeMessages {
            let payload = message.payload()
            await send(message.topic, payload, TreeDocuments.qos(size: payload.count, mqtt: mqtt))
        }
        if publishesHealth, let health = await healthPayload() { await send(healthTopic, health, nil) }
        await send(statusTopic, Array("online".utf8), nil)
    }

    /// The outputs' documents of the gateway itself, after every accessory's.
    func gatewayRepublication(only output: ObjectIdentifier?) -> [(String, [UInt8])] {
        outputs.gatewayRepublication(only: output, self)
    }

    /// Begins the outputs' pass over the published tree; returns its accessories, in order.
    func beginRepublication() -> [String] {
        outputs.beginPass(over: publishedTree, republishing: true, self)
        return publishedTree.accessories.map(\.id)
    }

    /// An accessory's retained documents as they are on the broker, to publish again: all of
    /// them, or only one output's.
    func republication(of id: String, only output: ObjectIdentifier?) -> [(String, [UInt8])] {
        guard let node = publishedTree.accessory(id: id) else { return [] }
        var out: [(String, [UInt8])] = []
        if output == nil {
            out.append((node.topic + "/$info", Payloads.info(node).encodedUTF8()))
            out.append((node.topic + "/$availability", Payloads.availability(node)))
            if let document = lastSeen.document(of: node) { out.append(document) }
        }
        return out + outputs.republication(of: node, only: output, self)
    }

    func characteristicRepublication(of id: String) -> [CharacteristicTopics] {
        guard let node = publishedTree.accessory(id: id) else { return [] }
        var texts: [String: [UInt8]] = [:]
        let topics = publication.characteristicTopics(
            of: node, old: TopicTree(base: base), texts: &texts, value: currentValue)
        // A value a rate limit holds goes out here, the latest: that is its publication (its
        // window starts again), so the window's end or a stop must not send it a second time.
        for characteristic in node.services.flatMap(\.characteristics)
        where rateLimiter.held[characteristic.address] != nil {
            guard let value = currentValue(characteristic.address) else { continue }
            let text = ValueCodec.text(value, metadata: characteristic.characteristic.metadata)
            rateLimiter.published(characteristic.address, value, text: text, at: clock.now)
        }
        return topics
    }

    /// Each accessory's event of a rebuild (`GatewayEvent.changes`).
    func announceChanges(from old: TopicTree) {
        let changes = GatewayEvent.changes(from: old, to: tree) { id in
            accessories[id] == nil || removedAccessories.contains(id)
        }
        for (name, fields) in changes { event(name, fields: fields) }
    }

    /// Publishes an event on `$gateway/event` and tells the observers.
    func event(_ name: GatewayEvent, fields: [String: JSONValue]) {
        var object = fields
        object["event"] = .string(name.rawValue)
        enqueue("\(base)/$gateway/event", JSONValue.object(object).encodedUTF8(), retain: false)
        notifyObservers(.event(.object(object)))
    }
}
