import HomeModel

// The retained `meta` and `state` topics of characteristics, worked out from trees and values:
// what a rebuild changes, what the first publication and a republication send, and what is
// held. Pure but for the shared `meta` buffers (`Publication.metaPayload`); the gateway queues
// what it returns.
extension Publication {
    /// What turns the retained `meta`/`state` topics of `old` into those of `new`: the topics
    /// of characteristics that left or moved are cleared, those that arrived or moved are
    /// published, and a `meta` or `state` text that changed in place is published again.
    /// `value` is the latest value of an address. (Values that change in place are published as
    /// they change, by the gateway's `update`.)
    mutating func characteristicChanges(
        from old: TopicTree, to new: TopicTree, value: (CharacteristicAddress) -> CharacteristicValue?
    ) -> [CharacteristicTopics] {
        var out: [CharacteristicTopics] = []
        for accessory in old.accessories {
            for service in accessory.services {
                for c in service.characteristics where new.characteristic(c.address)?.topic != c.topic {
                    out.append(CharacteristicTopics(topic: c.topic, meta: [], state: []))
                }
            }
        }
        // Most states are a few short texts: one buffer each, shared, not one per topic.
        var texts: [String: [UInt8]] = [:]
        for accessory in new.accessories {
            out += characteristicTopics(of: accessory, old: old, texts: &texts, value: value)
        }
        return out
    }

    /// The new side of `characteristicChanges`, for one accessory of the new tree.
    mutating func characteristicTopics(
        of accessory: TopicTree.AccessoryNode, old: TopicTree, texts: inout [String: [UInt8]],
        value: (CharacteristicAddress) -> CharacteristicValue?
    ) -> [CharacteristicTopics] {
        func stateText(_ node: TopicTree.CharacteristicNode) -> String? {
            value(node.address).map { ValueCodec.text($0, metadata: node.characteristic.metadata) }
        }
        func statePayload(_ text: String) -> [UInt8] {
            if let shared = texts[text] { return shared }
            let payload = Array(text.utf8)
            if payload.count <= 16 { texts[text] = payload }
            return payload
        }
        var out: [CharacteristicTopics] = []
        for service in accessory.services {
            for c in service.characteristics {
                let state = c.isEvent ? nil : stateText(c)
                guard let before = old.characteristic(c.address), before.topic == c.topic else {
                    out.append(
                        CharacteristicTopics(topic: c.topic, meta: metaPayload(c), state: state.map(statePayload)))
                    continue
                }
                let metaChanged = MetaKey(before) != MetaKey(c)
                let stateChanged = state != nil && state != stateText(before)
                guard metaChanged || stateChanged else { continue }
                out.append(
                    CharacteristicTopics(
                        topic: c.topic, meta: metaChanged ? metaPayload(c) : nil,
                        state: stateChanged ? state.map(statePayload) : nil))
            }
        }
        return out
    }

    /// The `meta` and `state` topics of the published tree's characteristics.
    func characteristicTopics(value: (CharacteristicAddress) -> CharacteristicValue?) -> [String] {
        var topics: [String] = []
        forEachCharacteristicTopic(value: value) { topics.append($0.topic + ($1 ? "/state" : "/meta")) }
        return topics
    }

    /// How many `characteristicTopics` there are, without making them: the health document
    /// counts them on every refresh, and at 10,000 accessories their strings took ~60 MB.
    func characteristicTopicCount(value: (CharacteristicAddress) -> CharacteristicValue?) -> Int {
        var count = 0
        forEachCharacteristicTopic(value: value) { _, _ in count += 1 }
        return count
    }

    /// Each characteristic's `meta` topic (false), then its `state` topic (true) when it holds one.
    private func forEachCharacteristicTopic(
        value: (CharacteristicAddress) -> CharacteristicValue?, _ body: (TopicTree.CharacteristicNode, Bool) -> Void
    ) {
        for accessory in tree.accessories {
            for service in accessory.services {
                for c in service.characteristics {
                    body(c, false)
                    // An empty payload is no retained message: an empty text or data value is not held.
                    if !c.isEvent, let found = value(c.address),
                        !ValueCodec.text(found, metadata: c.characteristic.metadata).isEmpty
                    {
                        body(c, true)
                    }
                }
            }
        }
    }
}

/// What a `meta` document is made of.
struct MetaKey: Hashable {
    var type: String
    var metadata: CharacteristicMetadata
    var description: String?
    var readOnlyScope: Bool

    init(_ node: TopicTree.CharacteristicNode) {
        type = node.characteristic.type
        metadata = node.characteristic.metadata
        description = node.characteristic.name
        readOnlyScope = node.isReadOnlyScope
    }
}
