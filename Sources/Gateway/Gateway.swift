import Foundation
import HomeModel
import Logging
import MQTT
import ServiceLifecycle

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
    var values: [CharacteristicAddress: CharacteristicValue] = [:]
    public var tree: TopicTree
    /// Every retained topic this gateway has published and not cleared, with its payload.
    var retained: [String: [UInt8]] = [:]
    var isStarted = false
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
        case publish(topic: String, payload: [UInt8], retain: Bool)
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
        logger: Logger = Logger(label: "homemqtt.gateway")
    ) throws(ConfigError) {
        self.pairing = pairing
        self.config = config
        self.source = source
        self.database = database
        self.mqtt = mqtt
        self.logger = logger
        self.scopeStore = scopeStore
        self.scope = try ScopeFilter(scopeStore?.load() ?? config.scope, file: config.file)
        self.tree = TopicTree(base: config.baseTopic)
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

    public func run() async throws {
        let sourceEvents = source.events()
        let homeEvents = await database.events()
        let messages = mqtt.messages()
        let states = mqtt.connectionStates()

        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { try await self.source.run() }
            let initial = await source.accessories()
            try await loadInitial(initial)

            group.addTask { await self.drainOutbox() }
            group.addTask { await self.syncNotifications() }
            for index in 0..<workerCount {
                let stream = workerStreams[index]
                group.addTask { await self.runWorker(stream) }
            }
            group.addTask { try await self.watchDeadlines() }

            try await connectUntilUp()
            var filters: [(String, MQTTQoS)] = [("\(base)/#", .atLeastOnce)]
            if config.homeAssistant.enabled {
                let prefix = config.homeAssistant.prefix
                filters.append((HomeAssistantDiscovery.statusTopic(prefix: prefix), .atLeastOnce))
                // Retained configs of ours that the tree no longer has are cleared on arrival.
                filters.append(("\(prefix)/device/+/config", .atLeastOnce))
            }
            try await mqtt.subscribe(filters)
            publishAll()
            isStarted = true
            logger.info("gateway online", metadata: [
                "broker": "\(config.brokerDisplay)", "base": "\(base)",
                "accessories": "\(tree.accessories.count)", "characteristics": "\(tree.characteristicCount)",
            ])

            group.addTask { for await event in sourceEvents { await self.handle(sourceEvent: event) } }
            group.addTask { for await event in homeEvents { await self.handle(homeEvent: event) } }
            group.addTask {
                for await _ in self.rebuildStream {
                    // The events of a burst arrive one actor turn apart; a short wait lets them
                    // all ask, so that one rebuild (and at most one more) answers the burst.
                    try? await Task.sleep(for: .milliseconds(20))
                    await self.rebuildIfTheHomeChanged()
                }
            }
            group.addTask { for await message in messages { await self.handle(message: message) } }
            group.addTask {
                for await request in self.requestStream {
                    let outcome = await self.perform(op: request.op, RequestFields(fields: request.fields))
                    await self.respond(request.responseTopic, id: request.id, outcome)
                }
            }
            group.addTask { for await state in states { await self.handle(connection: state) } }
            if config.pollInterval > 0 { group.addTask { try await self.pollLoop() } }

            // Graceful shutdown: say offline while still connected, then stop everything.
            group.addTask {
                try? await gracefulShutdown()
                await self.shutdown()
                throw CancellationError()
            }
        }
    }

    /// Publishes `offline`, waits for the outbox to drain and disconnects.
    func shutdown() async {
        outbox.finish()
        notificationTargets.finish()
        rebuildRequests.finish()
        requestQueue.finish()
        workers.forEach { $0.finish() }
        try? await mqtt.publish(statusTopic, payload: Array("offline".utf8), qos: .atLeastOnce, retain: true)
        await mqtt.disconnect()
        logger.info("gateway stopped")
    }

    private func connectUntilUp() async throws {
        var delay = 0.5
        while true {
            do {
                try await mqtt.connect()
                return
            } catch {
                logger.warning("cannot reach the broker, retrying", metadata: [
                    "broker": "\(config.brokerDisplay)", "error": "\(error)", "retry-in": "\(delay)s",
                ])
                // A refusal of our credentials, TLS or configuration will not fix itself.
                if !error.isTransient { throw error }
            }
            try await Task.sleep(for: .seconds(delay))
            delay = min(delay * 2, 30)
        }
    }

    func loadInitial(_ list: [Accessory]) async throws {
        try await database.adopt(list)
        await refreshHome()
        for accessory in list { remember(accessory) }
        rebuild(announce: false)
    }

    private func remember(_ accessory: Accessory) {
        if accessories[accessory.id] == nil { accessoryOrder.append(accessory.id) }
        accessories[accessory.id] = accessory
        for service in accessory.services {
            for characteristic in service.characteristics {
                if let value = characteristic.value {
                    values[CharacteristicAddress(accessoryID: accessory.id, iid: characteristic.iid)] = value
                }
            }
        }
    }

    private func forget(_ id: String) {
        accessories[id] = nil
        accessoryOrder.removeAll { $0 == id }
        values = values.filter { $0.key.accessoryID != id }
    }

    // MARK: - Outbox

    /// Runs off the actor: publishing never waits for the actor's other work (a rebuild, a
    /// burst of notifications), and the actor never waits for the network.
    private nonisolated func drainOutbox() async {
        for await item in outboxStream {
            switch item {
            case .publish(let topic, let payload, let retain):
                await send(topic, payload, retain: retain)
            case .republishDiscovery:
                let prefix = config.homeAssistant.prefix + "/"
                for (topic, payload) in await retainedSnapshot() where topic.hasPrefix(prefix) {
                    await send(topic, payload, retain: true)
                }
            case .republishAll:
                for (topic, payload) in await retainedSnapshot() {
                    await send(topic, payload, retain: true)
                }
                // `online` last: a client that sees it knows the whole tree is there.
                await send(statusTopic, Array("online".utf8), retain: true)
            }
        }
    }

    private func retainedSnapshot() -> [(String, [UInt8])] {
        retained.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    private nonisolated func send(_ topic: String, _ payload: [UInt8], retain: Bool) async {
        do {
            try await mqtt.publish(topic, payload: payload, qos: config.qos, retain: retain)
        } catch {
            logger.warning("publish failed", metadata: ["topic": "\(topic)", "error": "\(error)"])
        }
    }

    func enqueue(_ topic: String, _ payload: [UInt8], retain: Bool) {
        counters.published += 1
        outbox.yield(.publish(topic: topic, payload: payload, retain: retain))
    }

    func enqueue(_ topic: String, json: JSONValue, retain: Bool = false) {
        enqueue(topic, Array(json.encoded().utf8), retain: retain)
    }

    /// Publishes a retained topic if its payload changed; an empty payload clears it.
    func setRetained(_ topic: String, _ payload: [UInt8]) {
        if payload.isEmpty {
            guard retained.removeValue(forKey: topic) != nil else { return }
        } else {
            guard retained[topic] != payload else { return }
            retained[topic] = payload
        }
        enqueue(topic, payload, retain: true)
    }

    // MARK: - The tree and its retained topics

    /// The retained topics the current tree and values call for.
    private func desiredRetained() -> [String: [UInt8]] {
        var out: [String: [UInt8]] = [:]
        out.reserveCapacity(tree.characteristicCount * 2 + tree.accessories.count * 2 + 1)
        // Most characteristics share their `meta` document with many others (every brightness
        // of one kind of lamp), and most states are a few short texts: one buffer each, shared,
        // instead of one per topic. It also spares encoding the same document again.
        var metaPayloads: [MetaKey: [UInt8]] = [:]
        var texts: [String: [UInt8]] = [:]
        for node in tree.accessories {
            out[node.topic + "/$info"] = Array(Payloads.info(node).encoded().utf8)
            out[node.topic + "/$availability"] = Array((node.accessory.isReachable ? "online" : "offline").utf8)
            for service in node.services {
                for c in service.characteristics {
                    let key = MetaKey(type: c.characteristic.type, metadata: c.characteristic.metadata,
                                      description: c.characteristic.name, readOnlyScope: c.isReadOnlyScope)
                    if let shared = metaPayloads[key] {
                        out[c.topic + "/meta"] = shared
                    } else {
                        let payload = Array(Payloads.meta(c).encoded().utf8)
                        metaPayloads[key] = payload
                        out[c.topic + "/meta"] = payload
                    }
                    if let value = values[c.address] {
                        let text = ValueCodec.text(value, format: c.characteristic.metadata.format)
                        if let shared = texts[text] {
                            out[c.topic + "/state"] = shared
                        } else {
                            let payload = Array(text.utf8)
                            if text.utf8.count <= 16 { texts[text] = payload }
                            out[c.topic + "/state"] = payload
                        }
                    }
                }
            }
        }
        out["\(base)/$gateway/tree"] = Array(treeText().utf8)
        if config.homeAssistant.enabled {
            let configs = HomeAssistantDiscovery.configs(
                tree: tree, prefix: config.homeAssistant.prefix, gatewayStatusTopic: statusTopic,
                options: .init(defaultRoomID: currentHome?.roomForEntireHome.id))
            for (topic, document) in configs {
                // Home Assistant drops one entity of a device that stays only when told its platform.
                let previous = retained[topic].flatMap { try? JSONValue(parsing: $0) }
                out[topic] = Array(HomeAssistantDiscovery.withRemovedComponents(previous: previous, next: document).encoded().utf8)
            }
        }
        return out
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
        notificationTargets.yield(Set(tree.addresses.filter {
            tree.characteristic($0)?.characteristic.metadata.permissions.contains(.notify) == true
        }))
    }

    private func applyRetained() {
        let desired = desiredRetained()
        for topic in retained.keys where desired[topic] == nil {
            setRetained(topic, [])
        }
        // Order does not matter between topics (each is one retained value); sorting half a
        // million at 10,000 accessories would.
        for (topic, payload) in desired {
            setRetained(topic, payload)
        }
    }

    /// First publication after connecting.
    private func publishAll() {
        applyRetained()
        // `online` last: a client that sees it knows the whole tree is there.
        enqueue(statusTopic, Array("online".utf8), retain: true)
        notificationTargets.yield(Set(tree.addresses.filter {
            tree.characteristic($0)?.characteristic.metadata.permissions.contains(.notify) == true
        }))
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
        values[address] = value
        guard isStarted, let node = tree.characteristic(address) else { return }
        setRetained(node.topic + "/state", Array(ValueCodec.text(value, format: node.characteristic.metadata.format).utf8))
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
            for address in pollTargets() {
                if let value = try? await source.read(address) {
                    update(address, value)
                }
            }
        }
    }

    // MARK: - MQTT connection

    var wasConnected = true

    func handle(connection state: MQTTConnectionState) {
        switch state {
        case .connected:
            if !wasConnected {
                logger.info("reconnected to the broker; republishing")
                outbox.yield(.republishAll)
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
                "retained-topics": .int(Int64(retained.count)),
                "sets": .int(Int64(counters.sets)),
                "gets": .int(Int64(counters.gets)),
                "errors": .int(Int64(counters.errors)),
            ]),
        ])
    }

    public var retainedTopicList: [String] { retained.keys.sorted() }

}

/// What a `meta` document is made of.
struct MetaKey: Hashable {
    var type: String
    var metadata: CharacteristicMetadata
    var description: String?
    var readOnlyScope: Bool
}
