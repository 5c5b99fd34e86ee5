import ArgumentParser
import Foundation
import Gateway
import HomeMQTTApp
import HAP
import HomeModel
import Logging

/// Turns a config into what the commands need: the config, the source, the database, the
/// logger, and one way of reporting a failure.
enum Setup {
    static func loadConfig(_ options: ConfigOptions) throws -> GatewayConfig {
        do {
            return try HomeMQTTApp.loadConfig(file: options.config, stateDirectory: options.stateDirectory)
        } catch {
            throw CLIError(error.description, code: .config)
        }
    }

    /// How every command reports a failure to start — the config file, an accessory file, the
    /// scope, the state directory: `homemqtt: <message>` as one line on stderr, and the exit
    /// code to throw, 2 when the configuration is at fault and 1 otherwise. `run` and
    /// `check-config` give the same input the same line and the same code.
    static func failure(_ error: any Error) -> ExitCode {
        let exit: ExitCode
        switch error {
        case let code as ExitCode: return code // already reported
        case let error as CLIError: exit = ExitCode(error.code.rawValue)
        case is ConfigError, is SourceFilesError: exit = ExitCode(CLIError.Code.config.rawValue)
        default: exit = ExitCode(CLIError.Code.failure.rawValue)
        }
        let message = MaskedURL.maskingPasswords(in: "\(error)").split(whereSeparator: \.isNewline)
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }.joined(separator: " ")
        FileHandle.standardError.write(Data("homemqtt: \(message)\n".utf8))
        return exit
    }

    static func source(_ config: GatewayConfig, logger: Logger) throws -> any AccessorySource {
        try sources(config, logger: logger).source
    }

    /// The gateway's source (`HomeMQTTApp.makeSource`), and what pairs with it while running.
    /// - Parameter deferred: load the simulator's files when its service runs (for `run`,
    ///   where SIGTERM must stop the load too) rather than now.
    static func sources(_ config: GatewayConfig, logger: Logger, deferred: Bool = false) throws -> MadeSource {
        try HomeMQTTApp.makeSource(config, logger: logger, deferred: deferred)
    }

    /// The management operations the sources add to the gateway's own: HAP's pairing, answered
    /// `no-pairing-source` by a gateway without a HAP source. The running gateway and the CLI
    /// without it both list these.
    static let sourceOperations: [any ManagementOperation.Type] = HomeMQTTApp.sourceOperations

    /// `<state-directory>/pairings`: where `homemqtt hap pair` and the hap source keep pairings.
    static func pairingStore(_ config: GatewayConfig) -> HAPPairingStore {
        HAPFactory.pairingStore(config)
    }

    /// For a command that writes the state directory (`writing`): brings it to the current
    /// format (`HomeMQTTApp.prepareState`), saying so on stderr when it migrated, and refuses it
    /// when another user owns it. For one that only reads: writes nothing. Either way a state
    /// directory of a newer HomeMQTT is refused untouched.
    static func prepareState(_ config: GatewayConfig, writing: Bool = true) throws(ModelError) {
        let upgrade: StateFormat.Upgrade?
        do throws(ModelError) {
            if writing {
                upgrade = try HomeMQTTApp.prepareState(config)
            } else {
                try HomeMQTTApp.stateFormat(config).check()
                upgrade = nil
            }
        } catch {
            throw ModelError(code: error.code, message: "\(config.stateDirectory): \(error.message)")
        }
        if let upgrade {
            FileHandle.standardError.write(
                Data(
                    "homemqtt: migrated the state directory \(config.stateDirectory) from format \(upgrade.from) to \(upgrade.to) (\(upgrade.steps.joined(separator: "; "))); the files as they were are in \(upgrade.backup.path)\n"
                        .utf8))
        }
    }

    static func openDatabase(_ config: GatewayConfig, exclusive: Bool) throws -> HomeDatabase {
        do {
            try prepareState(config, writing: exclusive)
        } catch {
            throw CLIError(error.message)
        }
        do {
            // The home on the gateway's base topic: the one the CLI's requests go to when the
            // gateway runs, whichever home is primary.
            let database = try HomeDatabase(
                directory: URL(fileURLWithPath: config.stateDirectory), exclusive: exclusive)
            return database.view(homeID: database.baseHomeID)
        } catch {
            throw CLIError("\(config.stateDirectory): \(error.message)")
        }
    }

    static func logger(level: String) -> Logger {
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = Logger.Level(rawValue: level) ?? .info
            return EscapingLogHandler(base: handler)
        }
        return Logger(label: "homemqtt")
    }
}

/// A failure the CLI reports as one line on stderr with a non-zero exit (see `Setup.failure`).
struct CLIError: Error, CustomStringConvertible {
    /// The exit code: whether the configuration is at fault.
    enum Code: Int32 {
        case failure = 1
        /// The config file, an accessory file or the scope: fix the configuration.
        case config = 2
    }

    var code: Code
    var description: String

    init(_ description: String, code: Code = .failure) {
        self.description = description
        self.code = code
    }
}
