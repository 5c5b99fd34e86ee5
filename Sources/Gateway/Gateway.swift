import Foundation
public import HomeModel
public import Logging
public import MQTT
public import ServiceLifecycle
import Synchronization

/// The bridge between a source of accessories and the broker: the actor's state, in one place.
///
/// Data flows one way in each direction: source events → scope → topic tree → outbox → MQTT;
/// MQTT `set`/`get`/`$toggle` → validation → a worker → source → result (and the source's
/// event → state). Where each part lives:
/// - `Gateway+Lifecycle`: start-up phases, serving, and `stop` (where `offline` is published);
/// - `Gateway+Messages`: incoming topics, `set` validation; `Gateway+Workers`: requests to
///   accessories and their results; `Gateway+Requests`: `$gateway/request/<op>`;
/// - `Gateway+SourceEvents`: values, reachability and structure from the source and the home
///   database, notifications and polling;
/// - `Gateway+RetainedTopics`: the tree's retained topics, published, changed and cleared;
///   `Gateway+Publishing`: queueing, events and republication; `Outbox`, `RetainedLedger`;
/// - `Gateway+Connection`: the broker connection and health.
public actor Gateway: Service {
    // Fixed at start.
    public let config: GatewayConfig
    let source: any AccessorySource
    let database: HomeDatabase
    /// The broker connection: an `MQTTClient`, or a transport held in memory in tests.
    public let mqtt: any MQTTTransport
    public nonisolated let logger: Logger
    /// Where a scope set over MQTT is kept; nil in tests that run without one.
    let scopeStore: ScopeStore?
    /// Pairing over MQTT; nil without a HAP source.
    let pairing: (any PairingManager)?
    /// The management operations it answers: the core ones, then its sources' own.
    public nonisolated let operations: [any ManagementOperation.Type]
    let startedAt = ContinuousClock.now
    /// How many messages the first publication lets wait in the outbox before it makes more,
    /// so that a large home's whole retained tree is never in memory at once.
    let publicationBacklog: Int

    // The home as the source and the database describe it.
    var scope: ScopeFilter
    var accessories: [String: Accessory] = [:]
    /// The order accessories arrived in: topics and collisions are decided in it.
    var accessoryOrder: [String] = []
    /// Values reported since each accessory was described (the values it came with are in
    /// `accessories`), rather than a table of every value repeating what they hold.
    var values: [CharacteristicAddress: CharacteristicValue] = [:]
    /// Accessories removed from the home while their source still reports them; the home
    /// database keeps the list, this is its copy plus those on their way out.
    var removedAccessories: Set<String> = []
    /// The home as the database last said; nil only before the first read.
    var currentHome: Home?
    /// The home the tree was last built from.
    var treeHome: Home?

    // What is published.
    public var tree: TopicTree
    /// The tree whose characteristic topics are on the broker (the current tree once started).
    var publishedTree: TopicTree
    /// The retained topics other than characteristics' `state`/`meta`, as digests.
    var retained = RetainedLedger()
    /// The record of every retained topic this gateway published, kept across runs: the only
    /// topics it clears.
    var ownership: Ownership
    /// The tree's form last logged (whole or paged under the broker's maximum packet size).
    var reportedTreeForm: TreeForm?
    /// One buffer per distinct `meta` document, shared by every characteristic that has it.
    var metaPayloads: [MetaKey: [UInt8]] = [:]
    /// Every publish, in order.
    let outbox: Outbox
    /// The dialects published beside the base topic tree, in the order their hooks are called.
    let outputs: [any GatewayOutput]
    /// Topic levels published under an accessory's topic, the core's and the outputs': never
    /// requests.
    let publishedKinds: Set<String>
    /// Writes of several characteristics at once, each gathered into one answer.
    var writeMany = WriteMany()

    // Views of the home beside its MQTT topics (Homie, the web page): `Gateway+Views`.
    /// Outside the actor's isolation so that a stream's `onTermination` removes its observer
    /// synchronously, without a task of its own.
    let observers = Observers()
    /// In-process requests waiting for their answer, by the number in their local reply topic.
    var localRequests: [Int: LocalRequest] = [:]
    var nextLocalRequest = 0

    // Phases.
    /// The whole tree and `online` have been queued: changes are published from now on.
    var isStarted = false
    /// The broker answered once: from then on the gateway says `offline` as it stops.
    var hasConnected = false
    /// `offline` is queued: nothing is published after it.
    var isStopped = false
    /// Connected now, as far as the last connection state said (a reconnect republishes).
    var wasConnected = false
    /// When the connection was lost lately (`noteLoss`).
    var recentLosses: [ContinuousClock.Instant] = []
    var counters = Counters()
    /// Counts for `/metrics` and the last errors, for the web view.
    public nonisolated let activity = GatewayActivity()

    // Work handed to other tasks.
    let notificationTargets: AsyncStream<Set<CharacteristicAddress>>.Continuation
    let notificationStream: AsyncStream<Set<CharacteristicAddress>>
    /// Home events ask for a rebuild here rather than rebuilding each: a rebuild costs the whole
    /// tree, and a burst of events (the first start adopts every room and accessory, one event
    /// each) would otherwise cost events × tree. Requests made while a rebuild runs collapse
    /// into one more.
    let rebuildRequests: AsyncStream<Void>.Continuation
    let rebuildStream: AsyncStream<Void>
    /// Gateway requests run one at a time off the message loop: a `pair` or `discover` takes
    /// seconds, and `set`/`get` must not wait for it.
    let requestQueue: AsyncStream<GatewayRequest>.Continuation
    let requestStream: AsyncStream<GatewayRequest>
    /// Requests to accessories, one worker per accessory (by hash), so each accessory gets its
    /// requests in the order sent and a slow one holds up no other.
    let workerCount = 8
    let workers: [AsyncStream<Job>.Continuation]
    let workerStreams: [AsyncStream<Job>]
    /// The deadlines of the requests workers are running, for the one watchdog.
    let deadlines = RequestDeadlines()
    /// Requests dispatched to a worker and not yet answered; `stop` waits for them.
    let pendingJobs = Atomic<Int>(0)

    struct Counters {
        var sets = 0
        var gets = 0
        var errors = 0
        var published = 0
    }

    /// A request to an accessory, for a worker.
    struct Job: Sendable {
        enum Kind: Sendable { case set(CharacteristicValue), get, identify }
        var kind: Kind
        var op: String
        var id: JSONValue
        var node: TopicTree.CharacteristicNode?
        var accessoryID: String
        var resultTopic: String
        /// Where an MQTT 5 requester wants the answer as well.
        var reply: Reply?
        /// Part of a write of several: answered into it, not on its own.
        var part: WriteMany.Part? = nil
    }

    public init(
        config: GatewayConfig, source: any AccessorySource, database: HomeDatabase, mqtt: any MQTTTransport,
        scopeStore: ScopeStore? = nil, pairing: (any PairingManager)? = nil,
        operations: [any ManagementOperation.Type] = [],
        publicationBacklog: Int = 20_000, ownedTopics: OwnedTopicsStore? = nil,
        outputs: sending [any GatewayOutput] = [], logger: Logger = Logger(label: "homemqtt.gateway")
    ) throws(ConfigError) {
        self.outputs = outputs
        self.publishedKinds = Self.outputKinds.union(outputs.flatMap(\.accessoryDocuments))
        self.ownership = Ownership(store: ownedTopics)
        self.publicationBacklog = max(publicationBacklog, 1)
        self.pairing = pairing
        self.operations = ManagementOperations.all(adding: operations)
        self.config = config
        self.source = source
        self.database = database
        self.mqtt = mqtt
        self.logger = logger
        self.scopeStore = scopeStore
        self.scope = try ScopeFilter(scopeStore?.load() ?? config.scope, file: config.file)
        self.tree = TopicTree(base: config.baseTopic)
        self.publishedTree = TopicTree(base: config.baseTopic)
        self.outbox = Outbox(mqtt: mqtt, defaultQoS: config.qos, logger: logger)
        (notificationStream, notificationTargets) = AsyncStream<Set<CharacteristicAddress>>.makeStream(
            bufferingPolicy: .bufferingNewest(1))
        (requestStream, requestQueue) = AsyncStream<GatewayRequest>.makeStream()
        (rebuildStream, rebuildRequests) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        var streams: [AsyncStream<Job>] = []
        var continuations: [AsyncStream<Job>.Continuation] = []
        for _ in 0..<workerCount {
            let (stream, continuation) = AsyncStream<Job>.makeStream()
            streams.append(stream)
            continuations.append(continuation)
        }
        workerStreams = streams
        workers = continuations
    }

    nonisolated var base: String { config.baseTopic }
    public nonisolated var statusTopic: String { "\(base)/$gateway/status" }
    nonisolated var treeTopic: String { "\(base)/$gateway/tree" }

    /// The tree document goes at QoS 0: libmosquitto keeps a copy of every QoS 1 message until
    /// its PUBACK, and what that copy is for, sending it again after a reconnect, the gateway
    /// does itself. Subscribers get it as retained, so no persistent session needs a queued
    /// copy of a document this size either.
    static let treeQoS = MQTTQoS.atMostOnce

    /// The services that make a running gateway, in the order a `ServiceGroup` starts them:
    /// the MQTT client (which connects, and reconnects, by itself), the source, and the
    /// gateway. The group stops them in reverse, so the gateway says `offline` while the
    /// client is still connected, and the client disconnects last.
    public nonisolated var services: [ServiceGroupConfiguration.ServiceConfiguration] {
        [.init(service: mqtt), .init(service: source), .init(service: self)]
    }
}
