import ArgumentParser

@main
struct HomeMQTT: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "homemqtt",
        abstract: "Puts a HomeKit home — rooms, accessories, services, characteristics — onto MQTT.",
        subcommands: [
            RunCommand.self, TreeCommand.self, TopicsCommand.self, CheckConfigCommand.self,
        ],
        defaultSubcommand: RunCommand.self
    )
}

struct ConfigOptions: ParsableArguments {
    @Option(name: .shortAndLong, help: "The gateway's YAML config file.")
    var config: String = "Config/gateway.yml"
}
