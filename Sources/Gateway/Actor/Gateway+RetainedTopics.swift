import Foundation
import HomeModel
import MQTT

/// The tree's retained topics: the first publication, and after every rebuild what changed
/// published and what went away cleared (empty retained messages), so no ghost topic stays.
extension Gateway {
    func availabilityPayload(_ node: TopicTree.AccessoryNode) -> [UInt8] {
        Array((node.accessory.isReachable ? "online" : "offline").utf8)
    }

    /// Publishes what changed of one accessory's retained documents (`$info`, `$availability`,
    /// and the outputs'); returns their topics.
    @discardableResult
    func applyDocuments(_ node: TopicTree.AccessoryNode) -> [String] {
        let info = node.topic + "/$info", availability = node.topic + "/$availability"
        setRetained(info, Payloads.info(node).encodedUTF8())
        setRetained(availability, availabilityPayload(node))
        return [info, availability] + outputDocuments(of: node)
    }

    func treeBytes() -> [UInt8] {
        guard let currentHome else { return Array(treeText().utf8) }
        return Payloads.treeBytes(tree, home: currentHome)
    }

    func treeText() -> String {
        guard let currentHome else { return JSONValue.object(["base": .string(base), "rooms": .array([])]).encoded() }
        return Payloads.treeText(tree, home: currentHome)
    }

    func treeJSON() -> JSONValue {
        guard let currentHome else { return .object(["base": .string(base), "rooms": .array([])]) }
        return Payloads.tree(tree, home: currentHome)
    }

    /// Home events often describe what the tree already shows: the first start adopts every
    /// room and accessory (one event each) before the tree is built from the result, and a
    /// change made through the request API rebuilds at once. A rebuild costs the whole tree,
    /// so only a home that differs from the tree's gets one.
    func rebuildIfTheHomeChanged() async {
        await refreshHome()
        guard served.homeChanged else { return }
        rebuild(announce: true)
    }

    /// Rebuilds the tree from the accessories, the home and the scope, then publishes what
    /// changed, clears what went away, announces structural changes and retargets
    /// notifications.
    func rebuild(announce: Bool) {
        guard let old = served.rebuildTree() else { return }
        if announce { announceChanges(from: old) }
        guard isStarted else { return }
        applyRetained()
        work.notificationTargets.yield(notifyingAddresses())
    }

    func applyRetained() {
        recordBeforePublishing(tree)
        // Order does not matter between topics (each is one retained value): no sorting.
        var desired = Set<String>(minimumCapacity: tree.accessories.count * 3 + 1)
        beginOutputPass(over: tree)
        for node in tree.accessories {
            desired.formUnion(applyDocuments(node))
        }
        desired.formUnion(applyTree())
        for topic in retained.topics.filter({ !desired.contains($0) }) {
            setRetained(topic, [])
        }
        enqueue(characteristicChanges(from: publishedTree, to: tree))
        publication.published(tree)
        publishedTreeChanged()
        ownership.settleRequests.yield()
    }

    /// What turns the retained `meta`/`state` topics of `old` into those of `new`: the topics
    /// of characteristics that left or moved are cleared, those that arrived or moved are
    /// published, and a `meta` or `state` text that changed in place is published again.
    /// (Values that change in place are published as they change, by `update`.)
    func characteristicChanges(from old: TopicTree, to new: TopicTree) -> [CharacteristicTopics] {
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
            out += characteristicTopics(of: accessory, old: old, texts: &texts)
        }
        return out
    }

    /// The new side of `characteristicChanges`, for one accessory of the new tree.
    func characteristicTopics(
        of accessory: TopicTree.AccessoryNode, old: TopicTree, texts: inout [String: [UInt8]]
    ) -> [CharacteristicTopics] {
        func stateText(_ node: TopicTree.CharacteristicNode) -> String? {
            currentValue(node.address).map { ValueCodec.text($0, metadata: node.characteristic.metadata) }
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

    func metaPayload(_ c: TopicTree.CharacteristicNode) -> [UInt8] { publication.metaPayload(c) }

    /// Every retained topic this gateway holds on the broker: the ledger's, characteristics'
    /// `state` and `meta`, and the status (`online`, or `offline` as the will).
    var retainedCount: Int { retained.count + publishedCharacteristicTopics().count + 1 }

    /// The `meta` and `state` topics of the published tree's characteristics.
    func publishedCharacteristicTopics() -> [String] {
        var topics: [String] = []
        for accessory in publishedTree.accessories {
            for service in accessory.services {
                for c in service.characteristics {
                    topics.append(c.topic + "/meta")
                    // An empty payload is no retained message: an empty text or data value is not held.
                    if !c.isEvent, let value = currentValue(c.address),
                        !ValueCodec.text(value, metadata: c.characteristic.metadata).isEmpty
                    {
                        topics.append(c.topic + "/state")
                    }
                }
            }
        }
        return topics
    }

    /// First publication after connecting (`online` follows): `applyRetained` from nothing, a few accessories at a
    /// time, each batch made once the outbox has room, so a large home's payloads are never all
    /// in memory while the broker takes them. Nothing else runs on the actor meanwhile; the
    /// gateway takes events and messages only once started.
    func publishAll() async {
        let empty = TopicTree(base: base)
        beginOutputPass(over: tree)
        var texts: [String: [UInt8]] = [:]
        for node in tree.accessories {
            // SIGTERM in the middle of a large home's first publication stops it here.
            if Task.isCancelled { return }
            applyDocuments(node)
            enqueue(characteristicTopics(of: node, old: empty, texts: &texts))
            await outbox.wait(below: publication.backlog)
        }
        applyTree()
        publication.published(tree)
        publishedTreeChanged()
        work.notificationTargets.yield(notifyingAddresses())
    }

    public var retainedTopicList: [String] { (Array(retained.topics) + publishedCharacteristicTopics()).sorted() }

    /// Topics a warning counts, named: the first `shown` of `topics` (sorted), then how many
    /// more of the `count` there are — `home/a/state, home/b/meta and 12 more`. A count says
    /// nothing a user can look up; a few names say where to look, and the rest stays one line.
    nonisolated static func named(_ topics: [String], count: Int, shown: Int = 5) -> String {
        let first = topics.sorted().prefix(shown)
        let more = max(0, count - first.count)
        let listed = first.joined(separator: ", ")
        guard more > 0 else { return listed }
        return listed.isEmpty ? "\(more) topic\(more == 1 ? "" : "s")" : "\(listed) and \(more) more"
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
