public import MQTT

// The seam every dialect beside the base topic tree plugs into (a document per accessory, another
// program's configs). The core calls an output's hooks synchronously on the
// gateway's actor, where it publishes its own topics — no stream, no task, no hop per message —
// so an output's retained topics share the gateway's ordered outbox, its retained ledger, its
// record of what it published and its last will. An output that keeps its own connection and
// reads the home as a view (as the web page does) needs none of this: it observes the gateway.

/// A dialect published on the gateway's connection, beside the base topic tree.
///
/// Made by the composition root and handed to the gateway, which owns it from then on: every
/// hook runs isolated to that gateway, so an output keeps its state in plain stored properties.
/// Every hook has a default that does nothing; an output implements those it needs.
public protocol GatewayOutput: AnyObject {
    /// Topic levels it publishes under each accessory's topic: recorded as the
    /// gateway's own and never taken as requests.
    var accessoryDocuments: [String] { get }

    /// Topic levels it may have published under accessories in an earlier run, even if it
    /// publishes them no more (its setting turned off): read as the gateway's own when the
    /// record of published topics is rebuilt from a retained tree, so they are cleared, and
    /// never taken as requests. `accessoryDocuments` by default.
    var earlierDocuments: [String] { get }

    /// Topic filters of the requests it serves, subscribed with the gateway's own once the tree
    /// is published: under the base (`<base>/+/+/$set`) or elsewhere (a birth message).
    func requestFilters(_ gateway: isolated Gateway) -> [String]

    /// Filters read in the gateway's look at the broker at start, beside `<base>/#`: where
    /// retained topics of its earlier runs may be.
    func snapshotFilters(_ gateway: isolated Gateway) -> [String]

    /// Whether a retained message found at start under `snapshotFilters` outside the base was
    /// published by this gateway in an earlier run (then it is cleared unless published again).
    func isOwnEarlierTopic(_ message: MQTTMessage, _ gateway: isolated Gateway) -> Bool

    /// A retained message under the base seen in the look at the broker at start, before the
    /// first pass: what an earlier run left (an output's own documents among them), to take up
    /// what they said.
    func readEarlier(_ message: MQTTMessage, _ gateway: isolated Gateway)

    /// A pass over `tree` begins: every accessory's documents follow, by `publishDocuments` for
    /// the first publication or a rebuild (`tree` is the new one), or by `republication` when
    /// `republishing` (`tree` is the published one). The two kinds of pass may interleave.
    func beginPass(over tree: TopicTree, republishing: Bool, _ gateway: isolated Gateway)

    /// Publishes what changed of one accessory's documents (`gateway.publishRetained`); returns
    /// every topic it holds for it, so that the gateway clears those it no longer holds.
    func publishDocuments(of node: TopicTree.AccessoryNode, _ gateway: isolated Gateway) -> [String]

    /// One accessory's documents as they are on the broker, to publish again after a reconnect
    /// (or when the output asks, `republish(_:)`).
    func republication(of node: TopicTree.AccessoryNode, _ gateway: isolated Gateway) -> [(String, [UInt8])]

    /// Publishes what changed of its documents of the gateway itself (of no one accessory), once
    /// per pass after the accessories'; returns every topic it holds, so that the gateway clears
    /// those it no longer holds (and every one when the home is retired).
    func publishGatewayDocuments(_ gateway: isolated Gateway) -> [String]

    /// Its documents of the gateway itself as they are on the broker, to publish again after the
    /// accessories' (a reconnect, or `republish(_:)`).
    func gatewayRepublication(_ gateway: isolated Gateway) -> [(String, [UInt8])]

    /// Whether the gateway may clear one of the output's topics that it no longer holds (a pass,
    /// the ghosts of an earlier run, a retired home). No when another home's gateway holds the
    /// topic now (Home Assistant's config of an accessory moved to that home): the gateway
    /// forgets the topic without touching it, and the topic's holder publishes or clears it on
    /// its own connection, so that no clear overtakes its publication. Yes by default.
    func mayClear(_ topic: String, _ gateway: isolated Gateway) -> Bool

    /// A published value of the accessory changed (its `state` is queued already).
    func valueChanged(accessoryID: String, _ gateway: isolated Gateway)

    /// A message on one of its request filters, or under the base on a level the core does not
    /// serve; returns whether it took the message.
    func handle(_ message: IncomingMessage, _ gateway: isolated Gateway) -> Bool

    /// Runs as a child of the serving gateway's task group until cancelled (graceful shutdown,
    /// before `offline`): work that waits, such as gathering a burst of changes.
    func run(_ gateway: isolated Gateway) async
}

extension GatewayOutput {
    public var accessoryDocuments: [String] { [] }
    public var earlierDocuments: [String] { accessoryDocuments }
    public func requestFilters(_ gateway: isolated Gateway) -> [String] { [] }
    public func snapshotFilters(_ gateway: isolated Gateway) -> [String] { [] }
    public func isOwnEarlierTopic(_ message: MQTTMessage, _ gateway: isolated Gateway) -> Bool { false }
    public func readEarlier(_ message: MQTTMessage, _ gateway: isolated Gateway) {}
    public func beginPass(over tree: TopicTree, republishing: Bool, _ gateway: isolated Gateway) {}
    public func publishDocuments(of node: TopicTree.AccessoryNode, _ gateway: isolated Gateway) -> [String] { [] }
    public func republication(of node: TopicTree.AccessoryNode, _ gateway: isolated Gateway) -> [(String, [UInt8])] {
        []
    }
    public func publishGatewayDocuments(_ gateway: isolated Gateway) -> [String] { [] }
    public func gatewayRepublication(_ gateway: isolated Gateway) -> [(String, [UInt8])] { [] }
    public func mayClear(_ topic: String, _ gateway: isolated Gateway) -> Bool { true }
    public func valueChanged(accessoryID: String, _ gateway: isolated Gateway) {}
    public func handle(_ message: IncomingMessage, _ gateway: isolated Gateway) -> Bool { false }
    public func run(_ gateway: isolated Gateway) async {}
}
