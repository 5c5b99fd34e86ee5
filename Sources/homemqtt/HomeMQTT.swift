import ArgumentParser
import Gateway

// The homemqtt command: its subcommands (`run` by default) and the config options they share.

@main
struct HomeMQTT: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "homemqtt",
        abstract: "Puts a HomeKit home — rooms, accessories, services, characteristics — onto MQTT.",
        version: HomeMQTTVersion.current,
        subcommands: [
            RunCommand.self, TreeCommand.self, TopicsCommand.self, CheckConfigCommand.self, DiscoverCommand.self,
            PairCommand.self, PairingsCommand.self, UnpairCommand.self,
            RoomCommand.self, AccessoryCommand.self, ServiceCommand.self, ScopeCommand.self, HealthCommand.self,
            RepublishCommand.self, BackupCommand.self, RestoreCommand.self,
        ],
        defaultSubcommand: RunCommand.self
    )
}

struct ConfigOptions: ParsableArguments {
    @Option(name: .shortAndLong, help: "The gateway's YAML config file.")
    var config: String = "Config/gateway.yml"

    @Option(
        help: ArgumentHelp(
            "The state directory: home database, run-time scope, HAP pairings.",
            discussion:
                "Overrides $STATE_DIRECTORY (set by systemd's StateDirectory=), which overrides the config's state-directory.",
            valueName: "directory"))
    var stateDirectory: String?

    func validate() throws {
        if let stateDirectory, stateDirectory.isEmpty {
            throw ValidationError("--state-directory must not be empty")
        }
    }
}
