import Foundation
import HomeModel
import MQTT

extension Gateway {
    /// How long the look at the broker waits for its marker before going on with what it has.
    static let snapshotTimeout: Duration = .seconds(5)

    // MARK: Messages before `online`

    func consume(messages: AsyncStream<MQTTMessage>) async {
        for await message in messages {
            activity.received()
            if takeForSnapshot(message) { continue }
            // Before `online` (and while those held are handled) a request waits its turn.
            if !isStarted || !ownership.held.isEmpty {
                ownership.held.append(message)
                continue
            }
            deliver(IncomingMessage(message))
        }
    }

    /// The requests that came before `online`, in order (and any that come meanwhile). While
    /// the whole base was read, other clients' live messages came too: only requests are taken.
    func handleHeldMessages() {
        let filters = requestFilters.map(\.0)
        while !ownership.held.isEmpty {
            let message = ownership.held.removeFirst()
            guard filters.contains(where: { Self.topic(message.topic, matches: $0) }) else { continue }
            deliver(IncomingMessage(message))
        }
    }

    // MARK: The record

    /// The topics the current tree publishes, before they are published: the gateway's own,
    /// each accessory's documents and its characteristics. An output's topics elsewhere and any
    /// other ledger topic join the record when it settles (one that a crash leaves unrecorded is
    /// still recognised by its output at the next start, `isOwnEarlierTopic`).
    func ownership(of tree: TopicTree) -> OwnedTopics {
        var record = OwnedTopics()
        record.topics = [statusTopic, treeTopic]
        var shapes = OwnedTopics.Shapes()
        for node in tree.accessories {
            record.topics.insert(node.topic + "/$info")
            record.topics.insert(node.topic + "/$availability")
            for output in outputs {
                for document in output.accessoryDocuments { record.topics.insert(node.topic + "/" + document) }
            }
            var paths = Set<String>()
            for service in node.services {
                for c in service.characteristics { paths.insert(service.slug + "/" + c.slug) }
            }
            record.accessories[node.topic] = shapes.shared(paths)
        }
        return record
    }

    /// Makes the record hold what `tree` is about to publish. A record that cannot be written is
    /// logged and kept in memory: the gateway still serves, and clears what it knows this run.
    func recordBeforePublishing(_ tree: TopicTree) {
        let next = ownership(of: tree)
        guard !ownership.recorded.covers(next) else { return }
        var merged = ownership.recorded
        merged.formUnion(next)
        saveRecord(merged)
    }

    /// Clears every recorded topic that the published tree and the ledger no longer have (an
    /// accessory removed while the gateway was down, a rename made offline), then asks for the
    /// record to settle.
    func clearRecordedGhosts() {
        var current = ownership(of: publishedTree)
        current.topics.formUnion(retained.topics)
        let ghosts = ownership.recorded.topicsToClear(keeping: current)
        if !ghosts.isEmpty {
            logger.info(
                "clearing retained topics this gateway published earlier", metadata: ["count": "\(ghosts.count)"])
        }
        for topic in ghosts { enqueue(topic, [], retain: true) }
        ownership.settleRequests.yield()
    }

    /// The settling loop: once what is queued has been handed to the client, the record becomes
    /// exactly what is published. A busy outbox only delays it; the record stays a superset.
    func settleRecords() async {
        for await _ in ownership.settleStream {
            let deadline = ContinuousClock.now + .seconds(10)
            await outbox.wait(below: 1, until: deadline)
            guard outbox.backlog == 0, !isStopped else { continue }
            var current = ownership(of: publishedTree)
            current.topics.formUnion(retained.topics)
            if current != ownership.recorded { saveRecord(current) }
        }
    }

    private func saveRecord(_ record: OwnedTopics) {
        ownership.recorded = record
        guard let store = ownership.store else { return }
        do throws(ModelError) {
            try store.save(record)
        } catch {
            logger.error(
                "cannot write the record of published topics; topics of this run are still cleared as they go",
                metadata: ["file": "\(store.file.path)", "error": "\(error.message)"])
        }
    }

    // MARK: The look at the broker at start

    /// Reads the retained topics under the base once, before the first publication, ending at
    /// a marker of our own: an earlier run's tree document (the record when the state directory
    /// has none), and other clients' topics where the gateway is about to publish (logged, not
    /// cleared: the gateway needs those topics). Then subscribes to only what it takes.
    func lookAtTheBroker() async throws {
        let loaded: OwnedTopics?
        do throws(ModelError) {
            loaded = try ownership.store?.load()
        } catch {
            logger.error(
                "the record of published topics is unreadable; reading the broker's tree instead",
                metadata: ["error": "\(error.message)"])
            loaded = nil
        }
        let marker = Array("\(UInt64.random(in: 0...UInt64.max))".utf8)
        ownership.snapshot = RetainedSnapshot(
            marker: marker, accessoryTopics: Set(tree.accessories.map(\.topic)), readsTree: loaded == nil)
        do {
            try await mqtt.subscribe(snapshotFilters, ownMessages: true)
            // A persistent session still holds the request filters of the last run. Under MQTT 5
            // a message matching two subscriptions comes twice (a `$toggle` would flip twice):
            // while the whole base is subscribed, it is the only subscription under it.
            for (filter, _) in requestFilters where filter.hasPrefix(base + "/") {
                try await mqtt.unsubscribe(filter)
            }
            try await mqtt.publish(markerTopic, payload: marker, qos: .atLeastOnce)
            let deadline = ContinuousClock.now + Self.snapshotTimeout
            while ownership.snapshot?.complete == false, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(5))
            }
        } catch let error as MQTTError {
            logger.warning("could not read the broker's retained topics", metadata: ["error": "\(error)"])
        }
        let snapshot = ownership.snapshot ?? RetainedSnapshot(marker: marker, accessoryTopics: [], readsTree: false)
        ownership.snapshot = nil
        try Task.checkCancellation()
        try await mqtt.subscribe(requestFilters)
        for (filter, _) in snapshotFilters { try await mqtt.unsubscribe(filter) }

        var record = loaded ?? OwnedTopics()
        record.formUnion(snapshot.fromTree)
        ownership.recorded = record
        let collisions = snapshot.collisions.filter { !record.contains($0) }
        let counted = snapshot.collisionCount - (snapshot.collisions.count - collisions.count)
        if counted > 0 {
            logger.warning(
                "retained topics of another client are where this gateway publishes; they will be replaced",
                metadata: ["count": "\(counted)", "topics": "\(Self.named(collisions, count: counted))"])
        }
        if !snapshot.complete {
            logger.warning(
                "the broker's retained topics were read in part (no marker within the time allowed)",
                metadata: ["seen": "\(snapshot.retainedSeen)"])
        }
        logger.info(
            "read the broker's retained topics under the base",
            metadata: [
                "retained": "\(snapshot.retainedSeen)",
                "record": "\(loaded == nil ? "from the broker's tree" : "kept")",
            ])
    }

    /// The documents every accessory has: the core's and the outputs'.
    var accessoryDocuments: [String] { ["$info", "$availability"] + outputs.flatMap(\.accessoryDocuments) }

    nonisolated var markerTopic: String { "\(base)/$gateway/sync" }

    /// What the gateway takes: requests at the depths it serves them, and nothing else under
    /// the base, so other clients' topics (and its own publications) never reach it.
    var requestFilters: [(String, MQTTQoS)] {
        var filters: [String] = []
        for output in outputs { filters += output.requestFilters(self) }
        return filters.map { ($0, MQTTQoS.atLeastOnce) }
    }

    /// What the look at the broker reads: the whole base, and where the outputs published
    /// elsewhere (whose content tells this gateway's, `isOwnEarlierTopic`).
    var snapshotFilters: [(String, MQTTQoS)] {
        var filters = ["\(base)/#"]
        for output in outputs { filters += output.snapshotFilters(self) }
        return filters.map { ($0, MQTTQoS.atLeastOnce) }
    }

    /// MQTT's topic matching: `+` one level, `#` the rest (at the end).
    static func topic(_ topic: String, matches filter: String) -> Bool {
        var levels = topic.split(separator: "/", omittingEmptySubsequences: false)[...]
        for part in filter.split(separator: "/", omittingEmptySubsequences: false) {
            if part == "#" { return true }
            guard let level = levels.popFirst(), part == "+" || part == level else { return false }
        }
        return levels.isEmpty
    }

    /// A message that arrived during the look at the broker: true when it belonged to it.
    func takeForSnapshot(_ message: MQTTMessage) -> Bool {
        guard var snapshot = ownership.snapshot else { return false }
        defer { ownership.snapshot = snapshot }
        if message.topic == markerTopic {
            if message.payload == snapshot.marker { snapshot.complete = true }
            return true
        }
        guard message.retain else { return false }
        if !message.topic.hasPrefix(base + "/") {
            let readers = outputs.filter { output in
                output.snapshotFilters(self).contains { Self.topic(message.topic, matches: $0) }
            }
            guard !readers.isEmpty else { return false }
            if readers.contains(where: { $0.isOwnEarlierTopic(message, self) }) {
                snapshot.fromTree.topics.insert(message.topic)
            }
            return true
        }
        guard message.topic.hasPrefix(base + "/") else { return false }
        if message.payload.isEmpty { return true }
        snapshot.retainedSeen += 1
        // The status is this gateway's own, with or without a record (one gateway per base).
        if message.topic == statusTopic {
            snapshot.fromTree.topics.insert(message.topic)
            return true
        }
        if message.topic == treeTopic || message.topic.hasPrefix(treeTopic + "/") {
            snapshot.fromTree.topics.insert(message.topic)
            if snapshot.readsTree, let document = try? JSONValue(parsing: message.payload) {
                snapshot.fromTree.addTreeDocument(
                    document, documents: ["$info", "$availability"] + outputs.flatMap(\.earlierDocuments))
            }
            return true
        }
        if willPublish(message.topic, accessoryTopics: snapshot.accessoryTopics) {
            snapshot.collisionCount += 1
            if snapshot.collisions.count < 1_000 { snapshot.collisions.append(message.topic) }
        }
        return true
    }

    /// Whether the current tree puts a retained message on `topic`.
    private func willPublish(_ topic: String, accessoryTopics: Set<String>) -> Bool {
        if topic == statusTopic { return true }
        guard let slash = topic.lastIndex(of: "/") else { return false }
        let path = String(topic[..<slash])
        switch topic[topic.index(after: slash)...] {
        case "meta", "state": return tree.characteristic(topic: path) != nil
        case let kind where accessoryDocuments.contains(String(kind)): return accessoryTopics.contains(path)
        default: return false
        }
    }
}
