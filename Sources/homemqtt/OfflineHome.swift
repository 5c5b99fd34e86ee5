import Foundation
import Gateway
import HomeModel
import Logging

// The home commands without a gateway: the home database opened with its lock held, the
// sources loaded as `run` loads them, and the operations that change only the database or the
// stored scope, answered as the gateway answers them.

/// The home database and the sources, without a gateway: what `run` would load, with the
/// database's lock held for as long as this lives.
struct OfflineHome {
    let config: GatewayConfig
    let database: HomeDatabase
    let home: Home
    let tree: TopicTree
    let scopeStore: ScopeStore
    let scope: ScopeConfig

    static func open(_ config: GatewayConfig, logger: Logger) async throws(GatewayFailure) -> OfflineHome {
        let directory = URL(fileURLWithPath: config.stateDirectory)
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
            scopeStore: scopeStore, scope: scope)
    }

    /// Another command may hold the lock for a moment (commands run in parallel by a script);
    /// a gateway holds it for good.
    private static func openExclusive(_ directory: URL) async throws(ModelError) -> HomeDatabase {
        let deadline = ContinuousClock.now + .seconds(2)
        while true {
            do throws(ModelError) {
                return try HomeDatabase(directory: directory, exclusive: true)
            } catch {
                guard error.code == .locked, ContinuousClock.now < deadline else { throw error }
            }
            try? await Task.sleep(for: .milliseconds(100))
        }
    }

    /// The same data the gateway answers with, for the operations that only change the home
    /// database or the stored scope.
    func perform(_ operation: HomeOperation) async throws(GatewayFailure) -> JSONValue {
        let fields = try RequestReader.request(operation.fields)
        switch operation.op {
        case "room/add":
            let name = try fields.text("name")
            let room = try await change { db throws(ModelError) in try await db.addRoom(named: name) }
            return .object(["id": .string(room.id), "name": .string(room.name)])
        case "room/rename":
            let room = try resolveRoom(try fields.text("room"))
            let name = try fields.text("name")
            try await change { db throws(ModelError) in try await db.renameRoom(id: room.id, to: name) }
            return .object(["id": .string(room.id), "name": .string(name), "old-name": .string(room.name)])
        case "room/remove":
            let room = try resolveRoom(try fields.text("room"))
            try await change { db throws(ModelError) in try await db.removeRoom(id: room.id) }
            return .object(["id": .string(room.id), "name": .string(room.name)])
        case "accessory/rename":
            let (id, node) = try resolveAccessory(try fields.text("accessory"))
            let name = try fields.optionalText("name")
            try await change { db throws(ModelError) in try await db.renameAccessory(id: id, to: name) }
            return .object([
                "id": .string(id),
                "name": name.map(JSONValue.string) ?? node.map { .string($0.accessory.name) } ?? .null,
            ])
        case "accessory/move":
            let (id, _) = try resolveAccessory(try fields.text("accessory"))
            let room = try resolveRoom(try fields.text("room"))
            try await change { db throws(ModelError) in try await db.assign(accessoryID: id, toRoom: room.id) }
            return .object(["id": .string(id), "room": .string(room.name)])
        case "accessory/remove":
            let (id, node) = try resolveAccessory(try fields.text("accessory"))
            guard let node else {
                // Not loaded without the gateway: a paired accessory, whose pairing goes too.
                throw GatewayFailure(
                    code: .needsGateway,
                    message:
                        "'\(id)' is only known to the running gateway's sources (a paired accessory: removing it also removes its pairing); start the gateway and try again"
                )
            }
            try await change { db throws(ModelError) in try await db.removeAccessory(id: id) }
            return .object(["id": .string(id), "name": .string(node.displayName)])
        case "service/rename":
            let key = try fields.text("accessory")
            let (id, found) = try resolveAccessory(key)
            guard let node = found else {
                throw GatewayFailure(
                    code: .needsGateway,
                    message: "the services of '\(key)' are only known to the running gateway; start it and try again")
            }
            let service = try resolveService(try fields.text("service"), in: node)
            let name = try fields.optionalText("name")
            try await change { db throws(ModelError) in
                try await db.renameService(accessoryID: id, iid: service.iid, to: name)
            }
            return .object([
                "accessory": .string(id), "iid": .uint(service.iid), "name": name.map(JSONValue.string) ?? .null,
            ])
        case "scope/get":
            return try Gateway.scopeJSON(scope)
        case "scope/set":
            let newScope = try Gateway.decodeScope(fields.node("scope") ?? .null)
            do throws(ConfigError) {
                _ = try ScopeFilter(newScope, file: "scope/set")
            } catch {
                throw GatewayFailure(code: .invalidScope, message: error.description)
            }
            do {
                try scopeStore.save(newScope)
            } catch {
                throw GatewayFailure(code: .io, message: "cannot save the scope in \(scopeStore.file.path): \(error)")
            }
            return try Gateway.scopeJSON(newScope)
        default:
            throw GatewayFailure(code: .needsGateway, message: "\(operation.op) needs the running gateway")
        }
    }

    @discardableResult
    private func change<T: Sendable>(_ body: (HomeDatabase) async throws(ModelError) -> T) async throws(GatewayFailure)
        -> T
    {
        do throws(ModelError) {
            return try await body(database)
        } catch {
            throw GatewayFailure(code: error.code, message: error.message)
        }
    }

    // Resolution as the gateway does it (TopicTree+Lookup.swift): by id, name or topic.

    func resolveRoom(_ key: String) throws(GatewayFailure) -> Room {
        try tree.room(named: key, among: home.allRooms)
    }

    /// The accessory's id, and its node when a source loaded it without the gateway.
    func resolveAccessory(_ key: String) throws(GatewayFailure) -> (String, TopicTree.AccessoryNode?) {
        if let accessory = try tree.accessory(named: key) { return (accessory.id, accessory) }
        if home.isKnown(accessoryID: key) { return (key, nil) }
        throw .unknownAccessory(key)
    }

    func resolveService(_ key: String, in accessory: TopicTree.AccessoryNode) throws(GatewayFailure)
        -> TopicTree.ServiceNode
    {
        try accessory.service(named: key)
    }
}
