import Foundation
public import HomeModel
public import Logging
public import MQTT
public import Metrics
public import ServiceLifecycle
import Synchronization

/// The bridge between a source of accessories and the broker: the actor's components, in one
/// place, each with its own state and the methods that change it.
///
/// Data flows one way in each direction: source events → scope → topic tree → outbox → MQTT
/// (and each output's documents); a `GatewayCommand` → a worker → source → its typed outcome
/// (and the source's event → state). Where each part lives:
/// - `Gateway+Lifecycle`: start-up phases, serving, and `stop` (where `offline` is published);
/// - `Gateway+Commands`: the one entry for what the gateway is asked (`submit`, `perform`),
///   typed commands and answers; `Gateway+Workers`, `Gateway+WriteMany`: commands to
///   accessories, their deadlines; `Gateway+Requests`: management operations, one at a time;
///   `Gateway+Editing`: what operations change, through `Editor` (`Requests/GatewayEditor`);
/// - `Gateway+SourceEvents`: values, reachability and structure from the source and the home
///   database, notifications and polling;
/// - `Gateway+RetainedTopics`, `Gateway+Publishing`: the tree's retained topics, published,
///   changed, cleared and republished; `Gateway+Outputs`: the outputs' hooks;
///   `Gateway+Ownership`: the record of what it published and the look at the broker;
/// - `Gateway+Connection`, `Gateway+BrokerLimits`: the broker connection, its limits, health.
///
/// The MQTT topic dialect (`set`, `get`, `$toggle`, `$identify`, `$set`,
/// `$gateway/request/<op>` and their answers) is a front end on the public API, in the
/// `TopicAPI` module: outputs the composition root hands in, as any other.
public actor Gateway: Service {
    public let config: GatewayConfig
    /// What it works with, fixed at start: the source, the database, the broker connection.
    nonisolated let parts: Parts
    /// The home as served: accessories, values, the database's view, scope, the tree.
    var served: ServedHome
    /// What is on the broker of the base topic tree, and the outbox.
    var publication: Publication
    /// The record of every retained topic this gateway published, kept across runs: the only
    /// topics it clears.
    var ownership: Ownership
    /// The dialects published beside the base topic tree.
    let outputs: Outputs
    /// The tasks work is handed to: accessory workers, gateway requests, rebuilds, notifications.
    let work: WorkQueues
    /// Who waits for each command under way (`Gateway+Commands`).
    var awaiting = AwaitingAnswers()
    /// Writes of several characteristics at once, each gathered into one answer.
    var writeMany = WriteMany()
    /// In-process callers of `request(topic:payload:)` waiting for their answer.
    var local = LocalRequests()
    /// Views of the home beside its MQTT topics (outputs on their own connections, the web page):
    /// `Gateway+Views`. Outside
    /// the actor's isolation so that a stream's `onTermination` removes its observer
    /// synchronously, without a task of its own.
    let observers = Observers()
    var phase = Phase.loading
    /// The broker connection as the last states said (a reconnect republishes).
    var connection = ConnectionWatch()
    /// `scope.rate-limits` applied: each limited characteristic's window and held value.
    var rateLimiter = RateLimiter()
    /// The health document's last sample and rates, and what it last said (`Gateway+Health`).
    var healthState: GatewayHealth
    /// When each accessory was last heard from, and its reconnects (`Gateway+LastSeen`).
    var lastSeen: LastSeen

    /// What a gateway works with, fixed when it is made.
    struct Parts: Sendable {
        var source: any AccessorySource
        var database: HomeDatabase
        /// The broker connection: an `MQTTClient`, or a transport held in memory in tests.
        var mqtt: any MQTTTransport
        var logger: Logger
        /// Where a scope set over MQTT is kept; nil in tests that run without one.
        var scopeStore: ScopeStore?
        /// What pairs with the sources, one per kind that pairs (HAP's); empty without one.
        var pairings: [any PairingManager]
        /// The management operations it answers: the core ones, then its sources' own.
        var operations: [any ManagementOperation.Type]
        /// Every publish, in order.
        var outbox: Outbox
        /// What the timers read (deadlines, the watchdog, bursts, polling): real, or a test's.
        var clock: GatewayClock
        var startedAt = ContinuousClock.now
        /// Counts for `/metrics` and health, and the last errors, for the web view.
        var activity = GatewayActivity()
        /// The thread serving runs on (see `GatewayThread` and `run()`).
        var thread = GatewayThread()
    }

    /// Where a gateway's life is: each phase follows the one before; `stopped` is the last.
    enum Phase: Equatable {
        case loading
        case waitingForBroker
        /// Connected once: the look at the broker, and the first publication.
        case publishing
        /// The whole tree and `online` have been queued: changes are published from now on.
        case serving
        /// `offline` is queued (if the broker was ever reached): nothing is published after it.
        case stopped
    }

    /// Topic levels under an accessory's topic that the gateway publishes itself, its own and
    /// its answers': a message on one is never a request.
    static let outputKinds: Set<String> = [
        "state", "meta", "result", "$info", "$availability", "$result", LastSeen.level,
    ]

    public init(
        config: GatewayConfig, source: any AccessorySource, database: HomeDatabase, mqtt: any MQTTTransport,
        scopeStore: ScopeStore? = nil, pairings: [any PairingManager] = [],
        operations: [any ManagementOperation.Type] = [],
        publicationBacklog: Int = 20_000, ownedTopics: OwnedTopicsStore? = nil,
        outputs: sending [any GatewayOutput] = [], clock: GatewayClock = .continuous,
        metrics: (any MetricsFactory)? = nil, logger: Logger = Logger(label: "homemqtt.gateway")
    ) throws(ConfigError) {
        self.config = config
        parts = Parts(
            source: source, database: database, mqtt: mqtt, logger: logger, scopeStore: scopeStore, pairings: pairings,
            operations: ManagementOperations.all(adding: operations),
            outbox: Outbox(mqtt: mqtt, defaultQoS: config.qos, logger: logger), clock: clock,
            activity: GatewayActivity(factory: metrics ?? MetricsSystem.factory))
        self.outputs = Outputs(
            all: outputs, publishedKinds: Self.outputKinds.union(outputs.flatMap(\.earlierDocuments)))
        ownership = Ownership(store: ownedTopics)
        served = ServedHome(
            scope: try ScopeFilter(scopeStore?.load() ?? config.scope, file: config.file), base: config.baseTopic)
        publication = Publication(backlog: publicationBacklog, base: config.baseTopic)
        work = WorkQueues()
        healthState = GatewayHealth(interval: config.healthInterval)
        lastSeen = LastSeen(interval: config.lastSeenInterval)
    }

    // What the other files read of the parts and components.
    nonisolated var source: any AccessorySource { parts.source }
    nonisolated var database: HomeDatabase { parts.database }
    /// The broker connection: an `MQTTClient`, or a transport held in memory in tests.
    public nonisolated var mqtt: any MQTTTransport { parts.mqtt }
    public nonisolated var logger: Logger { parts.logger }
    nonisolated var scopeStore: ScopeStore? { parts.scopeStore }
    nonisolated var pairings: [any PairingManager] { parts.pairings }
    /// The management operations it answers: the core ones, then its sources' own.
    public nonisolated var operations: [any ManagementOperation.Type] { parts.operations }
    /// Counts for `/metrics` and health, and the last errors, for the web view.
    public nonisolated var activity: GatewayActivity { parts.activity }
    nonisolated var outbox: Outbox { parts.outbox }
    /// The time the gateway's timers read; outputs time their own with it too.
    public nonisolated var clock: GatewayClock { parts.clock }
    /// The current tree of topics.
    public var tree: TopicTree { served.tree }
    var scope: ScopeFilter { served.scope }
    var accessories: [String: Accessory] { served.accessories }
    var currentHome: Home? { served.home }
    var removedAccessories: Set<String> { served.removed }
    var publishedTree: TopicTree { publication.tree }
    var retained: RetainedLedger { publication.retained }
    var isStarted: Bool { phase == .serving }
    var isStopped: Bool { phase == .stopped }
    /// Every answer and `$state` asks. Through the two tables alone: a call of `served`'s own
    /// method copied the whole `ServedHome` first (a retain and a release of each of its ~30
    /// references, ~1.6 k instructions a `set`, callgrind).
    func currentValue(_ address: CharacteristicAddress) -> CharacteristicValue? {
        ServedHome.currentValue(address, values: served.values, accessories: served.accessories)
    }

    nonisolated var base: String { config.baseTopic }
    public nonisolated var statusTopic: String { "\(base)/$gateway/status" }
    nonisolated var treeTopic: String { "\(base)/$gateway/tree" }

    /// The services that make a running gateway, in the order a `ServiceGroup` starts them:
    /// the MQTT client (which connects, and reconnects, by itself), the source, and the
    /// gateway. The group stops them in reverse, so the gateway says `offline` while the
    /// client is still connected, and the client disconnects last.
    public nonisolated var services: [ServiceGroupConfiguration.ServiceConfiguration] {
        [.init(service: mqtt), .init(service: source), .init(service: self)]
    }
}
