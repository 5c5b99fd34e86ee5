import ArgumentParser
import Foundation
import Gateway
import HomeModel

// `homemqtt room|accessory|service|scope|health|republish`: the request API of the gateway
// (`<base>/$gateway/request/<op>`) from the shell. Through the running gateway when it is up,
// so that it publishes the events and topic changes; on the state directory directly when it
// is not, holding the home database's lock so that no two writers meet.

struct RequestOptions: ParsableArguments {
    @OptionGroup var config: ConfigOptions

    @Option(help: "Seconds to wait for the running gateway's answer.")
    var timeout: Double = 5
}

enum HomeRequest {
    /// Runs `operation`, prints its data as JSON on stdout; on an error prints
    /// `homemqtt: <op>: <code>: <message>` on stderr and exits 1 (2 for a bad config).
    static func run<Operation: ManagementOperation>(_ operation: Operation, _ options: RequestOptions) async throws {
        let data = await perform(operation, options.config, timeout: options.timeout)
        print(data.encoded(pretty: true))
    }

    /// Performs `operation` through the running gateway, or on the state directory when it is
    /// not running, and returns its data; on an error prints `homemqtt: <op>: <code>: <message>`
    /// on stderr and exits 1 (2 for a bad config).
    /// - Parameters:
    ///   - logLevel: of what the operation logs without the gateway (`--verbose`).
    ///   - changes: whether it changes the state directory (then stderr says it did so directly).
    ///   - withoutSource: for a source's operation that the running gateway answers
    ///     `no-pairing-source` (it runs without that kind of source): performs it on the state
    ///     directory's pairings alone, as these commands did before they were operations.
    static func perform<Operation: ManagementOperation>(
        _ operation: Operation, _ configOptions: ConfigOptions, timeout: Double, logLevel: String = "error",
        changes: Bool = true, withoutSource: Bool = false
    ) async -> JSONValue {
        let op = Operation.name
        let config: GatewayConfig
        do {
            config = try Setup.loadConfig(configOptions)
        } catch {
            fail("\(error)", exit: 2)
        }
        let logger = Setup.logger(level: logLevel)
        switch await RequestClient.connect(config: config, op: op, statusWait: 1.5, logger: logger) {
        case .online(let link):
            let response: [String: JSONValue]?
            do {
                response = try await link.send(operation.fields, timeout: timeout)
            } catch {
                await link.close()
                fail("\(op): cannot send the request to \(link.requestTopic): \(error)")
            }
            await link.close()
            guard let response else {
                fail(
                    "\(op): no answer on \(link.responseTopic) within \(timeout) s; is the gateway for '\(config.baseTopic)' still running?"
                )
            }
            if response["status"] == .string("ok") {
                return response["data"] ?? .null
            }
            let code = response["code"]?.stringValue ?? "error"
            if withoutSource, code == ErrorCode.noPairingSource.rawValue {
                do throws(GatewayFailure) {
                    let data = try await PairingsOnly.open(config, logger: logger).perform(op, fields: operation.fields)
                    FileHandle.standardError.write(
                        Data(
                            "homemqtt: the running gateway has no source for \(op); used the state directory \(config.stateDirectory) directly\n"
                                .utf8))
                    return data
                } catch {
                    fail("\(op): \(error.code): \(error.message)")
                }
            }
            let message =
                response["message"]?.stringValue
                ?? (response.isEmpty ? "an empty answer" : JSONValue.object(response).encoded())
            fail("\(op): \(code): \(message)")
        case .absent(let reason):
            if Operation.needsGateway {
                fail("\(op) needs the running gateway, and it is not running: \(reason)")
            }
            let data: JSONValue
            do throws(GatewayFailure) {
                let home = try await OfflineHome.open(config, logger: logger)
                data = try await home.perform(op, fields: operation.fields)
            } catch {
                fail("\(op): \(error.code): \(error.message)")
            }
            if changes {
                FileHandle.standardError.write(
                    Data(
                        "homemqtt: the gateway is not running (\(reason)); changed the home in \(config.stateDirectory) directly — its topics follow when it starts\n"
                            .utf8))
            }
            return data
        }
    }

    static func fail(_ message: String, exit code: Int32 = 1) -> Never {
        FileHandle.standardError.write(Data("homemqtt: \(message)\n".utf8))
        Foundation.exit(code)
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
            try await HomeRequest.run(RoomAdd(name: name), options)
        }
    }

    struct Rename: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rename", abstract: "Rename a room; its accessories' topics follow.")
        @OptionGroup var options: RequestOptions
        @Argument(help: "The room: id, name or topic slug.") var room: String
        @Argument(help: "Its new name.") var name: String

        func run() async throws {
            try await HomeRequest.run(RoomRename(room: room, name: name), options)
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "remove", abstract: "Remove a room; its accessories go to the default room.")
        @OptionGroup var options: RequestOptions
        @Argument(help: "The room: id, name or topic slug.") var room: String

        func run() async throws {
            try await HomeRequest.run(RoomRemove(room: room), options)
        }
    }
}

struct AccessoryCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "accessory", abstract: "Rename, move, remove or identify an accessory.",
        subcommands: [Rename.self, Move.self, Remove.self, Identify.self])

    struct Rename: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rename", abstract: "Give an accessory a name (or, with --reset, its own name back).")
        @OptionGroup var options: RequestOptions
        @Argument(help: "The accessory: id, name or topic.") var accessory: String
        @Argument(help: "Its new name.") var name: String?
        @Flag(help: "Remove the name given to it: the accessory's own name applies again.") var reset = false

        func validate() throws {
            if (name == nil) == !reset { throw ValidationError("give either a NAME or --reset") }
        }

        func run() async throws {
            try await HomeRequest.run(AccessoryRename(accessory: accessory, name: name), options)
        }
    }

    struct Move: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "move", abstract: "Assign an accessory to a room.")
        @OptionGroup var options: RequestOptions
        @Argument(help: "The accessory: id, name or topic.") var accessory: String
        @Argument(help: "The room: id, name or topic slug.") var room: String

        func run() async throws {
            try await HomeRequest.run(AccessoryMove(accessory: accessory, room: room), options)
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "remove", abstract: "Remove an accessory from the home (a paired one also loses its pairing).")
        @OptionGroup var options: RequestOptions
        @Argument(help: "The accessory: id, name or topic.") var accessory: String

        func run() async throws {
            try await HomeRequest.run(AccessoryRemove(accessory: accessory), options)
        }
    }

    struct Identify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "identify", abstract: "Ask an accessory to identify itself (needs the running gateway).")
        @OptionGroup var options: RequestOptions
        @Argument(help: "The accessory: id, name or topic.") var accessory: String

        func run() async throws {
            try await HomeRequest.run(AccessoryIdentify(accessory: accessory), options)
        }
    }
}

struct ServiceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "service", abstract: "Rename a service of an accessory.", subcommands: [Rename.self])

    struct Rename: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rename", abstract: "Give a service a name (or, with --reset, its own name back).")
        @OptionGroup var options: RequestOptions
        @Argument(help: "The accessory: id, name or topic.") var accessory: String
        @Argument(help: "The service: topic slug, name or instance id.") var service: String
        @Argument(help: "Its new name.") var name: String?
        @Flag(help: "Remove the name given to it.") var reset = false

        func validate() throws {
            if (name == nil) == !reset { throw ValidationError("give either a NAME or --reset") }
        }

        func run() async throws {
            try await HomeRequest.run(ServiceRename(accessory: accessory, service: service, name: name), options)
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
            try await HomeRequest.run(ScopeGet(), options)
        }
    }

    struct Replace: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set", abstract: "Replace the scope with a JSON object as `scope get` prints it.")
        @OptionGroup var options: RequestOptions
        @Argument(help: "A JSON file, or - for standard input.") var file: String

        func run() async throws {
            let data: Data
            if file == "-" {
                data = FileHandle.standardInput.readDataToEndOfFile()
            } else {
                guard let contents = FileManager.default.contents(atPath: file) else {
                    HomeRequest.fail("\(ScopeSet.name): cannot read '\(file)'")
                }
                data = contents
            }
            let scope: JSONValue
            do throws(ModelError) {
                scope = try JSONValue(parsing: Array(data))
            } catch {
                HomeRequest.fail(
                    "\(ScopeSet.name): \(file == "-" ? "standard input" : file): invalid-json: \(error.message)")
            }
            guard case .object = scope else {
                HomeRequest.fail(
                    "\(ScopeSet.name): \(file == "-" ? "standard input" : file): invalid-json: the scope is a JSON object, got \(scope.kindName)"
                )
            }
            try await HomeRequest.run(ScopeSet(scope: scope), options)
        }
    }
}

struct HealthCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "health", abstract: "The running gateway's uptime, broker connection, sources and counts.")
    @OptionGroup var options: RequestOptions

    func run() async throws {
        try await HomeRequest.run(Health(), options)
    }
}

struct RepublishCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "republish", abstract: "Have the running gateway publish every retained topic again.")
    @OptionGroup var options: RequestOptions

    func run() async throws {
        try await HomeRequest.run(Republish(), options)
    }
}
