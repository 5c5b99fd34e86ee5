import Foundation
import Synchronization
public import Gateway
public import HomeModel
import Homie
public import Logging
public import MQTT
public import ServiceLifecycle
import WebView

// The running parts, made in one place for `homemqtt run`, the bench and the tests: the gateway's
// MQTT client (its options and its last will), the gateway, and the outputs beside it, as the
// services of one group in the order it starts them.

extension HomeMQTTApp {
    public typealias ServiceConfiguration = ServiceGroupConfiguration.ServiceConfiguration

    /// A gateway ready to run.
    public struct Parts: Sendable {
        public let gateway: Gateway
        /// In start order: the gateway's MQTT client, the source, the gateway, then each enabled
        /// output. A `ServiceGroup` stops them in reverse: the outputs while the gateway still
        /// serves them, then the gateway (which queues `offline`), the source, and the client
        /// last, so `offline` goes out before DISCONNECT.
        public let services: [ServiceConfiguration]
    }

    /// What the caller decides beside the config file.
    public struct Options: Sendable {
        /// Pairing while running (`$gateway/request/pair`), when a source can pair.
        public var pairing: (any PairingManager)?
        /// The sources' own management operations, answered after the core ones.
        public var operations: [any ManagementOperation.Type]
        /// How many messages the first publication lets wait in the outbox (`Gateway.init`).
        public var publicationBacklog: Int
        /// Told the web view's port once it listens (`web.port` 0 picks a free one).
        public var webListening: @Sendable (Int) async -> Void
        /// The gateway's broker connection, made from its configuration: an `MQTTClient`, or a
        /// transport held in memory for the in-process tests.
        public var transport: @Sendable (MQTTConfiguration, Logger) -> any MQTTTransport
        /// The outputs on the gateway's connection; the config's (`outputs(for:)`) by default.
        public var outputs: @Sendable (GatewayConfig) -> [any GatewayOutput]

        public init(
            pairing: (any PairingManager)? = nil,
            operations: [any ManagementOperation.Type] = HomeMQTTApp.sourceOperations,
            publicationBacklog: Int = 20_000,
            webListening: @escaping @Sendable (Int) async -> Void = { _ in },
            transport: @escaping @Sendable (MQTTConfiguration, Logger) -> any MQTTTransport = { configuration, logger in
                MQTTClient(configuration: configuration, logger: logger)
            },
            outputs: @escaping @Sendable (GatewayConfig) -> [any GatewayOutput] = HomeMQTTApp.outputs(for:)
        ) {
            self.pairing = pairing
            self.operations = operations
            self.publicationBacklog = publicationBacklog
            self.webListening = webListening
            self.transport = transport
            self.outputs = outputs
        }
    }

    /// The gateway on `source` and `database`, with the outputs its config enables: the home on
    /// the gateway's base topic served by `Parts.gateway`, and every other home by a gateway of
    /// its own that `HomesService` starts and stops as homes come and go.
    public static func build(
        config: GatewayConfig, source: any AccessorySource, database: HomeDatabase, options: Options = Options(),
        logger: Logger
    ) throws(ConfigError) -> Parts {
        let base = database.view(homeID: database.baseHomeID)
        // Each home's gateway turns notifications on and off for its own accessories only.
        let shared = SharedSource(source)
        let (gateway, services) = try buildHome(
            config: config, source: shared.lease(0), database: base, options: options, outputs: serviceOutputs,
            logger: logger)
        let leases = Atomic<Int>(0)
        let homes = HomesService(database: base, logger: logger) { home throws(ConfigError) in
            var homeConfig = config.forHome(home)
            if let id = homeConfig[HomieConfig.self].deviceID {
                homeConfig[HomieConfig.self].deviceID = "\(id)-\(GatewayConfig.homeSuffix(home))"
            }
            // The source runs once, beside the first home's gateway; one web view serves.
            let lease = shared.lease(leases.add(1, ordering: .relaxed).newValue)
            let (gateway, services) = try buildHome(
                config: homeConfig, source: lease, database: database.view(homeID: home.id), options: options,
                outputs: [.homie], logger: logger)
            return HomesService.Made(gateway: gateway, services: services, release: { await lease.releaseAll() })
        }
        // In start order: the first home's client, the source, its gateway, the other homes
        // (stopped before the source they share), then the outputs.
        return Parts(
            gateway: gateway, services: Array(services.prefix(3)) + [.init(service: homes)] + services.dropFirst(3))
    }

    /// One home's gateway and its services: its client, the source, the gateway, its outputs.
    static func buildHome(
        config: GatewayConfig, source: any AccessorySource, database: HomeDatabase, options: Options,
        outputs serviceOutputs: [Output], logger: Logger
    ) throws(ConfigError) -> (Gateway, [ServiceConfiguration]) {
        var config = config
        config.mqtt = gatewayConnection(config)
        for output in serviceOutputs { output.prepare(config) }
        let state = URL(fileURLWithPath: config.stateDirectory)
        let gateway = try Gateway(
            config: config, source: source, database: database,
            mqtt: options.transport(config.mqtt, logger), scopeStore: ScopeStore(directory: state),
            pairing: options.pairing, operations: options.operations, publicationBacklog: options.publicationBacklog,
            ownedTopics: OwnedTopicsStore(config: config), outputs: options.outputs(config), logger: logger)
        let context = OutputContext(gateway: gateway, config: config, options: options, logger: logger)
        return (gateway, gateway.services + serviceOutputs.flatMap { $0.services(context) })
    }

    /// The gateway's connection: the options it needs (`GatewayConfig.applyGatewayOptions`) and
    /// its last will, `<base>/$gateway/status` = `offline`, retained — what a clean stop
    /// publishes itself.
    public static func gatewayConnection(_ config: GatewayConfig) -> MQTTConfiguration {
        var mqtt = config.mqtt
        GatewayConfig.applyGatewayOptions(&mqtt)
        mqtt.will = MQTTWill(
            topic: "\(config.baseTopic)/$gateway/status", payload: Array("offline".utf8), qos: .atLeastOnce,
            retain: true)
        return mqtt
    }

    // MARK: Outputs

    /// The outputs that run beside the gateway as services of its group, in start order (so
    /// stopped before it), with connections of their own. Each makes nothing when its section
    /// leaves it off. (Outputs on the gateway's own connection are `outputs(for:)`.)
    static let serviceOutputs: [Output] = [.homie, .web]

    /// What an output is made from.
    struct OutputContext {
        let gateway: Gateway
        let config: GatewayConfig
        let options: Options
        let logger: Logger
    }

    struct Output: Sendable {
        /// Runs before the gateway is made.
        var prepare: @Sendable (GatewayConfig) -> Void = { _ in }
        var services: @Sendable (OutputContext) -> [ServiceConfiguration]
    }
}

extension HomeMQTTApp.Output {
    /// Homie v5 on a second connection: a Homie root device's will is its own `$state`, and a
    /// connection has one will.
    static let homie = Self { context in
        let settings = context.config[HomieConfig.self]
        guard settings.enabled else { return [] }
        let mqtt = MQTTClient(
            configuration: HomieOutput.configuration(gateway: context.config.mqtt, homie: settings),
            logger: context.logger)
        let homie = HomieOutput(
            gateway: context.gateway, mqtt: mqtt, config: settings, clientID: context.config.mqtt.clientID,
            qos: context.config.qos, logger: context.logger)
        // Stopped before its client, so its `disconnected` goes out on the open connection.
        return [.init(service: mqtt), .init(service: homie)]
    }

    /// The web view. Its metrics exporter exists before the gateway, which takes its counters
    /// from the factory it bootstraps; without `web.enabled` nothing is bootstrapped, and
    /// counting costs nothing.
    static let web = Self(
        prepare: { config in if config[WebConfig.self].enabled { _ = WebMetrics.shared } },
        services: { context in
            let settings = context.config[WebConfig.self]
            guard settings.enabled else { return [] }
            return [
                .init(
                    service: WebView(
                        gateway: context.gateway, config: settings, access: context.config[AccessConfig.self],
                        logger: context.logger,
                        onListening: context.options.webListening))
            ]
        })
}
