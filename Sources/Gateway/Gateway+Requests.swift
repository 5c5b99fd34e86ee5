import Foundation
public import HomeModel
import MQTT

/// `<base>/$gateway/request/<op>` → `<base>/$gateway/response/<op>`: managing the home over MQTT.
extension Gateway {
    static let gatewayOutputs: Set<String> = ["status", "tree", "event", "error"]

    func handleGatewayTopic(_ rest: String, _ message: IncomingMessage) async {
        if Self.gatewayOutputs.contains(rest) || rest.hasPrefix("response/") || rest.hasPrefix("homeassistant") {
            refuseLocal(message, code: .unknownTopic, "'\(rest)' is published by the gateway, not a request")
            return
        }
        guard rest.hasPrefix("request/") else {
            reportUnknown(
                message,
                "'\(base)/$gateway/\(rest)' is not a gateway topic; requests go to \(base)/$gateway/request/<op>")
            return
        }
        let op = String(rest.dropFirst("request/".count))
        let responseTopic = "\(base)/$gateway/response/\(op)"
        var id: JSONValue = .null
        if message.retain {
            if !message.payload.isEmpty {
                sendResponse(
                    responseTopic, id: Self.requestID(message.payload),
                    .failure(
                        GatewayFailure(
                            code: .retained,
                            message:
                                "a retained request is not run; publish it without the retain flag, and clear this one (an empty retained message)"
                        )))
            }
            return
        }
        let fields: [String: JSONValue]
        if message.payload.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) {
            fields = [:]
        } else {
            do throws(ModelError) {
                guard case .object(let object) = try JSONValue(parsing: message.payload) else {
                    sendResponse(
                        responseTopic, id: .null,
                        .failure(GatewayFailure(code: .invalidJSON, message: "a request is a JSON object")),
                        reply: Reply(message))
                    return
                }
                fields = object
            } catch {
                sendResponse(
                    responseTopic, id: .null, .failure(GatewayFailure(code: .invalidJSON, message: error.message)),
                    reply: Reply(message))
                return
            }
        }
        id = fields["id"] ?? .null
        requestQueue.yield(
            GatewayRequest(op: op, fields: fields, responseTopic: responseTopic, id: id, reply: Reply(message)))
    }

    func sendResponse(
        _ topic: String, id: JSONValue, _ outcome: Result<JSONValue, GatewayFailure>, reply: Reply? = nil
    ) {
        activity.answered(topic, op: nil, outcome)
        switch outcome {
        case .success(let data):
            answer(topic, json: .object(["id": id, "status": .string("ok"), "data": data]), reply: reply)
        case .failure(let failure):
            counters.errors += 1
            answer(
                topic,
                json: .object([
                    "id": id, "status": .string("error"), "code": .string(failure.code.rawValue),
                    "message": .string(failure.message),
                ]), reply: reply)
        }
    }

    static let operations = [
        "tree", "republish", "health", "room/add", "room/rename", "room/remove", "accessory/rename",
        "accessory/move", "accessory/remove", "accessory/identify", "service/rename", "scope/get", "scope/set",
        "pair", "pairings", "unpair", "discover",
    ]

    func requirePairing(_ op: String) throws(GatewayFailure) -> any PairingManager {
        guard let pairing else {
            throw GatewayFailure(
                code: .noPairingSource,
                message: "\(op) needs the hap source; add `- type: hap` under sources in the config")
        }
        return pairing
    }

    func performRequest(op: String, fields: [String: JSONValue]) async -> Result<JSONValue, GatewayFailure> {
        do throws(GatewayFailure) {
            let request = try RequestReader.request(fields)
            switch op {
            case "tree":
                try request.finish()
                return .success(try treeAnswer())
            case "republish":
                try request.finish()
                enqueue(.all)
                return .success(.object(["topics": .int(Int64(retainedCount))]))
            case "health":
                try request.finish()
                return .success(await health())
            case "room/add":
                let name = try request.text("name")
                try request.finish()
                let room = try await database { db throws(ModelError) in try await db.addRoom(named: name) }
                return .success(.object(["id": .string(room.id), "name": .string(room.name)]))
            case "room/rename":
                let room = try await resolveRoom(request)
                let name = try request.text("name")
                try request.finish()
                try await database { db throws(ModelError) in try await db.renameRoom(id: room.id, to: name) }
                return .success(
                    .object(["id": .string(room.id), "name": .string(name), "old-name": .string(room.name)]))
            case "room/remove":
                let room = try await resolveRoom(request)
                try request.finish()
                try await database { db throws(ModelError) in try await db.removeRoom(id: room.id) }
                return .success(.object(["id": .string(room.id), "name": .string(room.name)]))
            case "accessory/rename":
                let accessory = try resolveAccessory(request)
                let name = try request.optionalText("name")
                try request.finish()
                try await database { db throws(ModelError) in try await db.renameAccessory(id: accessory.id, to: name) }
                return .success(
                    .object(["id": .string(accessory.id), "name": .string(name ?? accessory.accessory.name)]))
            case "accessory/move":
                let accessory = try resolveAccessory(request)
                let room = try await resolveRoom(request)
                try request.finish()
                try await database { db throws(ModelError) in
                    try await db.assign(accessoryID: accessory.id, toRoom: room.id)
                }
                return .success(.object(["id": .string(accessory.id), "room": .string(room.name)]))
            case "accessory/remove":
                let accessory = try resolveAccessory(request)
                try request.finish()
                // A paired accessory leaves the home by losing its pairing; its source then
                // reports it removed.
                // A bridged accessory cannot be unpaired alone: it only leaves the home, and
                // removing its bridge removes them all.
                if accessory.accessory.bridgeID == nil, let pairing,
                    let pairingID = pairing.pairingID(forAccessory: accessory.id)
                {
                    try await pairing.unpair(id: pairingID)
                }
                // Out of the tree before the database forgets its room, so that it is never
                // published in the default room on its way out.
                removedAccessories.insert(accessory.id)
                do throws(GatewayFailure) {
                    try await database { db throws(ModelError) in try await db.removeAccessory(id: accessory.id) }
                } catch {
                    removedAccessories.remove(accessory.id)
                    rebuild(announce: true)
                    throw error
                }
                return .success(.object(["id": .string(accessory.id), "name": .string(accessory.displayName)]))
            case "accessory/identify":
                let accessory = try resolveAccessory(request)
                try request.finish()
                do throws(AccessoryError) {
                    try await source.identify(accessoryID: accessory.id)
                } catch {
                    throw GatewayFailure(error)
                }
                return .success(.object(["id": .string(accessory.id)]))
            case "service/rename":
                let accessory = try resolveAccessory(request)
                let service = try resolveService(request, in: accessory)
                let name = try request.optionalText("name")
                try request.finish()
                try await database { db throws(ModelError) in
                    try await db.renameService(accessoryID: accessory.id, iid: service.iid, to: name)
                }
                return .success(
                    .object([
                        "accessory": .string(accessory.id), "iid": .uint(service.iid),
                        "name": name.map(JSONValue.string) ?? .null,
                    ]))
            case "scope/get":
                try request.finish()
                return .success(try Self.scopeJSON(scope.config))
            case "scope/set":
                guard let raw = request.node("scope") else {
                    throw GatewayFailure(
                        code: .missingField, message: "scope/set needs \"scope\": an object like scope/get returns")
                }
                try request.finish()
                let newScope = try Self.decodeScope(raw)
                try setScope(newScope)
                return .success(try Self.scopeJSON(newScope))
            case "pair":
                let manager = try requirePairing(op)
                let host = try request.text("host")
                let port = try request.int("port", in: 1...65535)
                let code = try request.text("code")
                let name = try request.optionalText("name")
                try request.finish()
                let paired = try await manager.pair(host: host, port: port, setupCode: code, name: name)
                // Paired anew: accessories removed from the home earlier are welcome again.
                for entry in paired["accessories"]?.arrayValue ?? [] {
                    if let id = entry["id"]?.stringValue, removedAccessories.remove(id) != nil {
                        do {
                            try await database.restoreAccessory(id: id)
                        } catch {
                            // Shown now; the home database lists it as removed again at the next start.
                            logger.warning(
                                "could not save that a paired accessory is back",
                                metadata: ["accessory": "\(id)", "error": "\(error.message)"])
                        }
                    }
                }
                rebuild(announce: true)
                return .success(paired)
            case "pairings":
                let manager = try requirePairing(op)
                try request.finish()
                return .success(.object(["pairings": try await manager.pairings()]))
            case "unpair":
                let manager = try requirePairing(op)
                let id = try request.text("pairing")
                try request.finish()
                try await manager.unpair(id: id)
                return .success(.object(["pairing": .string(id)]))
            case "discover":
                let manager = try requirePairing(op)
                let timeout = try request.optionalDouble("timeout", in: 0.5...30) ?? 3
                try request.finish()
                return .success(try await manager.discover(timeout: timeout))
            default:
                throw GatewayFailure(
                    code: .unknownOp,
                    message: "unknown operation '\(op)'; known: \(Self.operations.joined(separator: ", "))")
            }
        } catch {
            return .failure(error)
        }
    }

    private func database<T: Sendable>(_ body: (HomeDatabase) async throws(ModelError) -> T)
        async throws(GatewayFailure) -> T
    {
        do throws(ModelError) {
            let result = try await body(database)
            // The database's event reaches `handle(homeEvent:)` too; refreshing here makes the
            // topics current before the response is sent. Whichever rebuild sees the change
            // first announces it (the tree diff), the other finds nothing left to announce.
            await refreshHome()
            rebuild(announce: true)
            return result
        } catch {
            logStorageFailure(error, saving: "the home database")
            throw GatewayFailure(code: error.code, message: error.message)
        }
    }

    /// The request's answer tells its client; the log tells whoever runs the gateway, whose
    /// state directory it is. Only a failure of the storage itself (the message names the file
    /// and the OS's reason; it holds no keys) is logged, not a refused request.
    func logStorageFailure(_ error: ModelError, saving what: String) {
        guard [.io, .locked, .corruptDatabase, .unsupportedVersion].contains(error.code) else { return }
        logger.error("cannot save \(what)", metadata: ["code": "\(error.code)", "error": "\(error.message)"])
    }

    func resolveRoom(_ request: RequestReader) async throws(GatewayFailure) -> Room {
        let key = try request.text("room")
        let home = await database.home
        return try tree.room(named: key, among: home.allRooms)
    }

    func resolveAccessory(_ request: RequestReader) throws(GatewayFailure) -> TopicTree.AccessoryNode {
        let key = try request.text("accessory")
        guard let accessory = try tree.accessory(named: key) else { throw .unknownAccessory(key) }
        return accessory
    }

    func resolveService(_ request: RequestReader, in accessory: TopicTree.AccessoryNode) throws(GatewayFailure)
        -> TopicTree.ServiceNode
    {
        try accessory.service(named: try request.text("service"))
    }

    public static func scopeJSON(_ scope: ScopeConfig) throws(GatewayFailure) -> JSONValue {
        do {
            let data = try JSONEncoder().encode(scope)
            return try JSONValue(parsing: Array(data))
        } catch {
            throw GatewayFailure(code: .internal, message: "cannot encode the scope: \(error)")
        }
    }

    /// Read strictly, as the config file's scope is: a key left out keeps its default, an
    /// unknown or ill-typed one is an error naming it (`scope.rooms.alow`).
    public static func decodeScope(_ value: JSONValue) throws(GatewayFailure) -> ScopeConfig {
        let fields = try RequestReader(value, path: "scope", failure: GatewayFailure.requestField)
        func list(_ key: String) throws(GatewayFailure) -> ScopeList? {
            try ScopeList.read(key, in: fields, single: false)
        }
        var scope = ScopeConfig()
        if let v = try list("manufacturers") { scope.manufacturers = v }
        if let v = try fields.bool("user-interactive-only") { scope.userInteractiveOnly = v }
        if let v = try list("service-types") { scope.serviceTypes = v }
        if let v = try list("characteristic-types") { scope.characteristicTypes = v }
        if let v = try list("rooms") { scope.rooms = v }
        if let v = try list("accessories") { scope.accessories = v }
        if let v = try fields.strings("read-only") { scope.readOnly = v }
        if fields.has("services") {
            throw fields.error(
                "services", .unknownKey,
                "services is the config file's older name of user-interactive-only; send \"user-interactive-only\": false for all"
            )
        }
        try fields.finish()
        return scope
    }

    func setScope(_ newScope: ScopeConfig) throws(GatewayFailure) {
        let filter: ScopeFilter
        do throws(ConfigError) {
            filter = try ScopeFilter(newScope, file: "scope/set")
        } catch {
            throw GatewayFailure(code: .invalidScope, message: error.description)
        }
        if let scopeStore {
            do throws(ModelError) {
                try scopeStore.save(newScope)
            } catch {
                logStorageFailure(error, saving: "the scope")
                throw GatewayFailure(code: .io, message: "cannot save the scope: \(error.message)")
            }
        }
        scope = filter
        rebuild(announce: true)
        event(.scopeChanged, fields: [:])
    }
}

/// A gateway request waiting for its turn.
struct GatewayRequest: Sendable {
    var op: String
    var fields: [String: JSONValue]
    var responseTopic: String
    var id: JSONValue
    var reply: Gateway.Reply?
}
