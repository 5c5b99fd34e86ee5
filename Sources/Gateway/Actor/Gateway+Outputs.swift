public import HomeModel
import MQTT

/// What an output (`GatewayOutput`) may do on the gateway while one of its hooks runs, and
/// where the core calls the hooks. Outputs publish through the same outbox, ledger and record
/// as the base topic tree.
extension Gateway {
    // MARK: For outputs

    /// The base topic (`home`).
    public nonisolated var baseTopic: String { base }

    /// The retained health document's topic (`<base>/$gateway/health`); nil when it is not
    /// published (`health-interval` 0).
    public nonisolated var publishedHealthTopic: String? { publishesHealth ? healthTopic : nil }

    /// Whether every accessory's `$last-seen` is published (`last-seen-interval` above 0).
    public nonisolated var publishesLastSeen: Bool { config.lastSeenInterval > 0 }

    /// The home as the database last said; nil only before the first read.
    public var home: Home? { currentHome }

    /// Every home of the database as it is now, this one's and the others' (where an accessory
    /// that left this home is).
    public nonisolated var homes: [Home] { database.homesNow }

    /// The tree whose topics are on the broker (the current tree once started).
    public var publishedTopicTree: TopicTree { publishedTree }

    /// Whether the home's source reports the accessory now, whether the tree holds it or not
    /// (out of scope): one the home knows but has not been handed yet is neither in the tree nor
    /// reported.
    public func reports(accessoryID: String) -> Bool { served.accessories[accessoryID] != nil }

    /// A characteristic's latest value, reported or as described.
    public func value(of address: CharacteristicAddress) -> CharacteristicValue? { currentValue(address) }

    /// Publishes a retained topic if its payload changed; an empty payload clears it. The topic
    /// is the gateway's from then on: recorded, republished after a reconnect by the output's
    /// `republication`, and cleared when no pass holds it any more.
    public func publishRetained(_ topic: String, _ payload: [UInt8]) { setRetained(topic, payload) }

    /// Records `payload` as the retained topic's without publishing it, for an output that
    /// publishes something else in its place (`publish(_:_:retain:)`); returns whether it changed,
    /// and whether the topic held an earlier payload.
    public func recordRetained(_ topic: String, _ payload: [UInt8]) -> (changed: Bool, replaced: Bool) {
        let replaced = retained.contains(topic)
        return (publication.record(topic, payload), replaced)
    }

    /// Topic levels under an accessory's topic that the gateway and its outputs publish
    /// (`state`, `$info`, `result`, an output's documents): never requests.
    public var publishedLevels: Set<String> { outputs.publishedKinds }

    /// Messages queued and not yet handed to the MQTT client: an output gathering a burst waits
    /// while the broker is behind.
    public nonisolated var outboxBacklog: Int { outbox.backlog }

    /// Queues one message behind everything queued before it.
    public func publish(_ topic: String, _ payload: [UInt8], retain: Bool) {
        enqueue(topic, payload, retain: retain)
    }

    /// Publishes the output's documents of every published accessory again, behind what is
    /// queued (a consumer that lost them asked for them again).
    public func republish(_ output: any GatewayOutput) {
        enqueue(.output(ObjectIdentifier(output)))
    }

    // MARK: The core's calls (the loops are `Outputs`')

    /// Each output's long-running part, as children of the serving group.
    func runOutput(_ index: Int) async { await outputs[index].run(self) }
}
