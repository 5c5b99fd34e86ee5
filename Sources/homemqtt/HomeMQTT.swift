import ArgumentParser
import Foundation
import Gateway

// The homemqtt command: its subcommands (`run` by default) and the config options they share.

@main
struct HomeMQTT: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "homemqtt",
        abstract: "Puts a HomeKit home (rooms, accessories, services, characteristics) onto MQTT.",
        version: HomeMQTTVersion.current,
        subcommands: [
            RunCommand.self, TreeCommand.self, TopicsCommand.self, CheckConfigCommand.self, HAPCommand.self,
            HomeKitCommand.self,
            HomesCommand.self, HomeCommand.self, AccessCommand.self, RoomCommand.self, AccessoryCommand.self,
            ServiceCommand.self, ScopeCommand.self, HealthCommand.self, RepublishCommand.self, BackupCommand.self,
            RestoreCommand.self, DoctorCommand.self,
        ] + HAPCommand.hiddenAliases,
        defaultSubcommand: RunCommand.self
    )
}

struct ConfigOptions: ParsableArguments {
    @Option(
        name: [.customShort("c"), .customLong("config")],
        help: ArgumentHelp(
            "The gateway's YAML config file.",
            discussion:
                "Default: $HOMEMQTT_CONFIG, else Config/gateway.yml when it exists (a checkout), else /etc/homemqtt/gateway.yml (the package's).",
            valueName: "config"))
    var configOption: String?

    /// The config file: the option, `$HOMEMQTT_CONFIG`, a checkout's, the installed one.
    var config: String {
        if let configOption { return configOption }
        if let file = ProcessInfo.processInfo.environment["HOMEMQTT_CONFIG"], !file.isEmpty { return file }
        let checkout = "Config/gateway.yml"
        return FileManager.default.fileExists(atPath: checkout) ? checkout : "/etc/homemqtt/gateway.yml"
    }

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
