import ArgumentParser
import Foundation
import Gateway
import HomeModel
import Logging

// `homemqtt room|accessory|service|scope|health|republish`: the request API of the gateway
// (`<base>/$gateway/request/<op>`) from the shell. Through the running gateway when it is up,
// so that it publishes the events and topic changes; on the state directory directly when it
// is not, holding the home database's lock so that no two writers meet.

/// One request as the gateway's API names it.
struct HomeOperation: Sendable {
    var op: String
    var fields: [String: JSONValue] = [:]
    /// Talks to accessories or the broker, so only the running gateway can do it.
    var needsGateway = false
}

struct RequestOptions: ParsableArguments {
    @OptionGroup var config: ConfigOptions

    @Option(help: "Seconds to wait for the running gateway's answer.")
    var timeout: Double = 5
}

enum HomeRequest {
    /// Runs `operation`, prints its data as JSON on stdout; on an error prints
    /// `homemqtt: <op>: <code>: <message>` on stderr and exits 1 (2 for a bad config).
    static func run(_ operation: HomeOperation, _ options: RequestOptions) async throws {
        let config: GatewayConfig
        do {
            config = try Setup.loadConfig(options.config)
        } catch {
            fail("\(error)", exit: 2)
        }
        let logger = Setup.logger(level: "error")
        switch await RequestClient.connect(config: config, op: operation.op, statusWait: 1.5, logger: logger) {
        case .online(let link):
            let response: [String: JSONValue]?
            do {
                response = try await link.send(operation.fields, timeout: options.timeout)
            } catch {
                await link.close()
                fail("\(operation.op): cannot send the request to \(link.requestTopic): \(error)")
            }
            await link.close()
            guard let response else {
                fail("\(operation.op): no answer on \(link.responseTopic) within \(options.timeout) s; is the gateway for '\(config.baseTopic)' still running?")
            }
            if response["status"] == .string("ok") {
                print((response["data"] ?? .null).encoded(pretty: true))
                return
            }
            let code = response["code"]?.stringValue ?? "error"
            let message = response["message"]?.stringValue ?? (response.isEmpty ? "an empty answer" : JSONValue.object(response).encoded())
            fail("\(operation.op): \(code): \(message)")
        case .absent(let reason):
            if operation.needsGateway {
                fail("\(operation.op) needs the running gateway, and it is not running: \(reason)")
            }
            let data: JSONValue
            do throws(GatewayFailure) {
                let home = try await OfflineHome.open(config, logger: logger)
                data = try await home.perform(operation)
            } catch {
                fail("\(operation.op): \(error.code): \(error.message)")
            }
            print(data.encoded(pretty: true))
            FileHandle.standardError.write(Data(
                "homemqtt: the gateway is not running (\(reason)); changed the home in \(config.stateDirectory) directly — its topics follow when it starts\n".utf8))
        }
    }

    static func fail(_ message: String, exit code: Int32 = 1) -> Never {
        FileHandle.standardError.write(Data("homemqtt: \(message)\n".utf8))
        Foundation.exit(code)
    }
}

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
                throw GatewayFailure(code: .locked, message: "the home database in \(config.stateDirectory) is held by another homemqtt process (a gateway that has not reached the broker, or another command); nothing was changed — try again when it has connected or stopped")
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
        let fields = operation.fields
        switch operation.op {
        case "room/add":
            let name = try string(fields, "name")
            let room = try await change { db throws(ModelError) in try await db.addRoom(named: name) }
            return .object(["id": .string(room.id), "name": .string(room.name)])
        case "room/rename":
            let room = try resolveRoom(try string(fields, "room"))
            let name = try string(fields, "name")
            try await change { db throws(ModelError) in try await db.renameRoom(id: room.id, to: name) }
            return .object(["id": .string(room.id), "name": .string(name), "old-name": .string(room.name)])
        case "room/remove":
            let room = try resolveRoom(try string(fields, "room"))
            try await change { db throws(ModelError) in try await db.removeRoom(id: room.id) }
            return .object(["id": .string(room.id), "name": .string(room.name)])
        case "accessory/rename":
            let (id, node) = try resolveAccessory(try string(fields, "accessory"))
            let name = fields["name"]?.stringValue
            try await change { db throws(ModelError) in try await db.renameAccessory(id: id, to: name) }
            return .object(["id": .string(id), "name": name.map(JSONValue.string) ?? node.map { .string($0.accessory.name) } ?? .null])
        case "accessory/move":
            let (id, _) = try resolveAccessory(try string(fields, "accessory"))
            let room = try resolveRoom(try string(fields, "room"))
            try await change { db throws(ModelError) in try await db.assign(accessoryID: id, toRoom: room.id) }
            return .object(["id": .string(id), "room": .string(room.name)])
        case "accessory/remove":
            let (id, node) = try resolveAccessory(try string(fields, "accessory"))
            guard let node else {
                // Not loaded without the gateway: a paired accessory, whose pairing goes too.
                throw GatewayFailure(code: .needsGateway, message: "'\(id)' is only known to the running gateway's sources (a paired accessory: removing it also removes its pairing); start the gateway and try again")
            }
            try await change { db throws(ModelError) in try await db.removeAccessory(id: id) }
            return .object(["id": .string(id), "name": .string(node.displayName)])
        case "service/rename":
            let key = try string(fields, "accessory")
            let (id, found) = try resolveAccessory(key)
            guard let node = found else {
                throw GatewayFailure(code: .needsGateway, message: "the services of '\(key)' are only known to the running gateway; start it and try again")
            }
            let service = try resolveService(try string(fields, "service"), in: node)
            let name = fields["name"]?.stringValue
            try await change { db throws(ModelError) in try await db.renameService(accessoryID: id, iid: service.iid, to: name) }
            return .object(["accessory": .string(id), "iid": .uint(service.iid), "name": name.map(JSONValue.string) ?? .null])
        case "scope/get":
            return try Gateway.scopeJSON(scope)
        case "scope/set":
            let newScope = try Gateway.decodeScope(fields["scope"] ?? .null)
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
    private func change<T: Sendable>(_ body: (HomeDatabase) async throws(ModelError) -> T) async throws(GatewayFailure) -> T {
        do throws(ModelError) {
            return try await body(database)
        } catch {
            throw GatewayFailure(code: error.code, message: error.message)
        }
    }

    private func string(_ fields: [String: JSONValue], _ key: String) throws(GatewayFailure) -> String {
        guard let text = fields[key]?.stringValue, !text.trimmingCharacters(in: .whitespaces).isEmpty else {
            throw GatewayFailure(code: .invalidField, message: "\"\(key)\" must be a non-empty string")
        }
        return text
    }

    // Resolution as the gateway does it (Gateway+Requests.swift): by id, name or topic.

    func resolveRoom(_ key: String) throws(GatewayFailure) -> Room {
        let all = home.allRooms
        if let room = all.first(where: { $0.id == key })
            ?? all.first(where: { $0.name.lowercased() == key.lowercased() })
            ?? tree.rooms.first(where: { $0.slug == key })?.room {
            return room
        }
        throw GatewayFailure(code: .unknownRoom, message: "no room '\(key)'; rooms: \(all.map(\.name).joined(separator: ", "))")
    }

    /// The accessory's id, and its node when a source loaded it without the gateway.
    func resolveAccessory(_ key: String) throws(GatewayFailure) -> (String, TopicTree.AccessoryNode?) {
        let lower = key.lowercased()
        let base = tree.base
        let matches = tree.accessories.filter {
            $0.id == key || $0.topic == key || $0.topic == "\(base)/\(key)" || $0.displayName.lowercased() == lower
        }
        if matches.count == 1 { return (matches[0].id, matches[0]) }
        if matches.count > 1 {
            throw GatewayFailure(code: .ambiguous, message: "\(matches.count) accessories are named '\(key)'; use its id or topic: \(matches.map(\.topic).joined(separator: ", "))")
        }
        if home.isKnown(accessoryID: key) { return (key, nil) }
        throw GatewayFailure(code: .unknownAccessory, message: "no accessory '\(key)' in scope (by id, name or topic)")
    }

    func resolveService(_ key: String, in accessory: TopicTree.AccessoryNode) throws(GatewayFailure) -> TopicTree.ServiceNode {
        if let service = accessory.services.first(where: {
            $0.slug == key || $0.topic == key || $0.displayName.lowercased() == key.lowercased() || String($0.iid) == key
        }) {
            return service
        }
        throw GatewayFailure(code: .unknownService, message: "\(accessory.displayName) has no service '\(key)'; services: \(accessory.services.map(\.slug).joined(separator: ", "))")
    }
}

// MARK: - Commands

struct RoomCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "room", abstract: "Add, rename or remove rooms of the home.",
        subcommands: [Add.self, Rename.self, Remove.self])

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "add", abstract: "Add a room.")
        @OptionGroup var options: RequestOptions
        @Argument(help: "The new room's name.") var name: String

        func run() async throws {
            try await HomeRequest.run(HomeOperation(op: "room/add", fields: ["name": .string(name)]), options)
        }
    }

    struct Rename: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "rename", abstract: "Rename a room; its accessories' topics follow.")
        @OptionGroup var options: RequestOptions
        @Argument(help: "The room: id, name or topic slug.") var room: String
        @Argument(help: "Its new name.") var name: String

        func run() async throws {
            try await HomeRequest.run(HomeOperation(op: "room/rename", fields: ["room": .string(room), "name": .string(name)]), options)
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "remove", abstract: "Remove a room; its accessories go to the default room.")
        @OptionGroup var options: RequestOptions
        @Argument(help: "The room: id, name or topic slug.") var room: String

        func run() async throws {
            try await HomeRequest.run(HomeOperation(op: "room/remove", fields: ["room": .string(room)]), options)
        }
    }
}

struct AccessoryCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "accessory", abstract: "Rename, move, remove or identify an accessory.",
        subcommands: [Rename.self, Move.self, Remove.self, Identify.self])

    struct Rename: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "rename", abstract: "Give an accessory a name (or, with --reset, its own name back).")
        @OptionGroup var options: RequestOptions
        @Argument(help: "The accessory: id, name or topic.") var accessory: String
        @Argument(help: "Its new name.") var name: String?
        @Flag(help: "Remove the name given to it: the accessory's own name applies again.") var reset = false

        func validate() throws {
            if (name == nil) == !reset { throw ValidationError("give either a NAME or --reset") }
        }

        func run() async throws {
            try await HomeRequest.run(HomeOperation(op: "accessory/rename", fields: [
                "accessory": .string(accessory), "name": name.map(JSONValue.string) ?? .null,
            ]), options)
        }
    }

    struct Move: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "move", abstract: "Assign an accessory to a room.")
        @OptionGroup var options: RequestOptions
        @Argument(help: "The accessory: id, name or topic.") var accessory: String
        @Argument(help: "The room: id, name or topic slug.") var room: String

        func run() async throws {
            try await HomeRequest.run(HomeOperation(op: "accessory/move", fields: ["accessory": .string(accessory), "room": .string(room)]), options)
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "remove", abstract: "Remove an accessory from the home (a paired one also loses its pairing).")
        @OptionGroup var options: RequestOptions
        @Argument(help: "The accessory: id, name or topic.") var accessory: String

        func run() async throws {
            try await HomeRequest.run(HomeOperation(op: "accessory/remove", fields: ["accessory": .string(accessory)]), options)
        }
    }

    struct Identify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "identify", abstract: "Ask an accessory to identify itself (needs the running gateway).")
        @OptionGroup var options: RequestOptions
        @Argument(help: "The accessory: id, name or topic.") var accessory: String

        func run() async throws {
            try await HomeRequest.run(HomeOperation(op: "accessory/identify", fields: ["accessory": .string(accessory)], needsGateway: true), options)
        }
    }
}

struct ServiceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "service", abstract: "Rename a service of an accessory.", subcommands: [Rename.self])

    struct Rename: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "rename", abstract: "Give a service a name (or, with --reset, its own name back).")
        @OptionGroup var options: RequestOptions
        @Argument(help: "The accessory: id, name or topic.") var accessory: String
        @Argument(help: "The service: topic slug, name or instance id.") var service: String
        @Argument(help: "Its new name.") var name: String?
        @Flag(help: "Remove the name given to it.") var reset = false

        func validate() throws {
            if (name == nil) == !reset { throw ValidationError("give either a NAME or --reset") }
        }

        func run() async throws {
            try await HomeRequest.run(HomeOperation(op: "service/rename", fields: [
                "accessory": .string(accessory), "service": .string(service), "name": name.map(JSONValue.string) ?? .null,
            ]), options)
        }
    }
}

struct ScopeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scope", abstract: "Show or change what of the home is on MQTT (kept in the state directory).",
        subcommands: [Get.self, Replace.self])

    struct Get: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "get", abstract: "Print the scope as JSON.")
        @OptionGroup var options: RequestOptions

        func run() async throws {
            try await HomeRequest.run(HomeOperation(op: "scope/get"), options)
        }
    }

    struct Replace: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "set", abstract: "Replace the scope with a JSON object as `scope get` prints it.")
        @OptionGroup var options: RequestOptions
        @Argument(help: "A JSON file, or - for standard input.") var file: String

        func run() async throws {
            let data: Data
            if file == "-" {
                data = FileHandle.standardInput.readDataToEndOfFile()
            } else {
                guard let contents = FileManager.default.contents(atPath: file) else {
                    HomeRequest.fail("scope/set: cannot read '\(file)'")
                }
                data = contents
            }
            let scope: JSONValue
            do throws(ModelError) {
                scope = try JSONValue(parsing: Array(data))
            } catch {
                HomeRequest.fail("scope/set: \(file == "-" ? "standard input" : file): invalid-json: \(error.message)")
            }
            guard case .object = scope else {
                HomeRequest.fail("scope/set: \(file == "-" ? "standard input" : file): invalid-json: the scope is a JSON object, got \(scope.kindName)")
            }
            try await HomeRequest.run(HomeOperation(op: "scope/set", fields: ["scope": scope]), options)
        }
    }
}

struct HealthCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "health", abstract: "The running gateway's uptime, broker connection, sources and counts.")
    @OptionGroup var options: RequestOptions

    func run() async throws {
        try await HomeRequest.run(HomeOperation(op: "health", needsGateway: true), options)
    }
}

struct RepublishCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "republish", abstract: "Have the running gateway publish every retained topic again.")
    @OptionGroup var options: RequestOptions

    func run() async throws {
        try await HomeRequest.run(HomeOperation(op: "republish", needsGateway: true), options)
    }
}
