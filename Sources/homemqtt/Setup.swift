import ArgumentParser
import Foundation
import Gateway
import HomeMQTTApp
import HAP
import HomeModel
import Logging
import Simulator

/// Turns a config into the running parts. The only place that knows which sources exist;
/// the gateway sees them as one `AccessorySource`.
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
        case is ConfigError: exit = ExitCode(CLIError.Code.config.rawValue)
        default: exit = ExitCode(CLIError.Code.failure.rawValue)
        }
        let message = MaskedURL.maskingPasswords(in: "\(error)").split(whereSeparator: \.isNewline)
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }.joined(separator: " ")
        FileHandle.standardError.write(Data("homemqtt: \(message)\n".utf8))
        return exit
    }

    /// - Parameter deferred: load the simulator's files when its service runs (for `run`,
    ///   where SIGTERM must stop the load too) rather than now.
    static func makeSources(_ config: GatewayConfig, logger: Logger, deferred: Bool = false) throws
        -> [any AccessorySource]
    {
        var sources: [any AccessorySource] = []
        for source in config.sources {
            switch source {
            case .simulator(let directory):
                let url = URL(fileURLWithPath: directory)
                guard deferred else {
                    do {
                        sources.append(try SimulatedHome.load(directory: url))
                    } catch {
                        throw CLIError("\(error)", code: .config)
                    }
                    continue
                }
                sources.append(
                    DeferredSource(name: "simulator") { hub in
                        logger.info("loading accessory files", metadata: ["directory": "\(directory)"])
                        do {
                            return try SimulatedHome.load(directory: url, hub: hub) { warning in
                                logger.warning("accessory file", metadata: ["problem": "\(warning)"])
                            }
                        } catch {
                            throw CLIError("\(error)", code: .config)
                        }
                    })
            case .hap(let pollInterval):
                sources.append(
                    HAPSource(
                        store: pairingStore(config), logger: logger, pollInterval: pollInterval ?? config.pollInterval))
            }
        }
        return sources
    }

    static func source(_ config: GatewayConfig, logger: Logger) throws -> any AccessorySource {
        try sources(config, logger: logger).source
    }

    /// The gateway's source, and the HAP source among its parts (for pairing while running).
    static func sources(_ config: GatewayConfig, logger: Logger, deferred: Bool = false) throws -> (
        source: any AccessorySource, hap: HAPSource?
    ) {
        let sources = try makeSources(config, logger: logger, deferred: deferred)
        let hap = sources.lazy.compactMap { $0 as? HAPSource }.first
        return (sources.count == 1 ? sources[0] : CompositeSource(sources), hap)
    }

    /// The management operations the sources add to the gateway's own: HAP's pairing, answered
    /// `no-pairing-source` by a gateway without a HAP source. The running gateway and the CLI
    /// without it both list these.
    static let sourceOperations: [any ManagementOperation.Type] = HAPPairingOperations.all

    /// `<state-directory>/pairings`: where `homemqtt pair` and the hap source keep pairings.
    static func pairingStore(_ config: GatewayConfig) -> HAPPairingStore {
        HAPPairingStore(directory: URL(fileURLWithPath: config.stateDirectory).appendingPathComponent("pairings"))
    }

    static func openDatabase(_ config: GatewayConfig, exclusive: Bool) throws -> HomeDatabase {
        do {
            return try HomeDatabase(directory: URL(fileURLWithPath: config.stateDirectory), exclusive: exclusive)
        } catch {
            throw CLIError("\(config.stateDirectory): \(error.message)")
        }
    }

    static func logger(level: String) -> Logger {
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = Logger.Level(rawValue: level) ?? .info
            return handler
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
