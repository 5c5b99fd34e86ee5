import Foundation
import HomeModel
import MQTT

/// The tree's retained topics: the first publication, and after every rebuild what changed
/// published and what went away cleared (empty retained messages), so no ghost topic stays.
extension Gateway {
    /// Publishes what changed of one accessory's retained documents (`$info`, `$availability`,
    /// and the outputs'); returns their topics.
    @discardableResult
    func applyDocuments(_ node: TopicTree.AccessoryNode) -> [String] {
        let info = node.topic + "/$info", availability = node.topic + "/$availability"
        setRetained(info, Payloads.info(node).encodedUTF8())
        setRetained(availability, Payloads.availability(node))
        var topics = [info, availability]
        if let document = lastSeen.document(of: node) {
            setRetained(document.topic, document.payload)
            topics.append(document.topic)
        }
        return topics + outputs.documents(of: node, self)
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
        work.notificationTargets.yield(tree.notifyingAddresses())
        healthMayHaveChanged()
    }

    func applyRetained() {
        recordBeforePublishing(tree)
        // What is published needs no order between topics (each is one retained value); what is
        // cleared does (below).
        var desired = Set<String>(minimumCapacity: tree.accessories.count * 3 + 1)
        outputs.beginPass(over: tree, self)
        for node in tree.accessories {
            desired.formUnion(applyDocuments(node))
        }
        desired.formUnion(outputs.gatewayDocuments(self))
        desired.formUnion(applyTree())
        // What goes away is cleared pointers first: an output's topics outside the base (Home
        // Assistant's discovery configs) name the accessory's topics, and a consumer still
        // holding one would read the emptied `$state` through it (a template failing on
        // `value_json`). The accessory's own topics follow, then its characteristics'.
        let stale = retained.topics.filter { !desired.contains($0) }
        let inside = base + "/"
        // One another home's gateway holds now is forgotten here, not cleared (`mayClear`).
        for topic in stale where !topic.hasPrefix(inside) {
            if outputs.mayClear(topic, self) { setRetained(topic, []) } else { _ = publication.record(topic, []) }
        }
        for topic in stale where topic.hasPrefix(inside) { setRetained(topic, []) }
        let old = publishedTree
        enqueue(publication.characteristicChanges(from: old, to: tree, value: currentValue))
        treePublished()
        ownership.settleRequests.yield()
    }

    /// Every retained topic this gateway holds on the broker: the ledger's, characteristics'
    /// `state` and `meta`, the status (`online`, or `offline` as the will) and the health document.
    var retainedCount: Int {
        retained.count + publication.characteristicTopicCount(value: currentValue) + (publishesHealth ? 2 : 1)
    }

    /// The `meta` and `state` topics of the published tree's characteristics.
    var publishedCharacteristicTopics: [String] { publication.characteristicTopics(value: currentValue) }

    /// First publication after connecting (`online` follows): `applyRetained` from nothing, a few accessories at a
    /// time, each batch made once the outbox has room, so a large home's payloads are never all
    /// in memory while the broker takes them. Nothing else runs on the actor meanwhile; the
    /// gateway takes events and messages only once started.
    func publishAll() async {
        let empty = TopicTree(base: base)
        outputs.beginPass(over: tree, self)
        var texts: [String: [UInt8]] = [:]
        for node in tree.accessories {
            // SIGTERM in the middle of a large home's first publication stops it here.
            if Task.isCancelled { return }
            applyDocuments(node)
            enqueue(publication.characteristicTopics(of: node, old: empty, texts: &texts, value: currentValue))
            await outbox.wait(below: publication.backlog, bytes: Publication.backlogBytes)
        }
        _ = outputs.gatewayDocuments(self)
        await applyTreePaced()
        treePublished()
        work.notificationTargets.yield(tree.notifyingAddresses())
    }

    /// The current tree is the one on the broker now: its characteristics' rate limits, looked
    /// up once, and a snapshot for the observers.
    private func treePublished() {
        publication.published(tree)
        rateLimiter.assign(scope.rateLimits(of: publishedTree))
        notifyObservers(.snapshot(snapshot))
    }

    public var retainedTopicList: [String] {
        (Array(retained.topics) + publishedCharacteristicTopics + (publishesHealth ? [healthTopic] : [])).sorted()
    }
}
