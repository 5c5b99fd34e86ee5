// The running gateway as the management operations see it (`RunningGateway`): a value that
// forwards each capability to the actor (`Gateway+Editing`), so an operation never holds the
// actor itself. Each change of the home database or the scope is followed by the topics and
// announced before the operation answers.
public import HomeModel
import Logging

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
            let rooms = await gateway.database.home.allRooms
            return try await gateway.tree.room(named: key, among: rooms)
        }

        func accessory(named key: String) async throws(GatewayFailure) -> NamedAccessory {
            guard let accessory = try await gateway.tree.accessory(named: key) else { throw .unknownAccessory(key) }
            return NamedAccessory(id: accessory.id, node: accessory)
        }

        func sourceAccessories() async -> [Accessory] {
            await gateway.source.accessories()
        }

        func homeChanged() async {
            await gateway.homeChanged()
        }

        func changeRefused(_ error: ModelError) async {
            Self.logStorageFailure(error, saving: "the home database", logger: gateway.logger)
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

        /// The request's answer tells its client; the log tells whoever runs the gateway, whose
        /// state directory it is. Only a failure of the storage itself (the message names the
        /// file and the OS's reason; it holds no keys) is logged, not a refused request.
        static func logStorageFailure(_ error: ModelError, saving what: String, logger: Logger) {
            guard [.io, .locked, .corruptDatabase, .unsupportedVersion].contains(error.code) else { return }
            logger.error("cannot save \(what)", metadata: ["code": "\(error.code)", "error": "\(error.message)"])
        }
    }
}
