import Foundation
import Gateway
import HomeModel
import HomeMQTTApp
import Logging

// The home commands without a gateway: the home database opened with its lock held, the
// sources loaded as `run` loads them, and the management operations performed on them, the
// same operations the gateway performs.

/// The home database and the sources, without a gateway: what `run` would load, with the
/// database's lock held for as long as this lives.
struct OfflineHome: HomeEditor {
    let config: GatewayConfig
    let database: HomeDatabase
    let home: Home
    let tree: TopicTree
    let scopeStore: ScopeStore
    let scope: ScopeConfig
    /// What the sources loaded, every home's.
    var accessories: [Accessory] = []
    /// Each kind of source's pairing over the state directory (`HomeMQTTApp.offlinePairings`).
    var pairings: [any PairingManager] = []

    static func open(_ config: GatewayConfig, logger: Logger) async throws(GatewayFailure) -> OfflineHome {
        let directory = URL(fileURLWithPath: config.stateDirectory)
        do throws(ModelError) {
            try Setup.prepareState(config)
        } catch {
            throw GatewayFailure(code: error.code, message: error.message)
        }
        let database: HomeDatabase
        do throws(ModelError) {
            database = try await openExclusive(directory)
        } catch {
            if error.code == .locked {
                throw GatewayFailure(
                    code: .locked,
                    message:
                        "the home database in \(config.stateDirectory) is held by another homemqtt process (a gateway that has not reached the broker, or another command); nothing was changed — try again when it has connected or stopped"
                )
            }
            throw GatewayFailure(code: error.code, message: "\(config.stateDirectory): \(error.message)")
        }
        let accessories: [Accessory]
        do {
            accessories = await (try Setup.source(config, logger: logger)).accessories()
        } catch {
            throw GatewayFailure(code: .invalidConfig, message: "\(error)")
        }
        // As the gateway does at start: a known accessory is left where it is, a new one is
        // placed in its suggested room. Needed here too, because only known accessories can be
        // renamed or moved.
        do throws(ModelError) {
            try await database.adopt(accessories)
        } catch {
            throw GatewayFailure(code: error.code, message: error.message)
        }
        let scopeStore = ScopeStore(directory: directory)
        let scope: ScopeConfig
        let filter: ScopeFilter
        do throws(ConfigError) {
            scope = try scopeStore.load() ?? config.scope
            filter = try ScopeFilter(scope, file: config.file)
        } catch {
            throw GatewayFailure(code: .invalidScope, message: error.description)
        }
        let home = await database.home
        return OfflineHome(
            config: config, database: database, home: home,
            tree: TopicTree(base: config.baseTopic, accessories: accessories, home: home, scope: filter),
            scopeStore: scopeStore, scope: scope, accessories: accessories,
            pairings: HomeMQTTApp.offlinePairings(config, logger: logger))
    }

    /// Another command may hold the lock for a moment (commands run in parallel by a script);
    /// a gateway holds it for good.
    private static func openExclusive(_ directory: URL) async throws(ModelError) -> HomeDatabase {
        let deadline = ContinuousClock.now + .seconds(2)
        while true {
            do throws(ModelError) {
                // The home on the gateway's base topic, as the running gateway's requests edit.
                let database = try HomeDatabase(directory: directory, exclusive: true)
                return database.view(homeID: database.baseHomeID)
            } catch {
                guard error.code == .locked, ContinuousClock.now < deadline else { throw error }
            }
            try? await Task.sleep(for: .milliseconds(100))
        }
    }

    /// Performs `name` as the gateway would, through the same list of operations: those that
    /// need the running gateway answer `needs-gateway`.
    func perform(_ name: String, fields: [String: JSONValue]) async throws(GatewayFailure) -> JSONValue {
        try await ManagementOperations.perform(name, fields: fields, among: Self.operations, on: self)
    }

    /// The gateway's list: the core operations, then those its sources add.
    static let operations = ManagementOperations.all(adding: Setup.sourceOperations)

    // Resolution as the gateway does it (TopicTree+Lookup.swift): by id, name or topic.

    func room(named key: String) throws(GatewayFailure) -> Room {
        try tree.room(named: key, among: home.allRooms)
    }

    /// An accessory a source loaded without the gateway has its node; one only the home
    /// database knows (a paired accessory) has none.
    func accessory(named key: String) throws(GatewayFailure) -> NamedAccessory {
        if let accessory = try tree.accessory(named: key) { return NamedAccessory(id: accessory.id, node: accessory) }
        if home.isKnown(accessoryID: key) { return NamedAccessory(id: key, node: nil) }
        throw .unknownAccessory(key)
    }

    /// What the sources loaded: the tree's accessories before the scope.
    func sourceAccessories() -> [Accessory] { accessories }

    func remove(_ accessory: TopicTree.AccessoryNode) async throws(GatewayFailure) {
        try await change { db throws(ModelError) in try await db.removeAccessory(id: accessory.id) }
    }

    func replaceScope(_ scope: ScopeConfig, filter: ScopeFilter) throws(GatewayFailure) {
        do {
            try scopeStore.save(scope)
        } catch {
            throw GatewayFailure(code: .io, message: "cannot save the scope in \(scopeStore.file.path): \(error)")
        }
    }

    var gatewayBase: String { config.baseTopic }
    var reservedTopics: [String] { config.reservedTopicPrefixes }
    var managesHomes: Bool { true }

    // The state directory is all there is: no topics to follow a change, no log to tell.
    var running: (any RunningGateway)? { nil }
    func homeChanged() {}
    func changeRefused(_ error: ModelError) {}
}

/// Beside a running gateway that has no source of a kind: that kind's pairing over the state
/// directory, for its own operations only (`homemqtt hap pair` while the gateway serves only
/// simulated accessories). The home database is the gateway's: read, never changed here.
struct PairingsOnly: HomeEditor {
    let config: GatewayConfig
    let database: HomeDatabase
    let pairings: [any PairingManager]

    static func open(_ config: GatewayConfig, logger: Logger) throws(GatewayFailure) -> PairingsOnly {
        do throws(ModelError) {
            let database = try HomeDatabase(directory: URL(fileURLWithPath: config.stateDirectory), exclusive: false)
            return PairingsOnly(
                config: config, database: database.view(homeID: database.baseHomeID),
                pairings: HomeMQTTApp.offlinePairings(config, logger: logger))
        } catch {
            throw GatewayFailure(code: error.code, message: "\(config.stateDirectory): \(error.message)")
        }
    }

    /// Only the sources' own operations: the home's are the running gateway's.
    func perform(_ name: String, fields: [String: JSONValue]) async throws(GatewayFailure) -> JSONValue {
        try await ManagementOperations.perform(name, fields: fields, among: Setup.sourceOperations, on: self)
    }

    var gatewayBase: String { config.baseTopic }
    var reservedTopics: [String] { config.reservedTopicPrefixes }
    var managesHomes: Bool { false }
    var running: (any RunningGateway)? { nil }
    var scope: ScopeConfig { config.scope }

    func room(named key: String) throws(GatewayFailure) -> Room { throw Self.theGateways }
    func accessory(named key: String) throws(GatewayFailure) -> NamedAccessory { throw Self.theGateways }
    func sourceAccessories() -> [Accessory] { [] }
    func homeChanged() {}
    func changeRefused(_ error: ModelError) {}
    func remove(_ accessory: TopicTree.AccessoryNode) throws(GatewayFailure) { throw Self.theGateways }
    func replaceScope(_ scope: ScopeConfig, filter: ScopeFilter) throws(GatewayFailure) { throw Self.theGateways }

    static let theGateways = GatewayFailure(code: .needsGateway, message: "the running gateway edits the home")
}
