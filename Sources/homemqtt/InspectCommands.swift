import ArgumentParser
import Foundation
import Gateway
import HomeModel
import Logging

// The commands that only look, without a broker: tree, topics and check-config, and the
// `Inspection` that loads what `run` would.

/// Loads everything `run` would, without a broker: for the commands that only look.
struct Inspection {
    var config: GatewayConfig
    var tree: TopicTree
    var home: Home
    /// Scope entries that match nothing in this home, one line each.
    var scopeWarnings: [String]

    init(_ options: ConfigOptions) async throws {
        config = try Setup.loadConfig(options)
        let logger = Logger(label: "homemqtt")
        let source = try Setup.source(config, logger: logger)
        let database = try Setup.openDatabase(config, exclusive: false)
        // This home's: with several homes, the others' are served on their own base topics.
        let accessories = await source.accessories().filter { database.serves(accessoryID: $0.id) }
        let scopeStore = ScopeStore(directory: URL(fileURLWithPath: config.stateDirectory))
        let scope: ScopeFilter
        do {
            scope = try ScopeFilter(scopeStore.load() ?? config.scope, file: config.file)
        } catch {
            throw CLIError(error.description, code: .config)
        }
        // Where the gateway has never run, rooms suggested by the files are shown as it would
        // create them, without writing anything.
        let preview = HomeDatabase.inMemory(copying: await database.home)
        try await preview.adopt(accessories)
        home = await preview.home
        let removed = Set(home.removedAccessoryIDs)
        tree = TopicTree(
            base: config.baseTopic, accessories: accessories.filter { !removed.contains($0.id) }, home: home,
            scope: scope)
        scopeWarnings = scope.unmatchedEntries(accessories: accessories, home: home)
    }
}

struct TreeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tree",
        abstract: "Print the scoped home: rooms (or categories), accessories, services, characteristics."
    )

    enum Grouping: String, ExpressibleByArgument, CaseIterable { case room, category }

    @OptionGroup var options: ConfigOptions
    @Option(help: "Group accessories by room or by category.") var by: Grouping = .room
    @Flag(help: "Print the tree as JSON, as home/$gateway/tree carries it.") var json = false

    func run() async throws {
        let inspection = try await Inspection.load(options)
        if json {
            print(TreeText.json(inspection))
            return
        }
        print(TreeText.render(inspection, by: by == .room ? .room : .category), terminator: "")
    }
}

struct TopicsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "topics",
        abstract: "List every topic the gateway publishes (pub) and serves (sub) with this config."
    )

    @OptionGroup var options: ConfigOptions

    func run() async throws {
        let inspection = try await Inspection.load(options)
        print(TreeText.topics(inspection), terminator: "")
    }
}

struct CheckConfigCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract: "Validate the config and accessory files; errors name the file and key."
    )

    @OptionGroup var options: ConfigOptions

    func run() async throws {
        let inspection = try await Inspection.load(options)
        // Warnings alone do not fail the check: the config works, but not as written.
        for warning in inspection.scopeWarnings {
            FileHandle.standardError.write(Data("homemqtt: warning: \(options.config): \(warning)\n".utf8))
        }
        let config = inspection.config
        print(
            "ok: \(options.config): \(inspection.tree.accessories.count) accessories, \(inspection.tree.characteristicCount) characteristics in scope"
        )
        print("state directory: \(config.stateDirectory) (\(config.stateDirectorySource.rawValue))")
    }
}

extension Inspection {
    /// Loads, turning every failure into one line on stderr and its exit code, as `run` does.
    static func load(_ options: ConfigOptions) async throws -> Inspection {
        do {
            return try await Inspection(options)
        } catch {
            throw Setup.failure(error)
        }
    }
}
