import ArgumentParser
import Gateway

// `homemqtt homes` and `homemqtt home …`: the list of homes from the shell, through the running
// gateway when it is up (which serves a new home at once and announces each change), on the
// state directory when it is not.

struct HomesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "homes", abstract: "List the homes: id, name, primary, base topic, rooms and accessories.")
    @OptionGroup var options: RequestOptions

    func run() async throws {
        try await HomeRequest.run(HomesList(), options)
    }
}

struct HomeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "home", abstract: "Add, rename or remove homes, make one primary, move accessories between them.",
        subcommands: [Add.self, Rename.self, Remove.self, Primary.self, BaseTopic.self, Accessory.self, Source.self])

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "add", abstract: "Add a home, served on its own base topic.")
        @OptionGroup var options: RequestOptions
        @Argument(help: "The new home's name.") var name: String
        @Option(help: "Its base topic (default: <the gateway's base topic>-<name>).") var baseTopic: String?

        func run() async throws {
            try await HomeRequest.run(HomeAdd(name: name, baseTopic: baseTopic), options)
        }
    }

    struct Rename: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rename", abstract: "Rename a home; its topics stay.")
        @OptionGroup var options: RequestOptions
        @Argument(help: "The home: id, name or base topic.") var home: String
        @Argument(help: "Its new name.") var name: String

        func run() async throws {
            try await HomeRequest.run(HomeRename(home: home, name: name), options)
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "remove", abstract: "Remove a home and clear its topics.")
        @OptionGroup var options: RequestOptions
        @Argument(help: "The home: id, name or base topic.") var home: String
        @Option(help: "The home its accessories go to; required when it holds any.") var moveTo: String?

        func run() async throws {
            try await HomeRequest.run(HomeRemove(home: home, moveTo: moveTo), options)
        }
    }

    struct Primary: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "primary", abstract: "Make a home primary (no topic changes).")
        @OptionGroup var options: RequestOptions
        @Argument(help: "The home: id, name or base topic.") var home: String

        func run() async throws {
            try await HomeRequest.run(HomePrimary(home: home), options)
        }
    }

    struct BaseTopic: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "base-topic", abstract: "Serve a home on another base topic; its old topics are cleared.")
        @OptionGroup var options: RequestOptions
        @Argument(help: "The home: id, name or base topic.") var home: String
        @Argument(help: "The new base topic.") var baseTopic: String

        func run() async throws {
            try await HomeRequest.run(HomeBaseTopic(home: home, baseTopic: baseTopic), options)
        }
    }

    struct Accessory: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "accessory", abstract: "Move an accessory to another home, with its names.")
        @OptionGroup var options: RequestOptions
        @Argument(help: "The accessory: id, or its name in the home it is in (a topic: in the first home).")
        var accessory: String
        @Argument(help: "The home: id, name or base topic.") var home: String

        func run() async throws {
            try await HomeRequest.run(AccessoryHome(accessory: accessory, home: home), options)
        }
    }

    struct Source: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "source",
            abstract:
                "Assign a whole source to a home: the accessories whose ids start with PREFIX (hap:<pairing id>: or sim:<file>) move there, and new ones go there."
        )
        @OptionGroup var options: RequestOptions
        @Argument(help: "The accessory id prefix.") var prefix: String
        @Argument(help: "The home: id, name or base topic.") var home: String

        func run() async throws {
            try await HomeRequest.run(SourceHome(prefix: prefix, home: home), options)
        }
    }
}
