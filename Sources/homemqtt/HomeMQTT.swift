import ArgumentParser

@main
struct HomeMQTT: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "homemqtt",
        abstract: "Puts a HomeKit home — rooms, accessories, services, characteristics — onto MQTT.",
        subcommands: [
            RunCommand.self, TreeCommand.self, TopicsCommand.self, CheckConfigCommand.self, DiscoverCommand.self, PairCommand.self, PairingsCommand.self, UnpairCommand.self,
            RoomCommand.self, AccessoryCommand.self, ServiceCommand.self, ScopeCommand.self, HealthCommand.self, RepublishCommand.self,
        ],
        defaultSubcommand: RunCommand.self
    )
}

struct ConfigOptions: ParsableArguments {
    @Option(name: .shortAndLong, help: "The gateway's YAML config file.")
    var config: String = "Config/gateway.yml"
}
