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

/// The repository's root, from this file's place in it.
let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

/// A gateway running in this process on the shipped simulated home (with a manual clock),
/// against a real mosquitto, with a subscriber on the whole base topic. Only for what needs a
/// broker process of its own (`BrokerRestartTests` restarts it, with persistence, under load);
/// every other suite runs on a `Rig` (`GatewayRig.swift`): the memory broker by default.
final class GatewayHarness: @unchecked Sendable {
    let broker: MosquittoBroker
    let home: SimulatedHome
    let database: HomeDatabase
    let gateway: Gateway
    let group: ServiceGroup
    let runner: Task<Void, any Error>
    let observer: MQTTTestSubscriber
    let publisher: MQTTClient
    let state: TemporaryDirectory

    static func start(
        broker existing: MosquittoBroker? = nil,
        configure: (inout GatewayConfig) -> Void = { _ in },
        operations: [any ManagementOperation.Type] = [],
        before: (MosquittoBroker, MQTTClient) async throws -> Void = { _, _ in }
    ) async throws -> GatewayHarness {
        TestCensus.record(.mosquitto)
        let broker: MosquittoBroker
        if let existing {
            broker = existing
        } else {
            broker = try await MosquittoBroker.start()
        }
        let state = try TemporaryDirectory(prefix: "homemqtt-gw-state")
        let home = try SimulatedHome.load(
            directory: repositoryRoot.appendingPathComponent("Config/accessories"), clock: .manual)
        var config = GatewayConfig(file: "test.yml", directory: repositoryRoot.appendingPathComponent("Config").path)
        config.mqtt = broker.clientConfiguration(clientID: "gateway-under-test")
        config.stateDirectory = state.path
        config.pollInterval = 0
        config.requestTimeout = 2
        configure(&config)
        let database = try HomeDatabase(directory: URL(fileURLWithPath: state.path))
        var logger = Logger(label: "test.gateway")
        logger.logLevel = .warning
        // Far below the shipped home's few hundred retained topics, so
        // that every test starts through the paced first publication.
        let parts = try HomeMQTTApp.build(
            config: config, source: home, database: database,
            options: .init(operations: operations, publicationBacklog: 16), logger: logger)
        let gateway = parts.gateway
        let publisher = MQTTClient(configuration: broker.clientConfiguration(clientID: "test-publisher"))
        try await publisher.connect()
        try await before(broker, publisher)
        let observer = try await MQTTTestSubscriber.start(
            broker: broker, filter: "\(config.baseTopic)/#", clientID: "test-observer")
        let group = ServiceGroup(configuration: .init(services: parts.services, logger: logger))
        let runner = Task { try await group.run() }
        let harness = GatewayHarness(
            broker: broker, home: home, database: database, gateway: gateway, group: group,
            runner: runner, observer: observer, publisher: publisher, state: state)
        let statusTopic = "\(config.baseTopic)/$gateway/status"
        try await observer.waitForMessage("gateway online", where: { $0.topic == statusTopic && $0.string == "online" })
        return harness
    }

    private init(
        broker: MosquittoBroker, home: SimulatedHome, database: HomeDatabase, gateway: Gateway, group: ServiceGroup,
        runner: Task<Void, any Error>, observer: MQTTTestSubscriber, publisher: MQTTClient, state: TemporaryDirectory
    ) {
        self.broker = broker
        self.home = home
        self.database = database
        self.gateway = gateway
        self.group = group
        self.runner = runner
        self.observer = observer
        self.publisher = publisher
        self.state = state
    }

    func stop() async {
        await group.triggerGracefulShutdown()
        _ = await runner.result
        await observer.stop()
        await publisher.disconnect()
        await broker.stop()
    }

    func publish(_ topic: String, _ payload: String, retain: Bool = false) async throws {
        try await publisher.publish(topic, payload: Array(payload.utf8), qos: .atLeastOnce, retain: retain)
    }

    /// The next message on `topic` after now whose payload satisfies `predicate`.
    @discardableResult
    func next(
        _ topic: String, timeout: Double = 10, where predicate: @escaping @Sendable (String) -> Bool = { _ in true }
    ) async throws -> MQTTMessage {
        try await observer.waitForMessage(topic, timeout: timeout) { $0.topic == topic && predicate($0.string) }
    }

    /// Publishes to `topic` and returns the parsed JSON answer on `answer`.
    func request(_ topic: String, _ payload: String, answer: String) async throws -> [String: JSONValue] {
        observer.clear()
        try await publish(topic, payload)
        let message = try await next(answer)
        return try XCTUnwrap(JSONValue(parsing: message.payload).objectValue)
    }

    /// Every retained topic the broker holds under `filter` now, read by a fresh subscriber.
    func retainedOnBroker(_ filter: String = "home/#") async throws -> [String: String] {
        // Ordered by a marker, not a settle time (a busy machine delivered retained messages
        // after 0.2 s: RequestAPITests saw a retained request as gone).
        try await broker.retainedSnapshot(filter)
    }

    /// The accessory id of the first accessory named `name`.
    func accessoryID(named name: String) async throws -> String {
        let accessories = await home.accessories()
        return try XCTUnwrap(accessories.first { $0.name == name }?.id, "no accessory \(name)")
    }
}
