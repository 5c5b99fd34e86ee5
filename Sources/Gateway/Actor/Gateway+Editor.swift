// The running gateway as the management operations see it: each change of the home database
// or the scope is followed by the topics and announced before the operation answers.
public import HomeModel

extension Gateway {
    /// The gateway's editor, handed to the operations it performs.
    struct Editor: RunningGateway {
        let gateway: Gateway

        var database: HomeDatabase { gateway.database }
        var gatewayBase: String { gateway.config.gatewayBase }
        var reservedTopics: [String] { gateway.config.reservedTopicPrefixes }
        var managesHomes: Bool { gateway.config.gatewayBaseTopic == nil }
        var running: (any RunningGateway)? { self }
        var pairings: [any PairingManager] { gateway.pairings }

        func room(named key: String) async throws(GatewayFailure) -> Room {
            try await gateway.room(named: key)
        }

        func accessory(named key: String) async throws(GatewayFailure) -> NamedAccessory {
            try await gateway.accessory(named: key)
        }

        func homeChanged() async {
            await gateway.homeChanged()
        }

        func changeRefused(_ error: ModelError) async {
            await gateway.logStorageFailure(error, saving: "the home database")
        }

        func remove(_ accessory: TopicTree.AccessoryNode) async throws(GatewayFailure) {
            // A paired accessory leaves the home by losing its pairing; its source then
            // reports it removed.
            // A bridged accessory cannot be unpaired alone: it only leaves the home, and
            // removing its bridge removes them all.
            if accessory.accessory.bridgeID == nil, let paired = pairing(forAccessory: accessory.id) {
                try await paired.0.unpair(id: paired.1)
            }
            // Out of the tree before the database forgets its room, so that it is never
            // published in the default room on its way out.
            await gateway.leaving(accessory.id)
            do throws(GatewayFailure) {
                try await change { db throws(ModelError) in try await db.removeAccessory(id: accessory.id) }
            } catch {
                await gateway.stayed(accessory.id)
                throw error
            }
        }

        var scope: ScopeConfig {
            get async { await gateway.scope.config }
        }

        func replaceScope(_ scope: ScopeConfig, filter: ScopeFilter) async throws(GatewayFailure) {
            try await gateway.replaceScope(scope, filter: filter)
        }

        func tree() async throws(GatewayFailure) -> JSONValue {
            try await gateway.treeAnswer()
        }

        func republish() async -> Int {
            await gateway.republish()
        }

        func health() async -> JSONValue {
            await gateway.health()
        }

        func identify(accessoryID: String) async throws(GatewayFailure) {
            do throws(AccessoryError) {
                try await gateway.source.identify(accessoryID: accessoryID)
            } catch {
                throw GatewayFailure(error)
            }
        }

        func paired(accessoryIDs: [String]) async {
            await gateway.paired(accessoryIDs: accessoryIDs)
        }
    }

    /// The home this gateway serves, as the database has it now.
    public func servedHome() async -> Home {
        await database.home
    }

    /// Every home of the database.
    public func allHomes() async -> [Home] {
        await database.homes
    }

    func room(named key: String) async throws(GatewayFailure) -> Room {
        let home = await database.home
        return try tree.room(named: key, among: home.allRooms)
    }

    func accessory(named key: String) throws(GatewayFailure) -> NamedAccessory {
        guard let accessory = try tree.accessory(named: key) else { throw .unknownAccessory(key) }
        return NamedAccessory(id: accessory.id, node: accessory)
    }

    /// The database's event reaches `handle(homeEvent:)` too; refreshing here makes the topics
    /// current before the response is sent. Whichever rebuild sees the change first announces
    /// it (the tree diff), the other finds nothing left to announce.
    func homeChanged() async {
        await refreshHome()
        rebuild(announce: true)
    }

    func leaving(_ accessoryID: String) {
        served.markRemoved(accessoryID)
    }

    /// The database kept an accessory it was asked to remove: back into the tree.
    func stayed(_ accessoryID: String) {
        served.unmarkRemoved(accessoryID)
        rebuild(announce: true)
    }

    func paired(accessoryIDs: [String]) async {
        for id in accessoryIDs where served.unmarkRemoved(id) {
            do {
                try await database.restoreAccessory(id: id)
            } catch {
                // Shown now; the home database lists it as removed again at the next start.
                logger.warning(
                    "could not save that a paired accessory is back",
                    metadata: ["accessory": "\(id)", "error": "\(error.message)"])
            }
        }
        rebuild(announce: true)
    }

    func republish() -> Int {
        enqueue(.all)
        return retainedCount
    }

    func replaceScope(_ newScope: ScopeConfig, filter: ScopeFilter) throws(GatewayFailure) {
        if let scopeStore {
            do throws(ModelError) {
                try scopeStore.save(newScope)
            } catch {
                logStorageFailure(error, saving: "the scope")
                throw GatewayFailure(code: .io, message: "cannot save the scope: \(error.message)")
            }
        }
        served.setScope(filter)
        rebuild(announce: true)
        event(.scopeChanged, fields: [:])
    }

    /// The request's answer tells its client; the log tells whoever runs the gateway, whose
    /// state directory it is. Only a failure of the storage itself (the message names the file
    /// and the OS's reason; it holds no keys) is logged, not a refused request.
    func logStorageFailure(_ error: ModelError, saving what: String) {
        guard [.io, .locked, .corruptDatabase, .unsupportedVersion].contains(error.code) else { return }
        logger.error("cannot save \(what)", metadata: ["code": "\(error.code)", "error": "\(error.message)"])
    }
}
