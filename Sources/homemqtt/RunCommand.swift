import ArgumentParser
import Foundation
import Gateway
import HomeMQTTApp
import Logging
import MQTT
import ServiceLifecycle

// homemqtt run: the gateway as one service group until SIGTERM or SIGINT; start failures reported
// as check-config reports them.

struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run the gateway: keep the home and the broker in step until SIGTERM or SIGINT."
    )

    @OptionGroup var options: ConfigOptions

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical (default: the config's).")
    var logLevel: String?

    func run() async throws {
        let config: GatewayConfig
        do {
            config = try Setup.loadConfig(options)
        } catch {
            throw Setup.failure(error)
        }
        let logger = Setup.logger(level: logLevel ?? config.logLevel)
        logger.info(
            "homemqtt starting",
            metadata: [
                "config": "\(config.file)", "state-directory": "\(config.stateDirectory)",
                "base": "\(config.baseTopic)",
            ])
        do {
            let made = try Setup.sources(config, logger: logger, deferred: true)
            let database = try Setup.openDatabase(config, exclusive: true)
            let parts = try HomeMQTTApp.build(
                config: config, source: made.source, database: database,
                options: .init(pairings: made.pairings), logger: logger)
            // Every phase, from loading the files to serving, is a service of this one group:
            // SIGTERM or SIGINT stops whichever is running, and a stop that overruns is cancelled.
            var group = ServiceGroupConfiguration(
                services: parts.services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
            group.maximumGracefulShutdownDuration = .seconds(4)
            try await ServiceGroup(configuration: group).run()
        } catch is CancellationError {
            return
        } catch let error as MQTTError {
            // The broker refused (credentials, TLS): the same one line as a config error.
            throw Setup.failure(CLIError("broker: \(error)"))
        } catch {
            // An accessory file, the state directory, the scope: as check-config reports them.
            throw Setup.failure(error)
        }
    }
}
