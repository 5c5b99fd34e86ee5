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
            outputs.deliver(IncomingMessage(message), self)
        }
    }

    /// The requests that came before `online`, in order (and any that come meanwhile). While
    /// the whole base was read, other clients' live messages came too: only requests are taken.
    func handleHeldMessages() {
        let filters = requestFilters.map(\.0)
        while !ownership.held.isEmpty {
            let message = ownership.held.removeFirst()
            guard filters.contains(where: { RetainedSnapshot.topic(message.topic, matches: $0) }) else { continue }
            outputs.deliver(IncomingMessage(message), self)
        }
    }

    // MARK: The record

    /// The topics the current tree publishes, before they are published: the gateway's own,
    /// each accessory's documents and its characteristics. An output's topics elsewhere and any
    /// other ledger topic join the record when it settles (one that a crash leaves unrecorded is
    /// still recognised by its output at the next start, `isOwnEarlierTopic`).
    func ownership(of tree: TopicTree) -> OwnedTopics {
        OwnedTopics(publishing: tree, gatewayTopics: gatewayTopics, documents: accessoryDocuments)
    }

    /// What this gateway holds on the broker now: the published tree's topics and the ledger's.
    var currentOwnership: OwnedTopics {
        OwnedTopics(
            publishing: publishedTree, gatewayTopics: gatewayTopics, documents: accessoryDocuments,
            ledger: retained.topics)
    }

    private var gatewayTopics: Set<String> {
        publishesHealth ? [statusTopic, treeTopic, healthTopic] : [statusTopic, treeTopic]
    }

    /// Makes the record hold what `tree` is about to publish. A record that cannot be written is
    /// logged and kept in memory: the gateway still serves, and clears what it knows this run.
    func recordBeforePublishing(_ tree: TopicTree) {
        let next = ownership(of: tree)
        guard !ownership.recorded.covers(next) else { return }
        var merged = ownership.recorded
        merged.formUnion(next)
        ownership.save(merged, logger: logger)
    }

    /// Clears every recorded topic that the published tree and the ledger no longer have (an
    /// accessory removed while the gateway was down, a rename made offline), then asks for the
    /// record to settle.
    func clearRecordedGhosts() {
        let current = currentOwnership
        let ghosts = ownership.recorded.topicsToClear(keeping: current)
        if !ghosts.isEmpty {
            logger.info(
                "clearing retained topics this gateway published earlier", metadata: ["count": "\(ghosts.count)"])
        }
        // Discovery configs (outside the base) first, as `applyRetained` clears them.
        let inside = base + "/"
        for topic in ghosts where !topic.hasPrefix(inside) && outputs.mayClear(topic, self) {
            enqueue(topic, [], retain: true)
        }
        for topic in ghosts where topic.hasPrefix(inside) { enqueue(topic, [], retain: true) }
        ownership.settleRequests.yield()
    }

    /// The settling loop: once what is queued has been handed to the client, the record becomes
    /// exactly what is published. A busy outbox only delays it; the record stays a superset.
    func settleRecords() async {
        for await _ in ownership.settleStream {
            let deadline = ContinuousClock.now + .seconds(10)
            await outbox.wait(below: 1, until: deadline)
            guard outbox.backlog == 0, !isStopped else { continue }
            // A record without a topic the ledger holds (the first settling after a start: the
            // outputs' discovery configs) is replaced whatever else differs. It is let go first,
            // so the old record and the new are never in memory together: about 10 MB each at
            // 10,000 accessories, at the start-up's peak. Nothing runs on the actor in between,
            // and the file keeps the old record until the new one replaces it.
            if !retained.topics.allSatisfy(ownership.recorded.topics.contains) { ownership.recorded = OwnedTopics() }
            let current = currentOwnership
            if current != ownership.recorded { ownership.save(current, logger: logger) }
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
        let topics = RetainedSnapshot.Topics(
            base: base, marker: markerTopic, status: statusTopic, health: healthTopic, tree: treeTopic,
            documents: accessoryDocuments,
            earlierDocuments: ["$info", "$availability", LastSeen.level] + outputs.flatMap(\.earlierDocuments))
        ownership.snapshot = RetainedSnapshot(
            marker: marker, accessoryTopics: Set(tree.accessories.map(\.topic)), kept: loaded, topics: topics)
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
        let snapshot =
            ownership.snapshot
            ?? RetainedSnapshot(marker: marker, accessoryTopics: [], kept: OwnedTopics(), topics: topics)
        ownership.snapshot = nil
        try Task.checkCancellation()
        try await mqtt.subscribe(requestFilters)
        for (filter, _) in snapshotFilters { try await mqtt.unsubscribe(filter) }

        var record = loaded ?? OwnedTopics()
        record.formUnion(snapshot.fromTree)
        ownership.recorded = record
        snapshot.report(record: record, recordWasKept: loaded != nil, logger: logger)
    }

    /// The documents every accessory has: the core's and the outputs'.
    var accessoryDocuments: [String] {
        outputs.accessoryDocuments + (lastSeen.refresh.isOn ? [LastSeen.level] : [])
    }

    nonisolated var markerTopic: String { "\(base)/$gateway/sync" }

    /// What the gateway takes: requests at the depths it serves them, and nothing else under
    /// the base, so other clients' topics (and its own publications) never reach it.
    var requestFilters: [(String, MQTTQoS)] { outputs.requestFilters(self) }

    var snapshotFilters: [(String, MQTTQoS)] { outputs.snapshotFilters(self) }

    /// A message that arrived during the look at the broker: true when it belonged to it
    /// (`RetainedSnapshot.take`).
    func takeForSnapshot(_ message: MQTTMessage) -> Bool {
        guard var snapshot = ownership.snapshot else { return false }
        if message.retain, !message.payload.isEmpty, message.topic.hasPrefix(base + "/") {
            for output in outputs { output.readEarlier(message, self) }
        }
        // Taken out while it changes, so that its topics are appended to in place, not copied
        // at each message (a large home's look is thousands of them).
        ownership.snapshot = nil
        defer { ownership.snapshot = snapshot }
        return snapshot.take(message, isCharacteristic: { tree.characteristic(topic: $0) != nil }) { message in
            let readers = outputs.filter { output in
                output.snapshotFilters(self).contains { RetainedSnapshot.topic(message.topic, matches: $0) }
            }
            return readers.isEmpty ? nil : readers.contains { $0.isOwnEarlierTopic(message, self) }
        }
    }
}
