import ArgumentParser
import Foundation
import Gateway
import HomeMQTTApp

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

    /// ArgumentParser's own `main`, but for `run` the one malloc arena is set first, here on the
    /// main thread before anything is awaited. Set in `run()`, it came after a thread of the
    /// concurrency pool had allocated and so had made a second arena, which the gateway's
    /// threads then shared: in some start-ups and not others, 5 MB more at the peak.
    static func main() async {
        do {
            var command = try parseAsRoot()
            if command is RunCommand { HomeMQTTApp.useOneMemoryArena() }
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            exit(withError: error)
        }
    }
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
