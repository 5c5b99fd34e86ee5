import Foundation
import Gateway
import HomeMQTTApp
import HomeModel
import Logging
import MQTT
import ServiceLifecycle
import Simulator
import TestSupport
import XCTest

/// A gateway on the shipped simulated home (with a manual clock) over a `MemoryBroker`: the
/// fast tier, no broker process and no network. What it checks is what a client of the broker
/// sees; the live tier (`GatewayHarness`, the binary tests) checks the same against mosquitto.
struct InProcessGateway: Sendable {
    let broker: MemoryBroker
    let home: SimulatedHome
    let gateway: Gateway
    /// The gateway's own connection to `broker`.
    let transport: MemoryTransport
    /// Another client, subscribed to the whole base since before the gateway started.
    let observer: MemoryTransport
    let seen: MessageCollector
    let publisher: MemoryTransport

    /// Runs a gateway until `body` returns (or throws), then stops it as SIGTERM would, and
    /// returns when it has stopped.
    /// `outputs`: the gateway's outputs, the composition root's by default. `options`: the rest
    /// of what `HomeMQTTApp.build` takes (features, pairings, operations).
    static func run(
        configure: (inout GatewayConfig) -> Void = { _ in },
        outputs: (@Sendable (GatewayConfig) -> [any GatewayOutput])? = nil,
        options: HomeMQTTApp.Options = HomeMQTTApp.Options(),
        broker: MemoryBroker = MemoryBroker(),
        _ body: (InProcessGateway) async throws -> Void
    ) async throws {
        TestCensus.record(.memory)
        let state = try TemporaryDirectory(prefix: "homemqtt-inprocess")
        let home = try SimulatedHome.load(
            directory: repositoryRoot.appendingPathComponent("Config/accessories"), clock: .manual)
        var config = GatewayConfig(file: "test.yml", directory: repositoryRoot.appendingPathComponent("Config").path)
        config.mqtt.clientID = "gateway-under-test"
        config.stateDirectory = state.path
        config.pollInterval = 0
        config.requestTimeout = 2
        configure(&config)
        var logger = Logger(label: "test.inprocess")
        logger.logLevel = .warning

        // The composition root's gateway, as `homemqtt run` makes it, on a connection in memory.
        let transport = broker.transport(configuration: HomeMQTTApp.gatewayConnection(config))
        var options = options
        options.transport = { _, _ in transport }
        options.outputs = outputs ?? options.outputs
        let parts = try HomeMQTTApp.build(
            config: config, source: home, database: HomeDatabase(directory: URL(fileURLWithPath: state.path)),
            options: options, logger: logger)
        let gateway = parts.gateway
        let observer = broker.transport()
        let seen = MessageCollector(observer.messages())
        observer.connect()
        try await observer.subscribe("\(config.baseTopic)/#")
        let publisher = broker.transport()
        publisher.connect()
        let running = InProcessGateway(
            broker: broker, home: home, gateway: gateway, transport: transport, observer: observer, seen: seen,
            publisher: publisher)

        let statusTopic = "\(config.baseTopic)/$gateway/status"
        let group = ServiceGroup(configuration: .init(services: parts.services, logger: logger))
        try await withThrowingDiscardingTaskGroup { tasks in
            tasks.addTask { try await group.run() }
            do {
                try await seen.waitFor("online", timeout: 5) { $0.topic == statusTopic && $0.string == "online" }
                // Notifications are turned on just after `online`: a test's change made before
                // would be reported by the subscription, not as the change itself.
                let notifies = await gateway.tree.accessories.contains { accessory in
                    accessory.services.contains { service in
                        service.characteristics.contains { $0.characteristic.metadata.permissions.contains(.notify) }
                    }
                }
                if notifies {
                    try await waitUntil("notifications on", timeout: 5) { await !home.notificationsEnabled().isEmpty }
                }
                try await body(running)
            } catch {
                await group.triggerGracefulShutdown()
                throw error
            }
            await group.triggerGracefulShutdown()
        }
    }

    /// Publishes a request as another client would.
    func publish(_ topic: String, _ payload: String, retain: Bool = false) async throws {
        try await publisher.publish(topic, payload: Array(payload.utf8), qos: .atLeastOnce, retain: retain)
    }

    /// The first message on `topic` seen from now on whose text satisfies `predicate`.
    @discardableResult
    func next(
        _ topic: String, timeout: Double = 2, where predicate: @escaping @Sendable (String) -> Bool = { _ in true }
    ) async throws -> MQTTMessage {
        try await seen.waitFor(topic, timeout: timeout) { $0.topic == topic && predicate($0.string) }
    }

    /// Publishes `payload` to `topic` and returns the JSON answer on `answer`.
    func request(_ topic: String, _ payload: String, answer: String) async throws -> [String: JSONValue] {
        seen.clear()
        try await publish(topic, payload)
        let message = try await next(answer)
        return try XCTUnwrap(JSONValue(parsing: message.payload).objectValue, message.string)
    }
}
