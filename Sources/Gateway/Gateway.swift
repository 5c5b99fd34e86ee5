import Foundation
import HomeModel
import Logging
import MQTT
import ServiceLifecycle
import Synchronization

/// The bridge between a source of accessories and the broker.
///
/// Data flows one way in each direction: source events → scope → topic tree → outbox → MQTT;
/// MQTT `set`/`get`/`$toggle` → validation → a worker → source → result and state. The actor
/// owns the tree, the values and the set of retained topics it has published; every MQTT
/// publish goes through one ordered outbox, so that a clear can never overtake the publish it
/// follows, and the actor never waits on the network.
public actor Gateway: Service {
    public let config: GatewayConfig
    let source: any AccessorySource
    let database: HomeDatabase
    public let mqtt: MQTTClient
    let logger: Logger
    let scopeStore: ScopeStore?
    let pairing: (any PairingManager)?
    let startedAt = ContinuousClock.now

    var scope: ScopeFilter
    var accessories: [String: Accessory] = [:]
    var accessoryOrder: [String] = []
    /// Values reported since each accessory was described (the values it came with are in
    /// `accessories`): a table of every value took ~100 bytes per characteristic, 25 MB at
    /// 250,000, to repeat what the accessories already hold.
    var values: [CharacteristicAddress: CharacteristicValue] = [:]
    public var tree: TopicTree
    /// Every retained topic this gateway has published and not cleared, with a digest of its
    /// payload, but for characteristics' `state` and `meta`: those follow from `publishedTree`
    /// and `values`. At 10,000 accessories, keeping them here too cost half a million topic
    /// strings (~250 bytes per characteristic), and keeping payloads rather than digests kept
    /// the tree document and every discovery config twice (~500 bytes per characteristic).
    /// A republish makes the payloads again from the tree.
    var retained: [String: PayloadDigest] = [:]
    /// Messages queued in the outbox and not yet handed to the MQTT client: the first
    /// publication waits on it, so that the whole retained tree is never in memory at once.
    let backlog = OutboxBacklog()
    /// How many messages the first publication lets wait in the outbox before it makes more.
    let publicationBacklog: Int
    /// The tree whose characteristic topics are on the broker (the current tree once started).
    var publishedTree: TopicTree
    /// One buffer per distinct `meta` document, shared by every characteristic that has it.
    var metaPayloads: [MetaKey: [UInt8]] = [:]
    var isStarted = false
    /// Set once the broker first answered: from then on the gateway says `offline` as it stops.
    var hasConnected = false
    /// Set once `offline` is queued: nothing is published after it.
    var isStopped = false
    /// Requests dispatched to a worker and not yet answered; `stop` waits for them.
    let pendingJobs = Atomic<Int>(0)
    /// Accessories removed from the home while their source still reports them; the home
    /// database keeps the list, this is its copy plus those on their way out.
    var removedAccessories: Set<String> = []
    var counters = Counters()

    let outbox: AsyncStream<Outgoing>.Continuation
    let outboxStream: AsyncStream<Outgoing>
    let notificationTargets: AsyncStream<Set<CharacteristicAddress>>.Continuation
    let notificationStream: AsyncStream<Set<CharacteristicAddress>>
    /// Home events ask for a rebuild here rather than rebuilding each: a rebuild costs the whole
    /// tree, and a burst of events (the first start adopts every room and accessory, one event
    /// each) would otherwise cost events × tree — minutes at 10,000 accessories. Requests made
    /// while a rebuild runs collapse into one more.
    let rebuildRequests: AsyncStream<Void>.Continuation
    let rebuildStream: AsyncStream<Void>
    /// Gateway requests run one at a time off the message loop: a `pair` or `discover` takes
    /// seconds, and `set`/`get` must not wait for it.
    let requestQueue: AsyncStream<GatewayRequest>.Continuation
    let requestStream: AsyncStream<GatewayRequest>
    let deadlines = RequestDeadlines()
    let workerCount = 8
    let workers: [AsyncStream<Job>.Continuation]
    let workerStreams: [AsyncStream<Job>]

    struct Counters {
        var sets = 0
        var gets = 0
        var errors = 0
        var published = 0
    }

    enum Outgoing: Sendable {
        case publish(topic: String, payload: [UInt8], retain: Bool, qos: MQTTQoS?)
        /// Retained `meta`/`state` topics of many characteristics. Their topic strings are made
        /// as each is sent: queued whole, half a million of them sat in memory at once.
        case characteristics([CharacteristicTopics])
        /// Publish every retained topic again (after a reconnect).
        case republishAll
        /// Publish every Home Assistant discovery config again (its birth message).
        case republishDiscovery
    }

    struct Job: Sendable {
        enum Kind: Sendable { case set(CharacteristicValue), get, identify }
        var kind: Kind
        var op: String
        var id: JSONValue
        var node: TopicTree.CharacteristicNode?
        var accessoryID: String
        var resultTopic: String
    }

    public init(
        config: GatewayConfig, source: any AccessorySource, database: HomeDatabase, mqtt: MQTTClient,
        scopeStore: ScopeStore? = nil, pairing: (any PairingManager)? = nil,
        publicationBacklog: Int = 20_000,
        logger: Logger = Logger(label: "homemqtt.gateway")
    ) throws(ConfigError) {
        self.publicationBacklog = max(publicationBacklog, 1)
        self.pairing = pairing
        self.config = config
        self.source = source
        self.database = database
        self.mqtt = mqtt
        self.logger = logger
        self.scopeStore = scopeStore
        self.scope = try ScopeFilter(scopeStore?.load() ?? config.scope, file: config.file)
        self.tree = TopicTree(base: config.baseTopic)
        self.publishedTree = TopicTree(base: config.baseTopic)
        (outboxStream, outbox) = AsyncStream<Outgoing>.makeStream()
        (notificationStream, notificationTargets) = AsyncStream<Set<CharacteristicAddress>>.makeStream(bufferingPolicy: .bufferingNewest(1))
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
    nonisolated var statusTopic: String { "\(base)/$gateway/status" }

    // MARK: - Running

    /// The services that make a running gateway, in the order a `ServiceGroup` starts them:
    /// the MQTT client (which connects, and reconnects, by itself), the source, and the
    /// gateway. The group stops them in reverse, so the gateway says `offline` while the
    /// client is still connected, and the client disconnects last.
    public nonisolated var services: [ServiceGroupConfiguration.ServiceConfiguration] {
        [.init(service: mqtt), .init(service: source), .init(service: self)]
    }

    /// Loads the home, waits for the broker, publishes the tree, then serves until graceful
    /// shutdown or cancellation; either stops every phase at once, and `stop` ends in order.
    public func run() async throws {
        // Subscribed before anything happens, so that nothing is missed meanwhile.
        let sourceEvents = source.events()
        let homeEvents = database.events()
        let messages = mqtt.messages()
        let states = mqtt.connectionStates()

        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { await self.drainOutbox() }
            group.addTask { await self.syncNotifications() }
            for index in 0..<workerCount {
                let stream = workerStreams[index]
                group.addTask { await self.runWorker(stream) }
            }
            group.addTask { await self.watchDeadlines() }

            var failure: (any Error)?
            do {
                try await cancelWhenGracefulShutdown {
                    try await self.start(connection: states)
                    try await self.serve(sourceEvents: sourceEvents, homeEvents: homeEvents, messages: messages, states: states)
                }
            } catch is CancellationError {
            } catch {
                failure = error
            }
            await stop()
            group.cancelAll()
            if let failure { throw failure }
        }
    }

    /// The start-up phases, each logged: load the accessories, wait for the MQTT client to
    /// connect, subscribe, publish the whole tree, `online` last.
    private func start(connection states: AsyncStream<MQTTConnectionState>) async throws {
        logger.info("loading accessories", metadata: ["source": "\(source.sourceName)"])
        let initial = await source.accessories()
        try Task.checkCancellation()
        try await loadInitial(initial)
        logger.info("home loaded", metadata: [
            "accessories": "\(initial.count)", "in-scope": "\(tree.accessories.count)",
            "characteristics": "\(tree.characteristicCount)", "rooms": "\(tree.rooms.count)",
        ])

        logger.info("waiting for the broker", metadata: ["broker": "\(config.brokerDisplay)", "client-id": "\(config.mqtt.clientID)"])
        var connected = false
        for await state in states where state.isConnected {
            connected = true
            break
        }
        // The states end only when the client stops: the group is ending.
        guard connected, !Task.isCancelled else { throw CancellationError() }
        wasConnected = true
        hasConnected = true

        var filters: [(String, MQTTQoS)] = [("\(base)/#", .atLeastOnce)]
        if config.homeAssistant.enabled {
            let prefix = config.homeAssistant.prefix
            filters.append((HomeAssistantDiscovery.statusTopic(prefix: prefix), .atLeastOnce))
            // Retained configs of ours that the tree no longer has are cleared on arrival.
            filters.append(("\(prefix)/device/+/config", .atLeastOnce))
        }
        try await mqtt.subscribe(filters)
        logger.info("publishing the tree", metadata: ["topics": "\(retainedCount + tree.accessories.count * 3 + 2)"])
        await publishAll()
        try Task.checkCancellation()
        isStarted = true
        logger.info("gateway online", metadata: [
            "broker": "\(config.brokerDisplay)", "base": "\(base)",
            "accessories": "\(tree.accessories.count)", "characteristics": "\(tree.characteristicCount)",
        ])
    }

    /// Takes source events, home events, MQTT messages, requests and connection changes until
    /// cancelled.
    private func serve(
        sourceEvents: AsyncStream<SourceEvent>, homeEvents: AsyncStream<HomeEvent>,
        messages: AsyncStream<MQTTMessage>, states: AsyncStream<MQTTConnectionState>
    ) async throws {
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { await self.consume(sourceEvents: sourceEvents) }
            group.addTask { for await event in homeEvents { await self.handle(homeEvent: event) } }
            group.addTask {
                for await _ in self.rebuildStream {
                    // The events of a burst arrive one actor turn apart; a short wait lets them
                    // all ask, so that one rebuild (and at most one more) answers the burst.
                    try? await Task.sleep(for: .milliseconds(20))
                    await self.rebuildIfTheHomeChanged()
                }
            }
            group.addTask { await self.consume(messages: messages) }
            group.addTask {
                for await request in self.requestStream {
                    let outcome = await self.perform(op: request.op, RequestFields(fields: request.fields))
                    await self.respond(request.responseTopic, id: request.id, outcome)
                }
            }
            group.addTask { for await state in states { await self.handle(connection: state) } }
            if config.pollInterval > 0 { group.addTask { try await self.pollLoop() } }
        }
    }

    // The busiest streams are read on the actor: a waiting event is taken and handled without
    // leaving it (`for await` asks with the actor's isolation), where a loop outside hopped on
    // and off the actor for each one, two thread switches per notification or request on a
    // machine whose cores the broker and the clients share.
    private func consume(sourceEvents: AsyncStream<SourceEvent>) async {
        for await event in sourceEvents { await handle(sourceEvent: event) }
    }

    private func consume(messages: AsyncStream<MQTTMessage>) async {
        for await message in messages { await handle(message: message) }
    }

    /// The end of every run, in order: requests already handed to a worker are answered (for
    /// up to `stopGrace`), then `offline` goes through the outbox behind everything queued
    /// before it — the last thing this gateway publishes — and the outbox is drained into the
    /// MQTT client, which sends it before it disconnects (the client is its own service,
    /// stopped after this one). A gateway that never went online publishes nothing.
    func stop() async {
        logger.info("stopping", metadata: ["online": "\(isStarted)", "connected": "\(hasConnected)"])
        notificationTargets.finish()
        rebuildRequests.finish()
        requestQueue.finish()
        workers.forEach { $0.finish() }
        let deadline = ContinuousClock.now + Self.stopGrace
        while pendingJobs.load(ordering: .relaxed) > 0, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        if hasConnected {
            enqueue(statusTopic, Array("offline".utf8), retain: true)
        }
        isStopped = true
        outbox.finish()
        await backlog.wait(below: 1, until: deadline + Self.stopGrace)
        logger.info("gateway stopped")
    }

    /// How long `stop` waits for answers in progress, and then for the outbox.
    static let stopGrace: Duration = .seconds(1)

    func loadInitial(_ list: [Accessory]) async throws {
        try await database.adopt(list)
        await refreshHome()
        for accessory in list { remember(accessory) }
        rebuild(announce: false)
    }

    private func remember(_ accessory: Accessory) {
        guard accessories[accessory.id] != nil else {
            accessoryOrder.append(accessory.id)
            accessories[accessory.id] = accessory
            return
        }
        // A new description of a known accessory (a HAP accessory read again after a
        // reconnect) can carry values that no event reported: they are updates like any other,
        // published where the characteristic's topic is now.
        for service in accessory.services {
            for characteristic in service.characteristics {
                guard let value = characteristic.value else { continue }
                update(CharacteristicAddress(accessoryID: accessory.id, iid: characteristic.iid), value)
            }
        }
        accessories[accessory.id] = accessory
    }

    private func forget(_ id: String) {
        accessories[id] = nil
        accessoryOrder.removeAll { $0 == id }
        values = values.filter { $0.key.accessoryID != id }
    }

    /// A characteristic's value: the last one reported, else the one its accessory came with.
    func currentValue(_ address: CharacteristicAddress) -> CharacteristicValue? {
        if let reported = values[address] { return reported }
        for service in accessories[address.accessoryID]?.services ?? [] {
            if let found = service.characteristics.first(where: { $0.iid == address.iid }) { return found.value }
        }
        return nil
    }

    // MARK: - Outbox

    /// Runs off the actor: publishing never waits for the actor's other work (a rebuild, a
    /// burst of notifications), and the actor never waits for the network.
    private nonisolated func drainOutbox() async {
        for await item in outboxStream {
            switch item {
            case .publish(let topic, let payload, let retain, let qos):
                await send(topic, payload, retain: retain, qos: qos)
                backlog.add(-1)
            case .characteristics(let list):
                await send(list)
                backlog.add(-CharacteristicTopics.messages(in: list))
            case .republishDiscovery:
                // One context for the whole republication: it knows every accessory's node id,
                // and made per accessory it cost accessories² at 10,000 of them.
                let discovery = await publishedDiscoveryContext()
                for id in await publishedAccessoryIDs() {
                    for (topic, payload) in await republication(of: id, discovery: discovery, discoveryOnly: true) {
                        await send(topic, payload, retain: true)
                    }
                }
                backlog.add(-1)
            case .republishAll:
                // One accessory at a time, made as it is sent: the whole retained tree of a
                // large home would otherwise be in memory at once, again, after every reconnect.
                let discovery = await publishedDiscoveryContext()
                for id in await publishedAccessoryIDs() {
                    for (topic, payload) in await republication(of: id, discovery: discovery, discoveryOnly: false) {
                        await send(topic, payload, retain: true)
                    }
                    await send(await characteristicRepublication(of: id))
                }
                await send(treeTopic, await treeBytes(), retain: true, qos: Self.treeQoS)
                // `online` last: a client that sees it knows the whole tree is there.
                await send(statusTopic, Array("online".utf8), retain: true)
                backlog.add(-1)
            }
        }
    }

    private func publishedAccessoryIDs() -> [String] { publishedTree.accessories.map(\.id) }

    private func publishedDiscoveryContext() -> HomeAssistantDiscovery.Context? { discoveryContext(publishedTree) }

    /// An accessory's retained documents as they are on the broker, to publish again.
    private func republication(
        of id: String, discovery: HomeAssistantDiscovery.Context?, discoveryOnly: Bool
    ) -> [(String, [UInt8])] {
        guard let node = publishedTree.accessory(id: id) else { return [] }
        var out: [(String, [UInt8])] = []
        if !discoveryOnly {
            out.append((node.topic + "/$info", Array(Payloads.info(node).encoded().utf8)))
            out.append((node.topic + "/$availability", availabilityPayload(node)))
        }
        if let (topic, document) = discovery?.config(node) {
            out.append((topic, Array(document.encoded().utf8)))
        }
        return out
    }

    private func characteristicRepublication(of id: String) -> [CharacteristicTopics] {
        guard let node = publishedTree.accessory(id: id) else { return [] }
        var texts: [String: [UInt8]] = [:]
        return characteristicTopics(of: node, old: TopicTree(base: base), texts: &texts)
    }

    private nonisolated func send(_ list: [CharacteristicTopics]) async {
        for item in list {
            if let meta = item.meta { await send(item.topic + "/meta", meta, retain: true) }
            if let state = item.state { await send(item.topic + "/state", state, retain: true) }
        }
    }

    private nonisolated func send(_ topic: String, _ payload: [UInt8], retain: Bool, qos: MQTTQoS? = nil) async {
        do {
            try await mqtt.publish(topic, payload: payload, qos: qos ?? config.qos, retain: retain)
        } catch {
            logger.warning("publish failed", metadata: ["topic": "\(topic)", "error": "\(error)"])
        }
    }

    func enqueue(_ topic: String, _ payload: [UInt8], retain: Bool, qos: MQTTQoS? = nil) {
        guard !isStopped else { return }
        counters.published += 1
        // Straight to the client when nothing waits in the outbox (so nothing is overtaken) and
        // the client has room, which it then takes without waiting: handing each message to
        // the outbox's task cost a thread switch, most of a notification's time in the gateway.
        if backlog.current == 0 {
            do {
                if try mqtt.publishWithoutWaiting(topic, payload: payload, qos: qos ?? config.qos, retain: retain) { return }
            } catch {
                logger.warning("publish failed", metadata: ["topic": "\(topic)", "error": "\(error)"])
                return
            }
        }
        backlog.add(1)
        outbox.yield(.publish(topic: topic, payload: payload, retain: retain, qos: qos))
    }

    /// Queues a republication behind what the outbox holds.
    func enqueue(_ item: Outgoing) {
        guard !isStopped else { return }
        backlog.add(1)
        outbox.yield(item)
    }

    nonisolated var treeTopic: String { "\(base)/$gateway/tree" }

    /// The tree document goes at QoS 0. libmosquitto keeps a second copy of every QoS 1
    /// message until its PUBACK (60 MB more for the tree of 10,000 accessories), and what that
    /// copy is for, sending it again after a reconnect, the gateway does itself: it publishes
    /// every retained topic again after each reconnect. Subscribers get it as retained, so no
    /// persistent session needs a queued copy of a document this size either.
    static let treeQoS = MQTTQoS.atMostOnce

    private func enqueue(_ list: [CharacteristicTopics]) {
        guard !list.isEmpty, !isStopped else { return }
        let messages = CharacteristicTopics.messages(in: list)
        counters.published += messages
        backlog.add(messages)
        outbox.yield(.characteristics(list))
    }

    func enqueue(_ topic: String, json: JSONValue, retain: Bool = false) {
        enqueue(topic, Array(json.encoded().utf8), retain: retain)
    }

    /// Publishes a retained topic if its payload changed; an empty payload clears it.
    func setRetained(_ topic: String, _ payload: [UInt8], qos: MQTTQoS? = nil) {
        if payload.isEmpty {
            guard retained.removeValue(forKey: topic) != nil else { return }
        } else {
            let digest = PayloadDigest(payload)
            guard retained[topic] != digest else { return }
            retained[topic] = digest
        }
        enqueue(topic, payload, retain: true, qos: qos)
    }

    /// `setRetained` for a discovery config. Home Assistant drops one entity of a device that
    /// stays only when told its platform: a changed config also lists, platform only, the
    /// components of the one it replaces (made again from the tree it was made from).
    private func setDiscovery(_ topic: String, _ document: JSONValue, previous: () -> JSONValue?) {
        let payload = Array(document.encoded().utf8)
        let digest = PayloadDigest(payload)
        guard retained[topic] != digest else { return }
        let replaces = retained[topic] != nil
        retained[topic] = digest
        guard replaces, let previous = previous() else {
            enqueue(topic, payload, retain: true)
            return
        }
        let merged = HomeAssistantDiscovery.withRemovedComponents(previous: previous, next: document)
        enqueue(topic, Array(merged.encoded().utf8), retain: true)
    }

    // MARK: - The tree and its retained topics

    private func availabilityPayload(_ node: TopicTree.AccessoryNode) -> [UInt8] {
        Array((node.accessory.isReachable ? "online" : "offline").utf8)
    }

    private func discoveryContext(_ tree: TopicTree) -> HomeAssistantDiscovery.Context? {
        guard config.homeAssistant.enabled else { return nil }
        return HomeAssistantDiscovery.Context(
            tree: tree, prefix: config.homeAssistant.prefix, gatewayStatusTopic: statusTopic,
            options: .init(defaultRoomID: currentHome?.roomForEntireHome.id))
    }

    /// Publishes what changed of one accessory's retained documents (`$info`, `$availability`,
    /// its discovery config); returns their topics.
    @discardableResult
    private func applyDocuments(
        _ node: TopicTree.AccessoryNode, discovery: HomeAssistantDiscovery.Context?,
        previousDiscovery: inout HomeAssistantDiscovery.Context?
    ) -> [String] {
        let info = node.topic + "/$info", availability = node.topic + "/$availability"
        setRetained(info, Array(Payloads.info(node).encoded().utf8))
        setRetained(availability, availabilityPayload(node))
        guard let (topic, document) = discovery?.config(node) else { return [info, availability] }
        setDiscovery(topic, document) {
            guard let old = publishedTree.accessory(id: node.id) else { return nil }
            if previousDiscovery == nil { previousDiscovery = discoveryContext(publishedTree) }
            return previousDiscovery?.config(old)?.document
        }
        return [info, availability, topic]
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

    /// The home as the database last said; nil only before the first read.
    var currentHome: Home?
    /// The home the tree was last built from.
    var treeHome: Home?

    /// Home events often describe what the tree already shows: the first start adopts every
    /// room and accessory (one event each) before the tree is built from the result, and a
    /// change made through the request API rebuilds at once. A rebuild costs seconds at
    /// 10,000 accessories, so only a home that differs from the tree's gets one.
    private func rebuildIfTheHomeChanged() async {
        await refreshHome()
        guard currentHome != treeHome else { return }
        rebuild(announce: true)
    }

    /// Rebuilds the tree from the accessories, the home and the scope, then publishes what
    /// changed, clears what went away, announces structural changes and retargets
    /// notifications.
    func rebuild(announce: Bool) {
        guard let currentHome else { return }
        let old = tree
        treeHome = currentHome
        tree = TopicTree(base: base, accessories: accessoryOrder.filter { !removedAccessories.contains($0) }.compactMap { accessories[$0] }, home: currentHome, scope: scope)
        if announce { announceChanges(from: old) }
        guard isStarted else { return }
        applyRetained()
        notificationTargets.yield(notifyingAddresses())
    }

    private func applyRetained() {
        // Order does not matter between topics (each is one retained value); sorting half a
        // million at 10,000 accessories would.
        var desired = Set<String>(minimumCapacity: tree.accessories.count * 3 + 1)
        let discovery = discoveryContext(tree)
        var previousDiscovery: HomeAssistantDiscovery.Context?
        for node in tree.accessories {
            desired.formUnion(applyDocuments(node, discovery: discovery, previousDiscovery: &previousDiscovery))
        }
        setRetained(treeTopic, treeBytes(), qos: Self.treeQoS)
        desired.insert(treeTopic)
        for topic in retained.keys.filter({ !desired.contains($0) }) {
            setRetained(topic, [])
        }
        enqueue(characteristicChanges(from: publishedTree, to: tree))
        publishedTree = tree
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
    private func characteristicTopics(
        of accessory: TopicTree.AccessoryNode, old: TopicTree, texts: inout [String: [UInt8]]
    ) -> [CharacteristicTopics] {
        func stateText(_ node: TopicTree.CharacteristicNode) -> String? {
            currentValue(node.address).map { ValueCodec.text($0, format: node.characteristic.metadata.format) }
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
                let state = stateText(c)
                guard let before = old.characteristic(c.address), before.topic == c.topic else {
                    out.append(CharacteristicTopics(topic: c.topic, meta: metaPayload(c), state: state.map(statePayload)))
                    continue
                }
                let metaChanged = MetaKey(before) != MetaKey(c)
                let stateChanged = state != nil && state != stateText(before)
                guard metaChanged || stateChanged else { continue }
                out.append(CharacteristicTopics(topic: c.topic, meta: metaChanged ? metaPayload(c) : nil,
                                                state: stateChanged ? state.map(statePayload) : nil))
            }
        }
        return out
    }

    /// A characteristic's `meta` document, shared with every other that has the same one (every
    /// brightness of one kind of lamp): one buffer each, and each encoded once.
    private func metaPayload(_ c: TopicTree.CharacteristicNode) -> [UInt8] {
        let key = MetaKey(c)
        if let shared = metaPayloads[key] { return shared }
        let payload = Array(Payloads.meta(c).encoded().utf8)
        metaPayloads[key] = payload
        return payload
    }

    /// The in-scope characteristics that can notify, straight from the tree (no array of every
    /// address on the way).
    private func notifyingAddresses() -> Set<CharacteristicAddress> {
        var out = Set<CharacteristicAddress>(minimumCapacity: tree.characteristicCount)
        for accessory in tree.accessories {
            for service in accessory.services {
                for c in service.characteristics where c.characteristic.metadata.permissions.contains(.notify) {
                    out.insert(c.address)
                }
            }
        }
        return out
    }

    /// Every retained topic this gateway holds on the broker, with characteristics' `state`
    /// and `meta`.
    var retainedCount: Int { retained.count + publishedCharacteristicTopics().count }

    /// The `meta` and `state` topics of the published tree's characteristics.
    private func publishedCharacteristicTopics() -> [String] {
        var topics: [String] = []
        for accessory in publishedTree.accessories {
            for service in accessory.services {
                for c in service.characteristics {
                    topics.append(c.topic + "/meta")
                    if currentValue(c.address) != nil { topics.append(c.topic + "/state") }
                }
            }
        }
        return topics
    }

    /// First publication after connecting: `applyRetained` from nothing, a few accessories at a
    /// time, each batch made once the outbox has room. Made all at once, every payload of a
    /// large home sat in the outbox together (the broker takes tens of seconds to drain it):
    /// at 10,000 accessories, hundreds of megabytes. Nothing else runs on the actor meanwhile;
    /// the gateway takes events and messages only once started.
    private func publishAll() async {
        let empty = TopicTree(base: base)
        let discovery = discoveryContext(tree)
        var previousDiscovery: HomeAssistantDiscovery.Context?
        var texts: [String: [UInt8]] = [:]
        for node in tree.accessories {
            // SIGTERM in the middle of a large home's first publication stops it here.
            if Task.isCancelled { return }
            applyDocuments(node, discovery: discovery, previousDiscovery: &previousDiscovery)
            enqueue(characteristicTopics(of: node, old: empty, texts: &texts))
            await backlog.wait(below: publicationBacklog)
        }
        setRetained(treeTopic, treeBytes(), qos: Self.treeQoS)
        publishedTree = tree
        // `online` last: a client that sees it knows the whole tree is there.
        enqueue(statusTopic, Array("online".utf8), retain: true)
        notificationTargets.yield(notifyingAddresses())
    }

    func refreshHome() async {
        let home = await database.home
        currentHome = home
        removedAccessories.formUnion(home.removedAccessoryIDs)
    }

    private func announceChanges(from old: TopicTree) {
        for node in tree.accessories {
            guard let before = old.accessory(id: node.id) else {
                event("accessory-added", accessory: node)
                continue
            }
            if before.displayName != node.displayName {
                event("accessory-renamed", accessory: node, extra: ["old-name": .string(before.displayName), "old-topic": .string(before.topic)])
            }
            if before.room.id != node.room.id {
                event("accessory-moved", accessory: node, extra: ["old-room": .string(before.room.name), "old-topic": .string(before.topic)])
            } else if before.topic != node.topic && before.displayName == node.displayName {
                event("accessory-topic-changed", accessory: node, extra: ["old-topic": .string(before.topic)])
            }
        }
        for node in old.accessories where tree.accessory(id: node.id) == nil {
            let reason = accessories[node.id] == nil || removedAccessories.contains(node.id) ? "accessory-removed" : "accessory-left-scope"
            event(reason, accessory: node)
        }
    }

    func event(_ name: String, accessory node: TopicTree.AccessoryNode, extra: [String: JSONValue] = [:]) {
        var object: [String: JSONValue] = [
            "event": .string(name),
            "accessory": .object([
                "id": .string(node.id), "name": .string(node.displayName),
                "room": .string(node.room.name), "topic": .string(node.topic),
            ]),
        ]
        object.merge(extra) { a, _ in a }
        enqueue("\(base)/$gateway/event", json: .object(object))
    }

    func event(_ name: String, fields: [String: JSONValue]) {
        var object = fields
        object["event"] = .string(name)
        enqueue("\(base)/$gateway/event", json: .object(object))
    }

    // MARK: - Source and home events

    func handle(sourceEvent: SourceEvent) async {
        switch sourceEvent {
        case .valueUpdated(let address, let value):
            update(address, value)
        case .reachabilityChanged(let id, let reachable):
            guard var accessory = accessories[id], accessory.isReachable != reachable else { return }
            accessory.isReachable = reachable
            accessories[id] = accessory
            rebuild(announce: false)
            if let node = tree.accessory(id: id) {
                event(reachable ? "accessory-reachable" : "accessory-unreachable", accessory: node)
            }
        case .accessoryAdded(let accessory), .accessoryChanged(let accessory):
            try? await database.adopt([accessory])
            await refreshHome()
            remember(accessory)
            rebuild(announce: true)
        case .accessoryRemoved(let id):
            forget(id)
            rebuild(announce: true)
        }
    }

    func handle(homeEvent: HomeEvent) async {
        await refreshHome()
        switch homeEvent {
        case .roomAdded(let room):
            event("room-added", fields: ["room": .object(["id": .string(room.id), "name": .string(room.name)])])
        case .roomRemoved(let room):
            event("room-removed", fields: ["room": .object(["id": .string(room.id), "name": .string(room.name)])])
        case .roomRenamed(let room, let oldName):
            event("room-renamed", fields: ["room": .object(["id": .string(room.id), "name": .string(room.name)]), "old-name": .string(oldName)])
        case .serviceRenamed(let accessoryID, let iid, let name):
            event("service-renamed", fields: [
                "accessory": .string(accessoryID), "iid": .uint(iid), "name": name.map(JSONValue.string) ?? .null,
            ])
        case .homeRenamed(let name):
            event("home-renamed", fields: ["name": .string(name)])
        case .accessoryAssigned, .accessoryRenamed, .accessoryForgotten:
            break // announced by the tree diff, which knows the topics
        }
        rebuildRequests.yield()
    }

    func update(_ address: CharacteristicAddress, _ value: CharacteristicValue) {
        let previous = currentValue(address)
        values[address] = value
        guard isStarted, previous != value, let node = publishedTree.characteristic(address) else { return }
        // What is on the broker is the text of the previous value: publish only a change.
        let format = node.characteristic.metadata.format
        let text = ValueCodec.text(value, format: format)
        if let previous, ValueCodec.text(previous, format: format) == text { return }
        enqueue(node.topic + "/state", Array(text.utf8), retain: true)
    }

    // MARK: - Notifications and polling

    private func syncNotifications() async {
        var enabled = Set<CharacteristicAddress>()
        for await desired in notificationStream {
            let off = enabled.subtracting(desired).sorted()
            let on = desired.subtracting(enabled).sorted()
            if !off.isEmpty {
                _ = await source.setNotifications(enabled: false, for: off)
            }
            if !on.isEmpty {
                let failures = await source.setNotifications(enabled: true, for: on)
                for (address, error) in failures {
                    logger.debug("notifications not enabled", metadata: ["characteristic": "\(address)", "error": "\(error)"])
                }
            }
            enabled = desired
        }
    }

    private func pollTargets() -> [CharacteristicAddress] {
        tree.accessories.filter(\.accessory.isReachable).flatMap { node in
            node.services.flatMap { service in
                service.characteristics.filter {
                    let permissions = $0.characteristic.metadata.permissions
                    return permissions.contains(.read) && !permissions.contains(.notify)
                }.map(\.address)
            }
        }
    }

    private func pollLoop() async throws {
        while true {
            try await Task.sleep(for: .seconds(config.pollInterval))
            // A read value comes back as the source's `valueUpdated` event, in order.
            for address in pollTargets() {
                _ = try? await source.read(address)
            }
        }
    }

    // MARK: - MQTT connection

    var wasConnected = false

    func handle(connection state: MQTTConnectionState) {
        switch state {
        case .connected:
            if !wasConnected {
                logger.info("reconnected to the broker; republishing")
                enqueue(.republishAll)
            }
            wasConnected = true
        case .disconnected(nil):
            // Our own clean disconnect at shutdown: nothing was lost.
            wasConnected = false
        case .reconnecting(let error), .disconnected(let error):
            if wasConnected {
                logger.warning("lost the broker", metadata: ["error": "\(error.map { "\($0)" } ?? "none")"])
            }
            wasConnected = false
        default:
            break
        }
    }

    // MARK: - Health (also for the request API)

    func health() async -> JSONValue {
        let uptime = ContinuousClock.now - startedAt
        return .object([
            "uptime": .double(Double(uptime.components.seconds) + Double(uptime.components.attoseconds) / 1e18),
            "broker": .object([
                "url": .string(config.brokerDisplay),
                "state": .string("\(mqtt.connectionState)"),
            ]),
            "sources": .array([.object(["name": .string(source.sourceName)])]),
            "counts": .object([
                "rooms": .int(Int64(tree.rooms.count)),
                "accessories": .int(Int64(tree.accessories.count)),
                "characteristics": .int(Int64(tree.characteristicCount)),
                "retained-topics": .int(Int64(retainedCount)),
                "sets": .int(Int64(counters.sets)),
                "gets": .int(Int64(counters.gets)),
                "errors": .int(Int64(counters.errors)),
            ]),
        ])
    }

    public var retainedTopicList: [String] { (Array(retained.keys) + publishedCharacteristicTopics()).sorted() }

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

/// A characteristic's retained topics to publish (a payload), clear (empty) or leave (nil).
struct CharacteristicTopics: Sendable {
    /// The characteristic's base topic; `/meta` and `/state` are added as each is sent.
    var topic: String
    var meta: [UInt8]?
    var state: [UInt8]?

    static func messages(in list: [CharacteristicTopics]) -> Int {
        list.reduce(0) { $0 + ($1.meta == nil ? 0 : 1) + ($1.state == nil ? 0 : 1) }
    }
}

/// What the retained ledger keeps of a payload: its length and 64-bit FNV-1a hash, enough to
/// tell a changed payload from the one on the broker.
struct PayloadDigest: Hashable, Sendable {
    var count: Int
    var hash: UInt64

    init(_ bytes: [UInt8]) {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01B3
        }
        self.count = bytes.count
        self.hash = hash
    }
}

/// How many messages wait in the outbox, shared by the gateway (which adds) and the outbox's
/// drain (which takes away), so that a producer of many can wait for room.
final class OutboxBacklog: Sendable {
    private let count = Mutex(0)

    func add(_ messages: Int) { count.withLock { $0 += messages } }

    var current: Int { count.withLock { $0 } }

    /// Waits until fewer than `limit` messages wait, or until `deadline`; polls, since it is
    /// used only while the first publication of a large home is made and at the end.
    func wait(below limit: Int, until deadline: ContinuousClock.Instant? = nil) async {
        while current >= limit {
            if let deadline, ContinuousClock.now >= deadline { return }
            try? await Task.sleep(for: .milliseconds(2))
        }
    }
}
