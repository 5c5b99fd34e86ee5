import Foundation
import Gateway
import HomeMQTTApp
import HomeModel
import Logging
import MQTT
import ServiceLifecycle
import Simulator
import Synchronization
import TestSupport
import XCTest

/// Where a contract test runs its gateway: the same gateway (the composition root's, on the
/// shipped simulated home with a manual clock) on a broker held in memory, or on a real
/// mosquitto. The contract suite runs each test on every enabled rig.
enum Rig: String, CaseIterable, Sendable, CustomStringConvertible {
    /// `MemoryBroker`: no process, no network; a test takes a fraction of a second.
    case memory
    /// A `MosquittoBroker` of its own, reached over TCP by `MQTTClient`s.
    case mosquitto
    /// mqttools' broker (`MQTToolsBroker`): MQTT 5 granting QoS 0 only, a broker of other limits
    /// than mosquitto's. Not among `enabled`: only a test of those limits asks for it
    /// (`Rig.qos0Only`).
    case mqttools

    /// The memory rig only, by default; both when `CI=true` or `HOMEMQTT_LIVE=1`.
    static var enabled: [Rig] {
        let environment = ProcessInfo.processInfo.environment
        let live = environment["CI"] == "true" || environment["HOMEMQTT_LIVE"] == "1"
        return live ? [.memory, .mosquitto] : [.memory]
    }

    /// The rigs for a broker that grants QoS 0 only: the memory broker so limited, and, when
    /// live, mqttools (mosquitto grants QoS 2).
    static var qos0Only: [Rig] { enabled.count > 1 ? [.memory, .mqttools] : [.memory] }

    var description: String { rawValue }

    /// The kind the census counts a test on this rig as.
    var census: TestCensus.Kind {
        switch self {
        case .memory: .memory
        case .mosquitto: .mosquitto
        case .mqttools: .mqttools
        }
    }

    /// How a test's broker is set up, the same on every rig: mosquitto is configured so, and the
    /// memory broker given the limits mosquitto's CONNACK then announces.
    struct BrokerSetup: Sendable {
        /// mosquitto's `max_packet_size`: an MQTT 5 client is told it in the CONNACK, and a
        /// client that sends a larger packet is disconnected (the gateway sends one only under
        /// MQTT 3.1.1 without `broker.max-packet-size`, and learns the limit from it).
        var maximumPacketSize: Int? = nil

        /// mosquitto's `message_size_limit`: the largest payload taken, told to no client; a
        /// larger one is dropped, answered "packet too large" at QoS 1/2 under MQTT 5.
        var messageSizeLimit: Int? = nil

        /// The broker's Maximum QoS. Only the memory broker is set so: mqttools grants 0 of itself,
        /// and a mosquitto rig is never asked for less than 2.
        var maximumQoS: MQTTQoS = .exactlyOnce

        /// mosquitto's configuration lines for this setup.
        var mosquittoConfiguration: [String] {
            (maximumPacketSize.map { ["max_packet_size \($0)"] } ?? [])
                + (messageSizeLimit.map { ["message_size_limit \($0)"] } ?? [])
        }

        /// What mosquitto so configured announces to an MQTT 5 client, as the memory broker's limits.
        var memoryLimits: MQTTBrokerLimits {
            var limits = MQTTBrokerLimits()
            limits.brokerMaximumPacketSize = maximumPacketSize
            limits.maximumQoS = maximumQoS
            return limits
        }
    }

    /// The shipped simulated home's accessory files.
    static let shippedAccessories = repositoryRoot.appendingPathComponent("Config/accessories")

    /// Starts a gateway on this rig and returns once it said `online` and turned its
    /// notifications on. `before` publishes (as another client, e.g. retained messages an
    /// earlier run left) before the gateway starts. `operations`: the source operations the
    /// gateway serves, the composition root's (as `homemqtt run` has) by default. `accessories`:
    /// the simulated home's directory of accessory files, the shipped one by default. `broker`:
    /// how the broker is set up. `timeout`: how long the gateway may take to say `online`. `clock`: what
    /// the gateway's timers read.
    func start(
        broker setup: BrokerSetup = BrokerSetup(),
        timeout: Double = 10,
        configure: (inout GatewayConfig) -> Void = { _ in },
        operations: [any ManagementOperation.Type] = HomeMQTTApp.sourceOperations,
        accessories: URL = Rig.shippedAccessories,
        clock: GatewayClock = .continuous,
        before: (any MQTTTransport) async throws -> Void = { _ in }
    ) async throws -> RiggedGateway {
        let broker: RiggedGateway.Broker
        let publisher: any MQTTTransport
        TestCensus.record(census)
        switch self {
        case .memory:
            let memory = MemoryBroker(limits: setup.memoryLimits, messageSizeLimit: setup.messageSizeLimit)
            broker = .memory(memory)
            let transport = memory.transport()
            transport.connect()
            publisher = transport
        case .mosquitto:
            // With no limit on the messages queued for a client, as the memory broker: by default
            // mosquitto drops what exceeds 1,000 queued for a client that is slow to take them (a
            // test's subscriber, or the gateway, on a loaded machine). The burst test lost requests
            // so, about 1 run in 3 under load ("Outgoing messages are being dropped for client
            // gateway-under-test"): never seen by the gateway, never answered. Not 0, mosquitto's
            // "no limit": 2.0.11 holds a client's queue against it when it refuses a publish
            // (handle_publish.c, `out_packet_count >= max_queued_messages`, fixed later with a
            // `> 0`) and drops a client that `message_size_limit` refused as over its quota.
            let mosquitto = try await MosquittoBroker.start(
                .init(extraConfiguration: ["max_queued_messages 100000000"] + setup.mosquittoConfiguration))
            broker = .mosquitto(mosquitto)
            let client = MQTTClient(configuration: mosquitto.clientConfiguration(clientID: "test-publisher"))
            do {
                try await client.connect()
            } catch {
                await mosquitto.stop()
                throw error
            }
            publisher = client
        case .mqttools:
            precondition(
                setup.maximumPacketSize == nil && setup.messageSizeLimit == nil && setup.maximumQoS == .atMostOnce,
                "mqttools grants QoS 0")
            let mqttools = try await MQTToolsBroker.start()
            broker = .mqttools(mqttools)
            let client = MQTTClient(
                configuration: RiggedGateway.Broker.mqttools(mqttools).configuration("test-publisher"))
            do {
                try await client.connect()
            } catch {
                await mqttools.stop()
                throw error
            }
            publisher = client
        }
        do {
            try await before(publisher)
            return try await RiggedGateway.start(
                rig: self, broker: broker, publisher: publisher, timeout: timeout, configure: configure,
                operations: operations, accessories: accessories, clock: clock)
        } catch {
            await broker.close(publisher)
            throw error
        }
    }
}

/// A gateway running on a `Rig`, with another client (`seen`) subscribed to the whole base topic
/// since before the gateway started, and a publisher for requests.
final class RiggedGateway: Sendable {
    enum Broker: Sendable {
        case memory(MemoryBroker)
        case mosquitto(MosquittoBroker)
        case mqttools(MQTToolsBroker)

        /// A client configuration for the broker over TCP (the default one for the memory
        /// broker), with mosquitto's test timeouts.
        func configuration(_ clientID: String?) -> MQTTConfiguration {
            switch self {
            case .memory: return MQTTConfiguration()
            case .mosquitto(let broker): return broker.clientConfiguration(clientID: clientID)
            case .mqttools(let broker):
                var configuration = MQTTConfiguration(host: "127.0.0.1", port: broker.port)
                if let clientID { configuration.clientID = clientID }
                configuration.connectTimeout = 5
                configuration.reconnectDelayMin = 0.2
                configuration.reconnectDelayMax = 2
                return configuration
            }
        }

        /// A new client of the broker, connected, speaking `version`.
        func client(_ name: String, version: MQTTProtocolVersion = .v5) async throws -> any MQTTTransport {
            switch self {
            case .memory(let broker):
                var configuration = MQTTConfiguration()
                configuration.protocolVersion = version
                let transport = broker.transport(configuration: configuration)
                transport.connect()
                return transport
            case .mosquitto, .mqttools:
                var configuration = configuration("\(name)-\(UUID().uuidString.prefix(8))")
                configuration.protocolVersion = version
                let client = MQTTClient(configuration: configuration)
                try await client.connect()
                return client
            }
        }

        /// Disconnects `client` (which finishes its message streams).
        func disconnect(_ client: any MQTTTransport) async {
            if let client = client as? MQTTClient {
                await client.disconnect()
            } else if let transport = client as? MemoryTransport {
                transport.disconnect()
            }
        }

        /// Disconnects `client` and stops the broker.
        func close(_ client: any MQTTTransport) async {
            await disconnect(client)
            switch self {
            case .memory: break
            case .mosquitto(let broker): await broker.stop()
            case .mqttools(let broker): await broker.stop()
            }
        }
    }

    let rig: Rig
    let broker: Broker
    let home: SimulatedHome
    let database: HomeDatabase
    let gateway: Gateway
    /// The gateway's own connection to the broker.
    let transport: any MQTTTransport
    /// Another client, for requests.
    let publisher: any MQTTTransport
    /// What a client subscribed to `<base>/#` since before the gateway started saw, in order.
    let seen: MessageCollector
    /// What the gateway logged, from `info` up.
    let log: LogLines
    private let observer: any MQTTTransport
    private let group: ServiceGroup
    private let runner: Task<Void, any Error>
    /// The gateway's state directory (its home database, the stored scope).
    let state: TemporaryDirectory
    private let stopped = Mutex(false)

    fileprivate static func start(
        rig: Rig, broker: Broker, publisher: any MQTTTransport, timeout: Double,
        configure: (inout GatewayConfig) -> Void,
        operations: [any ManagementOperation.Type], accessories: URL, clock: GatewayClock
    ) async throws -> RiggedGateway {
        let state = try TemporaryDirectory(prefix: "homemqtt-rig-\(rig)")
        let home = try SimulatedHome.load(directory: accessories, clock: .manual)
        var config = GatewayConfig(file: "test.yml", directory: repositoryRoot.appendingPathComponent("Config").path)
        if case .memory = broker {} else { config.mqtt = broker.configuration(nil) }
        config.mqtt.clientID = "gateway-under-test"
        config.stateDirectory = state.path
        config.pollInterval = 0
        config.requestTimeout = 2
        configure(&config)
        let database = try HomeDatabase(directory: URL(fileURLWithPath: state.path))
        let log = LogLines()
        let logger = log.logger("test.rig.\(rig)")

        // The composition root's gateway, as `homemqtt run` makes it, on the rig's connection.
        let made = Mutex<(any MQTTTransport)?>(nil)
        let connection: @Sendable (MQTTConfiguration, Logger) -> any MQTTTransport = { configuration, logger in
            let transport: any MQTTTransport =
                switch broker {
                case .memory(let memory): memory.transport(configuration: configuration)
                case .mosquitto, .mqttools: MQTTClient(configuration: configuration, logger: logger)
                }
            made.withLock { $0 = $0 ?? transport }
            return transport
        }
        // Far below the shipped home's few hundred retained topics, so that every test starts
        // through the paced first publication.
        let parts = try HomeMQTTApp.build(
            config: config, source: home, database: database,
            options: .init(operations: operations, publicationBacklog: 16, transport: connection, clock: clock),
            logger: logger)
        let transport = try XCTUnwrap(made.withLock { $0 }, "the gateway made no connection")

        let observer = try await broker.client("test-observer")
        let seen = MessageCollector(observer.messages())
        try await observer.subscribe("\(config.baseTopic)/#", qos: .exactlyOnce)
        let group = ServiceGroup(configuration: .init(services: parts.services, logger: logger))
        let runner = Task { try await group.run() }
        let running = RiggedGateway(
            rig: rig, broker: broker, home: home, database: database, gateway: parts.gateway, transport: transport,
            publisher: publisher, seen: seen, log: log, observer: observer, group: group, runner: runner, state: state)
        do {
            let statusTopic = "\(config.baseTopic)/$gateway/status"
            try await seen.waitFor("online", timeout: timeout) { $0.topic == statusTopic && $0.string == "online" }
            // Notifications are turned on just after `online`: a test's change made before
            // would be reported by the subscription, not as the change itself.
            let notifies = await parts.gateway.tree.accessories.contains { accessory in
                accessory.services.contains { service in
                    service.characteristics.contains { $0.characteristic.metadata.permissions.contains(.notify) }
                }
            }
            if notifies {
                try await waitUntil("notifications on", timeout: 5) { await !home.notificationsEnabled().isEmpty }
            }
        } catch {
            await running.stop()
            throw error
        }
        return running
    }

    private init(
        rig: Rig, broker: Broker, home: SimulatedHome, database: HomeDatabase, gateway: Gateway,
        transport: any MQTTTransport, publisher: any MQTTTransport, seen: MessageCollector, log: LogLines,
        observer: any MQTTTransport, group: ServiceGroup, runner: Task<Void, any Error>, state: TemporaryDirectory
    ) {
        (self.rig, self.broker, self.home, self.database, self.gateway) = (rig, broker, home, database, gateway)
        (self.transport, self.publisher, self.seen, self.observer) = (transport, publisher, seen, observer)
        (self.group, self.runner, self.state, self.log) = (group, runner, state, log)
    }

    /// Stops the gateway as SIGTERM would (a graceful shutdown of its service group) and returns
    /// when it has stopped; the broker and the test's clients stay, to look at what it left.
    /// Returns what the gateway's services threw, if anything: nil is a clean stop.
    @discardableResult
    func stopGateway() async -> (any Error)? {
        await group.triggerGracefulShutdown()
        if case .failure(let error) = await runner.result { return error }
        return nil
    }

    /// Stops the gateway, the test's clients and the broker. Safe to call again.
    func stop() async {
        guard
            stopped.withLock({ done in
                defer { done = true }; return !done
            })
        else { return }
        await stopGateway()
        await broker.disconnect(observer)
        await seen.cancel()
        await broker.close(publisher)
    }

    // MARK: Talking to the gateway

    /// Publishes as another client would.
    func publish(
        _ topic: String, _ payload: String, qos: MQTTQoS = .atLeastOnce, retain: Bool = false,
        properties: MQTTPublishProperties = .init()
    ) async throws {
        try await publisher.publish(
            topic, payload: Array(payload.utf8), qos: qos, retain: retain, properties: properties)
    }

    /// The first message on `topic` seen from now on (since the last `seen.clear()`) whose text
    /// satisfies `predicate`.
    @discardableResult
    func next(
        _ topic: String, timeout: Double = 10, where predicate: @escaping @Sendable (String) -> Bool = { _ in true }
    ) async throws -> MQTTMessage {
        try await seen.waitFor("\(topic) on the \(rig) rig", timeout: timeout) {
            $0.topic == topic && predicate($0.string)
        }
    }

    /// Publishes `payload` to `topic` and returns the JSON answer on `answer`.
    func request(_ topic: String, _ payload: String, answer: String) async throws -> [String: JSONValue] {
        seen.clear()
        try await publish(topic, payload)
        let message = try await next(answer)
        return try XCTUnwrap(JSONValue(parsing: message.payload).objectValue, "\(rig): \(message.string)")
    }

    /// Another client subscribed to `filter` (the subscription confirmed), collecting what it
    /// receives; `close` disconnects it. `version`: the MQTT it speaks.
    func subscriber(
        _ filter: String, version: MQTTProtocolVersion = .v5
    ) async throws -> (seen: MessageCollector, close: @Sendable () async -> Void) {
        let client = try await broker.client("test-subscriber", version: version)
        let seen = MessageCollector(client.messages())
        try await client.subscribe(filter, qos: .exactlyOnce)
        let broker = self.broker
        return (
            seen,
            {
                await broker.disconnect(client); await seen.cancel()
            }
        )
    }

    // MARK: The broker

    /// Every retained message the broker holds under `filter` now, as a new subscriber gets it.
    /// On mosquitto, ordered by a marker: a subscription's retained messages come before
    /// anything published after it on the same connection.
    func retainedMessages(_ filter: String = "home/#") async throws -> [String: MQTTMessage] {
        switch broker {
        case .memory(let memory):
            return memory.retained.filter { MemoryBroker.topic($0.key, matches: filter) }
        case .mosquitto, .mqttools:
            let marker = "homemqtt-test/snapshot/\(UUID().uuidString)"
            let reader = try await broker.client("snapshot")
            let received = MessageCollector(reader.messages())
            do {
                try await reader.subscribe([(marker, .atLeastOnce), (filter, .atLeastOnce)], ownMessages: true)
                try await reader.publish(marker, payload: Array("end".utf8), qos: .atLeastOnce)
                try await received.waitFor("the snapshot's marker", timeout: 20) { $0.topic == marker }
            } catch {
                await broker.disconnect(reader)
                await received.cancel()
                throw error
            }
            await broker.disconnect(reader)
            await received.cancel()
            var out: [String: MQTTMessage] = [:]
            for message in received.elements where message.retain && !message.payload.isEmpty {
                if message.topic != marker { out[message.topic] = message }
            }
            return out
        }
    }

    /// The retained payloads under `filter`, as text, by topic.
    func retained(_ filter: String = "home/#") async throws -> [String: String] {
        try await retainedMessages(filter).mapValues(\.string)
    }

    /// What the broker logged about messages it dropped for a slow client (mosquitto says so at
    /// `notice`); the memory broker drops nothing.
    var brokerDrops: [String] {
        guard case .mosquitto(let mosquitto) = broker else { return [] }
        return mosquitto.log.split(separator: "\n").filter { $0.contains("dropped") }.map(String.init)
    }

    /// How many times the client `clientID` (the rig's gateway by default) connected to the
    /// broker: from mosquitto's log, or as the memory broker counted.
    func connections(of clientID: String = "gateway-under-test") -> Int {
        switch broker {
        case .memory(let memory): return memory.connections(of: clientID)
        case .mosquitto(let mosquitto): return mosquitto.log.components(separatedBy: " as \(clientID) ").count - 1
        case .mqttools:
            XCTFail("mqttools logs no connections")
            return 0
        }
    }

    /// mosquitto's log so far, for a failure's message; nothing for the other brokers.
    var brokerLog: String {
        guard case .mosquitto(let mosquitto) = broker else { return "" }
        return mosquitto.log
    }

    /// Connections the broker closed itself (mosquitto logs "disconnected due to" a protocol
    /// error, a packet too large, …); the memory broker's are the ones a test made it lose.
    var connectionsDropped: [String] {
        switch broker {
        case .memory(let memory): memory.dropped
        case .mosquitto(let mosquitto):
            mosquitto.log.split(separator: "\n").filter { $0.contains("disconnected due to") }.map(String.init)
        case .mqttools: []
        }
    }

    /// The broker goes away and comes back without its retained messages, as a mosquitto without
    /// persistence restarts. In memory: every client's connection is lost (the gateway's will
    /// goes out), the retained messages are forgotten, and the clients connect again.
    func restartBroker() async throws {
        switch broker {
        case .mosquitto(let mosquitto):
            try await mosquitto.restart()
        case .mqttools:
            XCTFail("the mqttools rig cannot restart its broker")
        case .memory(let memory):
            let clients = [transport, observer, publisher].compactMap { $0 as? MemoryTransport }
            for client in clients { client.loseConnection() }
            for topic in memory.retained.keys { memory.setRetained(topic, []) }
            for client in clients { client.connect() }
        }
    }

    /// The accessory id of the first accessory named `name`.
    func accessoryID(named name: String) async throws -> String {
        let accessories = await home.accessories()
        return try XCTUnwrap(accessories.first { $0.name == name }?.id, "no accessory \(name) on the \(rig) rig")
    }

    // MARK: Another gateway

    /// Another gateway of the composition root on this rig's broker, as a second `homemqtt run`
    /// would be: on the shipped simulated home, with the state directory `state`, client id
    /// `clientID` and what `configure` sets. Returns once it said `online` (live, not retained) on
    /// its base's status topic.
    func another(
        clientID: String, state: TemporaryDirectory, accessories: URL = Rig.shippedAccessories,
        configure: (inout GatewayConfig) -> Void = { _ in }
    ) async throws -> OtherGateway {
        TestCensus.record(rig.census)
        let home = try SimulatedHome.load(directory: accessories, clock: .manual)
        var config = GatewayConfig(file: "test.yml", directory: repositoryRoot.appendingPathComponent("Config").path)
        if case .memory = broker {} else { config.mqtt = broker.configuration(nil) }
        config.mqtt.clientID = clientID
        config.stateDirectory = state.path
        config.pollInterval = 0
        config.requestTimeout = 2
        configure(&config)
        let log = LogLines()
        let logger = log.logger("test.rig.\(rig).\(clientID)")
        let broker = broker
        let connection: @Sendable (MQTTConfiguration, Logger) -> any MQTTTransport = { configuration, logger in
            switch broker {
            case .memory(let memory): memory.transport(configuration: configuration)
            case .mosquitto, .mqttools: MQTTClient(configuration: configuration, logger: logger)
            }
        }
        let parts = try HomeMQTTApp.build(
            config: config, source: home, database: try HomeDatabase(directory: state.url),
            options: .init(transport: connection), logger: logger)
        let watcher = try await broker.client("other-watcher")
        let statuses = MessageCollector(watcher.messages())
        try await watcher.subscribe("\(config.baseTopic)/$gateway/status", qos: .exactlyOnce)
        let group = ServiceGroup(configuration: .init(services: parts.services, logger: logger))
        let runner = Task { try await group.run() }
        let other = OtherGateway(group: group, runner: runner, log: log)
        var failure: (any Error)?
        do {
            try await statuses.waitFor("\(clientID) online") { !$0.retain && $0.string == "online" }
        } catch {
            failure = error
        }
        await broker.disconnect(watcher)
        await statuses.cancel()
        if let failure {
            await other.stop()
            throw failure
        }
        return other
    }
}

/// A gateway started by `RiggedGateway.another`.
struct OtherGateway: Sendable {
    let group: ServiceGroup
    let runner: Task<Void, any Error>
    /// What it logged, from `info` up.
    let log: LogLines

    /// Stops it as SIGTERM would and returns when it has stopped, with what its services threw
    /// (nil: a clean stop).
    @discardableResult
    func stop() async -> (any Error)? {
        await group.triggerGracefulShutdown()
        if case .failure(let error) = await runner.result { return error }
        return nil
    }
}

/// A rig gateway's log: every line from `info` up kept (`level message key=value…`), as a test
/// reads the binary's; warnings and errors go to standard error as well.
final class LogLines: Sendable {
    private let lines = Mutex<[String]>([])

    /// Everything logged so far, a line each.
    var text: String { lines.withLock { $0.joined(separator: "\n") } }

    func logger(_ label: String) -> Logger {
        let stderr = StreamLogHandler.standardError(label: label)
        var logger = Logger(label: label) { _ in Handler(lines: self, stderr: stderr) }
        logger.logLevel = .info
        return logger
    }

    fileprivate func append(_ line: String) { lines.withLock { $0.append(line) } }

    private struct Handler: LogHandler {
        let lines: LogLines
        var stderr: StreamLogHandler
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .info

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let fields = metadata.merging(event.metadata ?? [:]) { $1 }.sorted { $0.key < $1.key }
            lines.append(
                "\(event.level) \(event.message) " + fields.map { "\($0.key)=\($0.value)" }.joined(separator: " "))
            if event.level >= .warning { stderr.log(event: event) }
        }
    }
}

/// A test case whose tests run on every enabled rig: `onEveryRig` runs its body once per rig on
/// a gateway of its own, and every failure recorded meanwhile names the rig.
class RigTestCase: XCTestCase {
    private let current = Mutex<Rig?>(nil)

    /// Runs `body` on a gateway started on each of `rigs` in turn; the gateway is stopped after
    /// the body returns or throws. What the body throws is recorded as a failure on its rig, and
    /// the next rig still runs.
    func onEveryRig(
        _ rigs: [Rig] = Rig.enabled,
        broker setup: Rig.BrokerSetup = Rig.BrokerSetup(),
        timeout: Double = 10,
        configure: (inout GatewayConfig) -> Void = { _ in },
        operations: [any ManagementOperation.Type] = HomeMQTTApp.sourceOperations,
        accessories: URL = Rig.shippedAccessories,
        clock: GatewayClock = .continuous,
        before: (any MQTTTransport) async throws -> Void = { _ in },
        file: StaticString = #filePath, line: UInt = #line,
        _ body: (RiggedGateway) async throws -> Void
    ) async {
        XCTAssertFalse(rigs.isEmpty, "no rig to run on", file: file, line: line)
        for rig in rigs {
            current.withLock { $0 = rig }
            defer { current.withLock { $0 = nil } }
            do {
                let gw = try await rig.start(
                    broker: setup, timeout: timeout, configure: configure, operations: operations,
                    accessories: accessories, clock: clock, before: before)
                do {
                    try await body(gw)
                } catch {
                    await gw.stop()
                    throw error
                }
                await gw.stop()
            } catch {
                XCTFail("threw \(error)", file: file, line: line)
            }
        }
    }

    #if canImport(Darwin)
        override func record(_ issue: XCTIssue) {
            var issue = issue
            if let rig = current.withLock({ $0 }) {
                issue.compactDescription = "[\(rig) rig] \(issue.compactDescription)"
            }
            super.record(issue)
        }
    #else
        override func recordFailure(
            withDescription description: String, inFile filePath: String, atLine lineNumber: Int, expected: Bool
        ) {
            let rig = current.withLock { $0 }
            super.recordFailure(
                withDescription: rig.map { "[\($0) rig] \(description)" } ?? description, inFile: filePath,
                atLine: lineNumber, expected: expected)
        }
    #endif
}
