import HomeModel

/// What the gateway has published of the base topic tree: the tree whose topics are on the
/// broker, the other retained topics as digests, the `meta` documents shared between
/// characteristics (the outbox everything goes through is the gateway's `parts.outbox`).
struct Publication {
    /// How many messages the first publication lets wait in the outbox before it makes more,
    /// so that a large home's whole retained tree is never in memory at once.
    let backlog: Int
    /// And how many payload bytes (the outbox's `backlogBytes`): the documents and tree pages
    /// of a few accessories' worth, enough that the outbox never runs dry while the gateway
    /// makes the next, and never the whole home's. As the MQTT client's `maxQueuedBytes`, 256 KB:
    /// 1 MB was as fast to `online` at 10,000 accessories and ~1.5 MB more of the peak at 1,000.
    static let backlogBytes = 1 << 18
    /// The tree whose characteristic topics are on the broker (the current tree once started).
    private(set) var tree: TopicTree
    /// The retained topics other than characteristics' `state`/`meta`, as digests.
    private(set) var retained = RetainedLedger()
    /// The tree document, whole or paged under the broker's maximum packet size.
    var treeDocuments = TreeDocuments()
    /// One buffer per distinct `meta` document, shared by every characteristic that has it.
    private var metaPayloads: [MetaKey: [UInt8]] = [:]

    init(backlog: Int, base: String) {
        self.backlog = max(backlog, 1)
        tree = TopicTree(base: base)
    }

    /// The accessory the last value came from, and its place in `tree` (`characteristic(_:)`).
    private var recent: (id: String, position: Int)?

    /// `tree`'s topics are on the broker now.
    mutating func published(_ tree: TopicTree) {
        self.tree = tree
        recent = nil
    }

    /// The published characteristic at `address`, for a value just reported (`Gateway.update`).
    ///
    /// Values mostly come several of one accessory in a row (a HAP event, a write of a
    /// lamp's power and brightness, a behaviour's steps, a poll): the accessory's place in the
    /// tree is looked up by its id once for the run, and then costs a comparison of the id (the
    /// same string, mostly the same storage) instead of hashing it (~370 instructions). And in a
    /// mutating method the tree is borrowed: called on the gateway's `publication.tree`, the
    /// look-up made a copy of the tree's struct, a retain and release of each of its references.
    mutating func characteristic(_ address: CharacteristicAddress) -> TopicTree.CharacteristicNode? {
        let position: Int
        if let recent, recent.id == address.accessoryID {
            position = recent.position
        } else {
            guard let found = tree.position(ofAccessory: address.accessoryID) else { return nil }
            recent = (address.accessoryID, found)
            position = found
        }
        return tree.characteristic(address.iid, ofAccessoryAt: position)
    }

    /// Records a retained topic's payload; whether it changed (an empty one clears it).
    mutating func record(_ topic: String, _ payload: [UInt8]) -> Bool { retained.record(topic, payload) }

    /// A characteristic's `meta` document, shared with every other that has the same one (every
    /// brightness of one kind of lamp): one buffer each, and each encoded once.
    mutating func metaPayload(_ c: TopicTree.CharacteristicNode) -> [UInt8] {
        let key = MetaKey(c)
        if let shared = metaPayloads[key] { return shared }
        let payload = Payloads.meta(c).encodedUTF8()
        metaPayloads[key] = payload
        return payload
    }
}
