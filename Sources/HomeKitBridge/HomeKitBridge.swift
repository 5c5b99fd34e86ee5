import Foundation
public import Gateway
public import HAPServer
public import HomeModel
import Logging

// One home as the accessory server's database: the tree from the gateway's view
// (`Gateway.observe()`), reads, writes and identify through the gateway's typed core
// (`Gateway.perform`), and every change the gateway observes sent to the subscribed
// controllers, the writer's session named as its cause when the change came from its write.

/// A home's HAP bridge: what the accessory server serves (`HAPAccessoryDatabase`).
public actor HomeKitBridge: HAPAccessoryDatabase {
    let gateway: Gateway
    let files: BridgeFiles
    let filter: ScopeFilter
    let identity: BridgeTree.Identity
    let stateDirectory: String
    let logger: Logger
    /// The accessory served alone, at aid 1; nil for the home's bridge.
    let standalone: String?
    /// This gateway's id, added to the route of every accessory served (`GatewayRoute`).
    let gatewayID: String?
    /// The accessories in scope that are served alone (the bridge's view): each gets a server.
    var standalones: [BridgeFiles.Standalone] = []
    /// What its log lines call it.
    nonisolated var label: String { standalone.map { "HomeKit accessory \($0)" } ?? "HomeKit bridge" }

    /// The server that hears of changes; it changes when a reset starts a new one.
    var server: (any BridgeServing)?
    var ids: BridgeIDs
    var tree = BridgeTree()
    var values: [CharacteristicAddress: CharacteristicValue] = [:]
    /// The characteristics whose values the gateway keeps current, and the reads answered from
    /// them at once (`BridgeReadCache`).
    var current: Set<CharacteristicAddress> = []
    nonisolated let cache = BridgeReadCache()
    /// Whether the gateway's view has given its first snapshot.
    var hasSnapshot = false
    /// Who waits for the first snapshot (the server starts after it, so that its first `c#`
    /// digest is the home's, not an empty bridge's).
    var snapshotWaiters: [CheckedContinuation<Bool, Never>] = []
    /// The accessories left out beyond HAP's limit, last logged.
    var loggedLeftOut: [String] = []
    /// Writes under way or just answered, by address: the change they cause is not sent back
    /// to the session that wrote.
    var writers: [CharacteristicAddress: Expected] = [:]

    /// A write's value and session; once answered, the change it causes is expected until
    /// `until` (a change may reach the view before or after the write's answer).
    struct Expected {
        var value: CharacteristicValue
        var session: HAPSessionID
        var until: ContinuousClock.Instant?
    }

    /// How long after its answer a write's change is still taken as its own.
    static let echoWindow: Duration = .seconds(2)

    init(
        gateway: Gateway, files: BridgeFiles, filter: ScopeFilter, identity: BridgeTree.Identity,
        stateDirectory: String, logger: Logger, standalone: String? = nil, gatewayID: String? = nil
    ) throws(ModelError) {
        self.gatewayID = gatewayID
        self.gateway = gateway
        self.files = files
        self.filter = filter
        self.identity = identity
        self.stateDirectory = stateDirectory
        self.logger = logger
        self.standalone = standalone
        ids = try files.loadIDs(firstAID: standalone == nil ? 2 : 1)
    }

    func attach(_ server: (any BridgeServing)?) { self.server = server }

    /// How many accessories the bridge serves now (itself included), and those left out.
    var counts: (served: Int, leftOut: [String]) { (tree.accessories.count, tree.leftOut) }

    // MARK: The gateway's view

    func apply(_ change: GatewayChange) async {
        switch change {
        case .snapshot(let snapshot):
            values = snapshot.values
            rebuild(snapshot.tree)
            hasSnapshot = true
            for waiter in snapshotWaiters { waiter.resume(returning: true) }
            snapshotWaiters = []
            await shapeChanged()
        case .value(let node, let value):
            if !node.isEvent { values[node.address] = value }
            guard let id = tree.addresses[node.address] else { return }
            let json = BridgeTree.json(value, node.characteristic.metadata.format)
            if current.contains(node.address) { cache.set(id, json) }
            guard let server else { return }
            let changes = [HAPValueChange(id: id, value: json)], cause = takeWriter(of: node.address, value)
            // Over IP the events are queued to each session at once, with no suspension here: the
            // view keeps up with the gateway (a read after an accessory became unreachable is
            // answered -70402, not from a view one hop behind). Over CoAP they are PUTs answered
            // one by one: the view waits for them (`eventDeadline` at most), in the gateway's order.
            if let server = server as? HAPAccessoryServer {
                server.notify(changes, cause: cause)
            } else {
                await server.sendEvents(changes, cause: cause)
            }
        case .event, .connection:
            break
        }
    }

    /// Whether the gateway's first snapshot came; false when the view ended first.
    func firstSnapshot() async -> Bool {
        if hasSnapshot { return true }
        return await withCheckedContinuation { snapshotWaiters.append($0) }
    }

    /// The view ended (the gateway stops, or the bridge does): nobody waits for it any more.
    func viewEnded() {
        for waiter in snapshotWaiters { waiter.resume(returning: hasSnapshot) }
        snapshotWaiters = []
    }

    /// The tree again from the gateway's; the ids it handed out are saved before it is served.
    func rebuild(_ published: TopicTree) {
        let own = BridgeFiles.ownPairingIDs(stateDirectory: stateDirectory).map { "hap:\($0):" }
        let before = ids
        tree = BridgeTree(
            tree: published, filter: filter, ownPrefixes: own, identity: identity, ids: &ids, standalone: standalone,
            gatewayID: gatewayID)
        current = BridgeReadCache.current(in: published)
        cache.replace(BridgeReadCache.table(tree, current: current, values: values))
        if standalone == nil {
            standalones = published.accessories.filter { node in
                node.accessory.isHomeKitStandalone
                    && filter.admits(accessory: node.accessory, displayName: node.displayName, room: node.room)
            }.map {
                .init(
                    accessoryID: $0.id, name: $0.displayName, category: $0.accessory.category,
                    thread: $0.accessory.isHomeKitThread)
            }
        }
        if ids != before {
            do throws(ModelError) {
                try files.save(ids)
            } catch {
                // Served all the same; the ids are saved with the next change that can be.
                logger.error("\(label): cannot save its ids", metadata: ["error": "\(error.message)"])
            }
        }
        if tree.leftOut != loggedLeftOut {
            loggedLeftOut = tree.leftOut
            if !tree.leftOut.isEmpty {
                logger.error(
                    "\(label): more accessories in scope than a bridge may serve; narrow homekit.scope",
                    metadata: [
                        "limit": "\(HomeKitConfig.maxAccessories) (the bridge included)",
                        "left-out": "\(tree.leftOut.joined(separator: ", "))",
                    ])
            }
        }
    }

    /// Tells the server that the tree may have a new shape (`c#` rises when it has).
    func shapeChanged() async {
        guard let server else { return }
        do {
            try await server.databaseChanged()
        } catch {
            logger.error("\(label): cannot save its configuration number", metadata: ["error": "\(error)"])
        }
    }

    /// The session whose write this change is, if any: taken once.
    private func takeWriter(of address: CharacteristicAddress, _ value: CharacteristicValue) -> HAPSessionID? {
        guard let expected = writers.removeValue(forKey: address) else { return nil }
        if let until = expected.until, ContinuousClock.now > until { return nil }
        return expected.value == value ? expected.session : nil
    }

    // MARK: HAPAccessoryDatabase

    public func accessories() async -> [HAPAccessory] {
        var served = tree.accessories
        for a in served.indices {
            for s in served[a].services.indices {
                for c in served[a].services[s].characteristics.indices {
                    let id = HAPCharacteristicID(aid: served[a].aid, iid: served[a].services[s].characteristics[c].iid)
                    if case .characteristic(let address, let format)? = tree.targets[id] {
                        served[a].services[s].characteristics[c].value = BridgeTree.json(values[address], format)
                    }
                }
            }
        }
        return served
    }

    public func read(_ ids: [HAPCharacteristicID], context: HAPRequestContext) async
        -> [HAPCharacteristicID: Result<JSONValue, HAPStatus>]
    {
        var answers: [HAPCharacteristicID: Result<JSONValue, HAPStatus>] = [:]
        var reads: [(HAPCharacteristicID, CharacteristicAddress, CharacteristicFormat)] = []
        for id in ids {
            switch tree.targets[id] {
            case .fixed(let value)?: answers[id] = .success(value)
            case .characteristic(let address, let format)?: reads.append((id, address, format))
            case .identify?, .identifyBridge?: answers[id] = .failure(.writeOnly)
            case nil: answers[id] = .failure(.doesNotExist)
            }
        }
        let gateway = gateway
        // One read (what a controller mostly asks) needs no child task: awaited here, it waits the same.
        if reads.count == 1, let only = reads.first {
            let (id, address, format) = only
            let outcome = await gateway.perform(.read(address))
            answers[id] = outcome.map { BridgeTree.json($0.value, format) }.mapError(Self.status)
            return answers
        }
        // Each from its accessory, side by side: one slow accessory holds up no other's answer.
        await withTaskGroup(of: (HAPCharacteristicID, Result<JSONValue, HAPStatus>).self) { group in
            for (id, address, format) in reads {
                group.addTask {
                    let outcome = await gateway.perform(.read(address))
                    return (id, outcome.map { BridgeTree.json($0.value, format) }.mapError(Self.status))
                }
            }
            for await (id, answer) in group { answers[id] = answer }
        }
        return answers
    }

    public func write(_ writes: [HAPWrite], context: HAPRequestContext) async
        -> [HAPCharacteristicID: Result<JSONValue?, HAPStatus>]
    {
        var answers: [HAPCharacteristicID: Result<JSONValue?, HAPStatus>] = [:]
        var commands: [(HAPWrite, GatewayCommand, CharacteristicAddress?, CharacteristicFormat?)] = []
        for write in writes {
            switch tree.targets[write.id] {
            case .characteristic(let address, let format)?:
                guard let value = try? HAPAccessoryJSON.convert(write.value, format: format) else {
                    answers[write.id] = .failure(.invalidValue)
                    continue
                }
                // Before it is performed: its change may reach the view before its answer.
                writers[address] = Expected(value: value, session: context.session, until: nil)
                commands.append((write, .write(address, value), address, format))
            case .identify(let accessoryID)?:
                commands.append((write, .identify(accessoryID: accessoryID), nil, nil))
            case .identifyBridge?:
                logger.notice("\(label): identify", metadata: ["controller": "\(context.controller)"])
                answers[write.id] = .success(nil)
            case .fixed?: answers[write.id] = .failure(.readOnly)
            case nil: answers[write.id] = .failure(.doesNotExist)
            }
        }
        let gateway = gateway
        var outcomes: [HAPCharacteristicID: GatewayOutcome] = [:]
        if commands.count == 1, let only = commands.first {
            // As with one read: no child task for the one write a controller mostly sends.
            outcomes[only.0.id] = await gateway.perform(only.1)
        } else {
            outcomes = await Self.performAll(commands.map { ($0.0, $0.1) }, on: gateway)
        }
        let answered = ContinuousClock.now.advanced(by: Self.echoWindow)
        for (write, _, address, format) in commands {
            let outcome = outcomes[write.id] ?? .failure(GatewayFailure(code: .internal, message: "no outcome"))
            if let address, writers[address]?.session == context.session {
                if outcome.failure == nil { writers[address]?.until = answered } else { writers[address] = nil }
            }
            // Accepted: the accessory's value now, whichever comes first, its change or a read.
            if let address, let format, case .success(.value(let value?)) = outcome, current.contains(address) {
                values[address] = value
                cache.set(write.id, BridgeTree.json(value, format))
            }
            answers[write.id] = outcome.map { answer in
                guard write.wantsResponse, let format else { return nil }
                return BridgeTree.json(answer.value, format)
            }.mapError(Self.status)
        }
        return answers
    }

    /// Several writes side by side, each from its accessory.
    private static func performAll(_ commands: [(HAPWrite, GatewayCommand)], on gateway: Gateway) async
        -> [HAPCharacteristicID: GatewayOutcome]
    {
        await withTaskGroup(of: (HAPWrite, GatewayOutcome).self) { group in
            for (write, command) in commands {
                group.addTask { (write, await gateway.perform(command)) }
            }
            var outcomes: [HAPCharacteristicID: GatewayOutcome] = [:]
            for await (write, outcome) in group { outcomes[write.id] = outcome }
            return outcomes
        }
    }

    public nonisolated func valuesAtHand(_ ids: [HAPCharacteristicID]) -> [HAPCharacteristicID: JSONValue] {
        cache.values(ids)
    }

    /// `/identify` of the unpaired bridge.
    public func identify() async {
        logger.notice("\(label): identify (unpaired)")
    }

    /// A failure as HAP's status: the accessory's own when it gave one, else by its code.
    static func status(_ failure: GatewayFailure) -> HAPStatus {
        if let status = failure.hapStatus { return HAPStatus(status) }
        switch failure.code {
        case .unreachable, .unavailable, .closed: return .communicationFailure
        case .readOnly, .readOnlyScope: return .readOnly
        case .writeOnly: return .writeOnly
        case .timeout: return .timedOut
        case .busy: return .busy
        case .unknownTopic, .doesNotExist: return .doesNotExist
        case .insufficientPrivileges: return .insufficientPrivileges
        case .invalidValue, .invalidType, .outOfRange, .notAStep, .notAValidValue, .tooLong, .invalidPayload:
            return .invalidValue
        default: return .communicationFailure
        }
    }
}

/// What the bridge tells the server serving it: changed values (sent to subscribed controllers
/// as events) and a possibly new shape. Over IP a `HAPAccessoryServer`; for a Thread accessory
/// (`homekit: thread`) the `HAPCoAPAccessory` that `HAPThreadAccessory` serves over UDP.
protocol BridgeServing: Sendable {
    func sendEvents(_ changes: [HAPValueChange], cause: HAPSessionID?) async
    func databaseChanged() async throws(HAPServerError)
}

extension HAPAccessoryServer: BridgeServing {
    func sendEvents(_ changes: [HAPValueChange], cause: HAPSessionID?) async {
        _ = notify(changes, cause: cause)
    }
}

extension HAPCoAPAccessory: BridgeServing {
    func sendEvents(_ changes: [HAPValueChange], cause: HAPSessionID?) async {
        _ = await notify(changes, cause: cause)
    }
}
