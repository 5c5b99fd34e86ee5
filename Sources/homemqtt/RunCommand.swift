import ArgumentParser
import Foundation
import Gateway
import HomeModel
import Homie
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
        var config: GatewayConfig
        do {
            config = try Setup.loadConfig(options)
        } catch {
            throw Setup.failure(error)
        }
        let logger = Setup.logger(level: logLevel ?? config.logLevel)
        config.mqtt.will = MQTTWill(
            topic: "\(config.baseTopic)/$gateway/status", payload: Array("offline".utf8), qos: .atLeastOnce,
            retain: true)
        logger.info(
            "homemqtt starting",
            metadata: [
                "config": "\(config.file)", "state-directory": "\(config.stateDirectory)",
                "base": "\(config.baseTopic)",
            ])
        do {
            let (source, hap) = try Setup.sources(config, logger: logger, deferred: true)
            let database = try Setup.openDatabase(config, exclusive: true)
            let mqtt = MQTTClient(configuration: config.mqtt, logger: logger)
            WebSetup.prepare(config)
            let gateway = try Gateway(
                config: config, source: source, database: database, mqtt: mqtt,
                scopeStore: ScopeStore(directory: URL(fileURLWithPath: config.stateDirectory)),
                pairing: hap.map { HAPPairingManager(source: $0, logger: logger) },
                ownedTopics: OwnedTopicsStore(config: config), logger: logger)
            // Every phase, from loading the files to serving, is a service of this one group:
            // SIGTERM or SIGINT stops whichever is running, and a stop that overruns is cancelled.
            var services = gateway.services
            if config[HomieConfig.self].enabled {
                // A second connection: a Homie root device's will is its own `$state`.
                let homieMQTT = MQTTClient(
                    configuration: HomieOutput.configuration(gateway: config.mqtt, homie: config[HomieConfig.self]),
                    logger: logger)
                let homie = HomieOutput(
                    gateway: gateway, mqtt: homieMQTT, config: config[HomieConfig.self], clientID: config.mqtt.clientID,
                    qos: config.qos, logger: logger)
                // Stopped before its client, so its `disconnected` goes out on the open connection.
                services += [.init(service: homieMQTT), .init(service: homie)]
            }
            if let web = WebSetup.service(gateway: gateway, config: config, logger: logger) {
                services.append(web)
            }
            var group = ServiceGroupConfiguration(
                services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
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
