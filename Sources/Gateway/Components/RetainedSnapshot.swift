import HomeModel
import Logging
import MQTT

/// What the broker held under the base at start, as far as ownership is concerned: read from
/// the retained messages that arrive between subscribing and the marker coming back, then
/// reported (other clients' topics where the gateway is about to publish, a look cut short).
struct RetainedSnapshot {
    /// The marker published after subscribing: when it comes back, every retained message
    /// before it has arrived.
    var marker: [UInt8]
    /// The current tree's accessory topics, to tell its documents' topics at once.
    var accessoryTopics: Set<String>
    /// The record the state directory kept (nil: none, and an earlier run's tree is read as the
    /// record instead — only then, as a large home's tree is tens of megabytes to parse).
    var kept: OwnedTopics?
    /// The gateway's topics and documents, as they are for this start.
    var topics: Topics
    var complete = false
    /// The topics a retained `$gateway/tree` (or its pages) says an earlier run published, and
    /// the outputs' topics elsewhere that they know as this gateway's (`isOwnEarlierTopic`).
    var fromTree = OwnedTopics()
    /// Retained topics where this gateway is about to publish that no kept record calls its own:
    /// other clients' (a few kept to name in the log; every one counted). Without a kept record
    /// an earlier run's topics are among them until its tree is read, so each one is kept for
    /// `report` to tell: they are topics of the current tree, so no more than it has.
    var collisions: [String] = []
    var collisionCount = 0
    var retainedSeen = 0

    /// The gateway's topics a message is told by.
    struct Topics {
        var base: String
        var marker: String
        var status: String
        /// `$gateway/health`: like the status, the gateway's own whatever the record says.
        var health: String
        var tree: String
        /// The documents every accessory has now (the core's and the outputs').
        var documents: [String]
        /// Those an earlier run may have published (an output's, turned off since).
        var earlierDocuments: [String]
    }

    /// A message that arrived during the look at the broker: true when it belonged to it.
    /// `isCharacteristic` tells whether the current tree has a characteristic at a path;
    /// `outside` whether an output reads a topic outside the base (nil: none does) and, if so,
    /// whether it is one of its earlier runs'.
    mutating func take(
        _ message: MQTTMessage, isCharacteristic: (String) -> Bool, outside: (MQTTMessage) -> Bool?
    ) -> Bool {
        if message.topic == topics.marker {
            if message.payload == marker { complete = true }
            return true
        }
        guard message.retain else { return false }
        if !message.topic.hasPrefix(topics.base + "/") {
            guard let own = outside(message) else { return false }
            if own { fromTree.topics.insert(message.topic) }
            return true
        }
        if message.payload.isEmpty { return true }
        retainedSeen += 1
        // The status and health are this gateway's own, with or without a record (one gateway per
        // base).
        if message.topic == topics.status || message.topic == topics.health {
            fromTree.topics.insert(message.topic)
            return true
        }
        if message.topic == topics.tree || message.topic.hasPrefix(topics.tree + "/") {
            fromTree.topics.insert(message.topic)
            if readsTree, let document = try? JSONValue(parsing: message.payload) {
                fromTree.addTreeDocument(document, documents: topics.earlierDocuments)
            }
            return true
        }
        guard willPublish(message.topic, isCharacteristic: isCharacteristic) else { return true }
        // An earlier run's own topic is told here when the record was kept, not after the names
        // are cut at a thousand: a home of more topics than that, restarted, counted those past
        // the thousandth as another client's (issue 43, item 11).
        guard let kept else {
            collisionCount += 1
            collisions.append(message.topic)
            return true
        }
        if kept.contains(message.topic) { return true }
        collisionCount += 1
        if collisions.count < 1_000 { collisions.append(message.topic) }
        return true
    }

    /// Whether an earlier run's tree is read as the record (the state directory kept none).
    var readsTree: Bool { kept == nil }

    /// Whether the current tree puts a retained message on `topic`.
    private func willPublish(_ topic: String, isCharacteristic: (String) -> Bool) -> Bool {
        if topic == topics.status { return true }
        guard let slash = topic.lastIndex(of: "/") else { return false }
        let path = String(topic[..<slash])
        switch topic[topic.index(after: slash)...] {
        case "meta", "state": return isCharacteristic(path)
        case let kind where topics.documents.contains(String(kind)): return accessoryTopics.contains(path)
        default: return false
        }
    }

    /// Says what the look found: other clients' topics where the gateway publishes (those the
    /// `record` holds are the gateway's own), a look cut short, and where the record came from.
    func report(record: OwnedTopics, recordWasKept: Bool, logger: Logger) {
        let named = collisions.filter { !record.contains($0) }
        let counted = collisionCount - (collisions.count - named.count)
        if counted > 0 {
            logger.warning(
                "retained topics of another client are where this gateway publishes; they will be replaced",
                metadata: ["count": "\(counted)", "topics": "\(Self.named(named, count: counted))"])
        }
        if !complete {
            logger.warning(
                "the broker's retained topics were read in part (no marker within the time allowed)",
                metadata: ["seen": "\(retainedSeen)"])
        }
        logger.info(
            "read the broker's retained topics under the base",
            metadata: [
                "retained": "\(retainedSeen)",
                "record": "\(recordWasKept ? "kept" : "from the broker's tree")",
            ])
    }

    /// Topics a warning counts, named: the first `shown` of `topics` (sorted), then how many
    /// more of the `count` there are — `home/a/state, home/b/meta and 12 more`. A count says
    /// nothing a user can look up; a few names say where to look, and the rest stays one line.
    static func named(_ topics: [String], count: Int, shown: Int = 5) -> String {
        let first = topics.sorted().prefix(shown)
        let more = max(0, count - first.count)
        let listed = first.joined(separator: ", ")
        guard more > 0 else { return listed }
        return listed.isEmpty ? "\(more) topic\(more == 1 ? "" : "s")" : "\(listed) and \(more) more"
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
}
