import ArgumentParser
import Foundation
import Gateway
import HomeModel
import Logging
import MQTT
import ServiceLifecycle

struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run the gateway: keep the home and the broker in step until SIGTERM or SIGINT."
    )

    @OptionGroup var options: ConfigOptions

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical (default: the config's).")
    var logLevel: String?

    func run() async throws {
        var config: GatewayConfig
        do {
            config = try Setup.loadConfig(options)
        } catch let error as CLIError {
            FileHandle.standardError.write(Data("homemqtt: \(error.description)\n".utf8))
            throw ExitCode(2)
        }
        let logger = Setup.logger(level: logLevel ?? config.logLevel)
        config.mqtt.will = MQTTWill(topic: "\(config.baseTopic)/$gateway/status", payload: Array("offline".utf8), qos: .atLeastOnce, retain: true)
        logger.info("homemqtt starting", metadata: [
            "config": "\(config.file)", "state-directory": "\(config.stateDirectory)", "base": "\(config.baseTopic)",
        ])
        do {
            let (source, hap) = try Setup.sources(config, logger: logger, deferred: true)
            let database = try Setup.openDatabase(config, exclusive: true)
            let mqtt = MQTTClient(configuration: config.mqtt, logger: logger)
            let gateway = try Gateway(
                config: config, source: source, database: database, mqtt: mqtt,
                scopeStore: ScopeStore(directory: URL(fileURLWithPath: config.stateDirectory)),
                pairing: hap.map { HAPPairingManager(source: $0, logger: logger) }, logger: logger)
            // Every phase, from loading the files to serving, is a service of this one group:
            // SIGTERM or SIGINT stops whichever is running, and a stop that overruns is cancelled.
            var group = ServiceGroupConfiguration(
                services: gateway.services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
            group.maximumGracefulShutdownDuration = .seconds(4)
            try await ServiceGroup(configuration: group).run()
        } catch let error as CLIError {
            logger.error("\(error.description)")
            throw ExitCode(1)
        } catch let error as ConfigError {
            logger.error("\(error.description)")
            throw ExitCode(2)
        } catch is CancellationError {
            return
        } catch let error as MQTTError {
            logger.error("broker: \(error)")
            throw ExitCode(1)
        }
    }
}
