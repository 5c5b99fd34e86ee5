import Foundation
import Synchronization
public import Gateway
public import HomeModel
public import Logging
public import MQTT
public import Metrics
public import ServiceLifecycle

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
        /// What pairs with the sources while running (`$gateway/request/pair`): `MadeSource`'s.
        public var pairings: [any PairingManager]
        /// The sources' own management operations, answered after the core ones.
        public var operations: [any ManagementOperation.Type]
        /// How many messages the first publication lets wait in the outbox (`Gateway.init`).
        public var publicationBacklog: Int
        /// Told the web view's port once it listens (`web.port` 0 picks a free one).
        public var webListening: @Sendable (Int) async -> Void
        /// The gateway's broker connection, made from its configuration: an `MQTTClient`, or a
        /// transport held in memory for the in-process tests.
        public var transport: @Sendable (MQTTConfiguration, Logger) -> any MQTTTransport
        /// The features whose outputs and services run (`HomeMQTTApp.extensions`); a test adds
        /// its own here, as the config it reads must (`parseConfig(extensions:)`).
        public var extensions: [any HomeMQTTExtension.Type]
        /// The outputs on the gateway's connection; by default the features' (`outputs(for:)`).
        public var outputs: (@Sendable (GatewayConfig) -> [any GatewayOutput])?
        /// What the gateway's timers read: the continuous clock, or a test's manual one.
        public var clock: GatewayClock
        /// Where the gateway's counters go: the process's `MetricsSystem` factory when nil (what
        /// `/metrics` exports), or a test's own exporter (`WebMetrics.separate()`), which then
        /// counts this gateway alone.
        public var metrics: (any MetricsFactory)? = nil

        public init(
            pairings: [any PairingManager] = [],
            operations: [any ManagementOperation.Type] = HomeMQTTApp.sourceOperations,
            publicationBacklog: Int = 20_000,
            webListening: @escaping @Sendable (Int) async -> Void = { _ in },
            transport: @escaping @Sendable (MQTTConfiguration, Logger) -> any MQTTTransport = { configuration, logger in
                MQTTClient(configuration: configuration, logger: logger)
            },
            extensions: [any HomeMQTTExtension.Type] = HomeMQTTApp.extensions,
            outputs: (@Sendable (GatewayConfig) -> [any GatewayOutput])? = nil,
            clock: GatewayClock = .continuous
        ) {
            self.clock = clock
            self.pairings = pairings
            self.operations = operations
            self.publicationBacklog = publicationBacklog
            self.webListening = webListening
            self.transport = transport
            self.extensions = extensions
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
            config: config, source: shared.lease(0), database: base, options: options, firstHome: true, logger: logger)
        let leases = Atomic<Int>(0)
        let homes = HomesService(database: base, logger: logger) { home throws(ConfigError) in
            var homeConfig = config.forHome(home)
            for feature in options.extensions { feature.adapt(&homeConfig, forHome: home) }
            // The source runs once, beside the first home's gateway; one web view serves.
            let lease = shared.lease(leases.add(1, ordering: .relaxed).newValue)
            let (gateway, services) = try buildHome(
                config: homeConfig, source: lease, database: database.view(homeID: home.id), options: options,
                firstHome: false, logger: logger)
            return HomesService.Made(gateway: gateway, services: services, release: { await lease.releaseAll() })
        }
        // In start order: the first home's client, the source, its gateway, the other homes
        // (stopped before the source they share), then the outputs.
        return Parts(
            gateway: gateway, services: Array(services.prefix(3)) + [.init(service: homes)] + services.dropFirst(3))
    }

    /// One home's gateway and its services: its client, the source, the gateway, its features'
    /// services (on a home other than the first, only the features that run per home).
    static func buildHome(
        config: GatewayConfig, source: any AccessorySource, database: HomeDatabase, options: Options,
        firstHome: Bool, logger: Logger
    ) throws(ConfigError) -> (Gateway, [ServiceConfiguration]) {
        var config = config
        config.mqtt = gatewayConnection(config)
        let features = options.extensions.filter { firstHome || $0.perHome }
        for feature in features { feature.prepare(in: config) }
        let state = URL(fileURLWithPath: config.stateDirectory)
        let outputs = options.outputs?(config) ?? HomeMQTTApp.outputs(for: config, extensions: features)
        let gateway = try Gateway(
            config: config, source: source, database: database,
            mqtt: options.transport(config.mqtt, logger), scopeStore: ScopeStore(directory: state),
            pairings: options.pairings, operations: options.operations, publicationBacklog: options.publicationBacklog,
            ownedTopics: OwnedTopicsStore(config: config), outputs: outputs, clock: options.clock,
            metrics: options.metrics, logger: logger)
        let home = HomeContext(
            gateway: gateway, database: database, config: config, logger: logger, webListening: options.webListening)
        return (gateway, gateway.services + features.flatMap { $0.services(in: home) })
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
}
