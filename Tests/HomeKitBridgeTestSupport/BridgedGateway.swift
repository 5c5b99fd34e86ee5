public import Foundation
public import Gateway
public import HAPServer
public import HomeKitBridge
public import HomeMQTTApp
public import HomeModel
public import Logging
public import MQTT
import ServiceLifecycle
public import Simulator
import Synchronization
public import TestSupport
import XCTest

/// The composition root's gateway on the shipped simulated home (manual clock) over a
/// `MemoryBroker`, with `homekit.enabled` on 127.0.0.1 and a free port: what the fast tier and
/// the aiohomekit tests both run. The state directory is the caller's, so a second run is a
/// restart.
public struct BridgedGateway: Sendable {
    public static let code = "271-82-818"
    public static let repositoryRoot = HAPPeer.repositoryRoot

    public let broker: MemoryBroker
    public let home: SimulatedHome
    public let gateway: Gateway
    /// Another client, subscribed to the whole base since before the gateway started.
    public let seen: MessageCollector
    public let publisher: MemoryTransport
    public let bridge: HomeKitBridgeService
    public let port: Int
    public let logs: LogCapture
    public let stateDirectory: String

    /// Runs a gateway until `body` returns, then stops it as SIGTERM would.
    public static func run(
        state: TemporaryDirectory, home: SimulatedHome? = nil, setupCode: String? = BridgedGateway.code,
        configure: (inout GatewayConfig) -> Void = { _ in },
        options: HomeMQTTApp.Options = HomeMQTTApp.Options(),
        hap: Bool = false, hapFactory: HAPFactory = HAPFactory(),
        _ body: (BridgedGateway) async throws -> Void
    ) async throws {
        TestCensus.record(.memory)
        let home =
            try home
            ?? SimulatedHome.load(
                directory: repositoryRoot.appendingPathComponent("Config/accessories"), clock: .manual)
        var config = GatewayConfig(file: "test.yml", directory: repositoryRoot.appendingPathComponent("Config").path)
        config.mqtt.clientID = "gateway-under-test"
        config.stateDirectory = state.path
        config.pollInterval = 0
        config.requestTimeout = 2
        var homekit = HomeKitConfig()
        homekit.enabled = true
        homekit.port = 0
        homekit.bindAddresses = ["127.0.0.1"]
        homekit.setupCode = setupCode.flatMap { HAPSetupCode($0) }
        config[HomeKitConfig.self] = homekit
        configure(&config)
        let logs = LogCapture()
        let logger = Logger(label: "test.homekit", factory: { _ in logs })

        let broker = MemoryBroker()
        let transport = broker.transport(configuration: HomeMQTTApp.gatewayConnection(config))
        var options = options
        // Another home's gateway (a home added by a test) gets a connection of its own.
        let firstClientID = config.mqtt.clientID
        options.transport = { configuration, _ in
            configuration.clientID == firstClientID ? transport : broker.transport(configuration: configuration)
        }
        // `hap`: a HAP controller beside the simulated home, as `sources: [simulator, hap]` makes
        // it, pairing over `pair` (the loop guard's tests: two gateways pairing with each other).
        var source: any AccessorySource = home
        if hap {
            let made = try hapFactory.make(SourceContext(config: config, logger: logger))
            source = CompositeSource([home, made.source])
            options.pairings = made.pairings
        }
        let parts = try HomeMQTTApp.build(
            config: config, source: source, database: HomeDatabase(directory: URL(fileURLWithPath: state.path)),
            options: options, logger: logger)
        let observer = broker.transport()
        let seen = MessageCollector(observer.messages())
        observer.connect()
        try await observer.subscribe("\(config.baseTopic)/#")
        let publisher = broker.transport()
        publisher.connect()
        let group = ServiceGroup(configuration: .init(services: parts.services, logger: logger))
        try await withThrowingDiscardingTaskGroup { tasks in
            tasks.addTask { try await group.run() }
            do {
                let statusTopic = "\(config.baseTopic)/$gateway/status"
                try await seen.waitFor("online", timeout: 10) { $0.topic == statusTopic && $0.string == "online" }
                try await waitUntil("notifications on", timeout: 5) { await !home.notificationsEnabled().isEmpty }
                var found: (HomeKitBridgeService, Int)?
                try await waitUntil("the HomeKit bridge to listen", timeout: 10) {
                    found = HomeKitBridges.running.first {
                        $0.stateDirectory == state.path && $0.accessoryID == nil
                    }.flatMap { bridge in
                        bridge.listeningPort.map { (bridge, $0) }
                    }
                    return found != nil
                }
                let (bridge, port) = found!
                try await body(
                    BridgedGateway(
                        broker: broker, home: home, gateway: parts.gateway, seen: seen, publisher: publisher,
                        bridge: bridge, port: port, logs: logs, stateDirectory: state.path))
            } catch {
                await group.triggerGracefulShutdown()
                throw error
            }
            await group.triggerGracefulShutdown()
        }
    }

    /// The server of `accessoryID` served alone, once it listens, and its port.
    public func standalone(_ accessoryID: String) async throws -> (service: HomeKitBridgeService, port: Int) {
        var found: (HomeKitBridgeService, Int)?
        try await waitUntil("\(accessoryID) to listen on its own", timeout: 10) {
            found = HomeKitBridges.running.first {
                $0.stateDirectory == stateDirectory && $0.accessoryID == accessoryID
            }.flatMap { service in service.listeningPort.map { (service, $0) } }
            return found != nil
        }
        return found!
    }

    /// The shipped simulated home copied into `directory`, its Kilgo garage door opener
    /// (`garage.yml`) served standalone (`homekit: standalone`).
    public static func standaloneGarageHome(in directory: TemporaryDirectory) throws -> SimulatedHome {
        try SimulatedHome.load(directory: standaloneGarageFiles(in: directory), clock: .manual)
    }

    /// The accessory files of `standaloneGarageHome(in:)`, in `directory/accessories`; `how`:
    /// the garage file's `homekit:` (`thread` serves it as a Thread accessory).
    public static func standaloneGarageFiles(in directory: TemporaryDirectory, how: String = "standalone") throws
        -> URL
    {
        let shipped = repositoryRoot.appendingPathComponent("Config/accessories")
        let copy = directory.url.appendingPathComponent("accessories")
        try FileManager.default.copyItem(at: shipped, to: copy)
        let garage = copy.appendingPathComponent("garage.yml")
        let text = try String(contentsOf: garage, encoding: .utf8)
        try ("homekit: \(how)\n" + text).write(to: garage, atomically: true, encoding: .utf8)
        return copy
    }

    /// Publishes a request as another client would.
    public func publish(_ topic: String, _ payload: String) async throws {
        try await publisher.publish(topic, payload: Array(payload.utf8), qos: .atLeastOnce, retain: false)
    }

    /// The bridge's aid and iid of the characteristic at `topic` in the gateway's tree, from
    /// the ids file (what a controller cannot know).
    public func address(topic: String) async throws -> (aid: Int, iid: Int) {
        let tree = await gateway.tree
        guard let node = tree.characteristic(topic: topic),
            let accessory = tree.accessory(id: node.address.accessoryID),
            let service = accessory.services.first(where: { $0.characteristics.contains { $0.address == node.address } }
            )
        else { throw TestTimeoutError("no characteristic at \(topic)") }
        let key = "s\(service.iid):\(service.service.type)/c\(node.address.iid):\(node.characteristic.type)"
        let entry = try idsEntry(node.address.accessoryID)
        guard let aid = entry["aid"]?.intValue, let iid = entry["iids"]?[key]?.intValue else {
            throw TestTimeoutError("no ids for \(key)")
        }
        return (aid, iid)
    }

    /// The bridge's aid of a gateway accessory, from its ids file.
    public func aid(of accessoryID: String) throws -> Int {
        guard let aid = try idsEntry(accessoryID)["aid"]?.intValue else { throw TestTimeoutError("no aid") }
        return aid
    }

    private func idsEntry(_ accessoryID: String) throws -> JSONValue {
        let file = URL(fileURLWithPath: stateDirectory).appendingPathComponent("homekit")
        let folders = try FileManager.default.contentsOfDirectory(atPath: file.path)
        for folder in folders {
            let data = try Data(contentsOf: file.appendingPathComponent(folder).appendingPathComponent("ids.json"))
            if let entry = try JSONValue(parsing: Array(data))["accessories"]?[accessoryID] { return entry }
        }
        throw TestTimeoutError("no ids for \(accessoryID)")
    }
}

/// Every log line, for what a test reads of the log (the setup code shown once).
public final class LogCapture: LogHandler, @unchecked Sendable {
    private let storage = Mutex<[String]>([])
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info

    public init() {}

    public var lines: [String] { storage.withLock { $0 } }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(
        level: Logger.Level, message: Logger.Message, metadata: Logger.Metadata?, source: String, file: String,
        function: String, line: UInt
    ) {
        let fields = (metadata ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        storage.withLock { $0.append("\(level) \(message) \(fields.joined(separator: " "))") }
    }
}
