import Foundation
import Gateway
import HTTPTypes
import HomeMQTTApp
import HomeModel
import Hummingbird
import HummingbirdTesting
import HummingbirdWSClient
import HummingbirdWSTesting
import Logging
import MQTT
import NIOCore
import ServiceLifecycle
import Simulator
import Synchronization
import TestSupport
import XCTest

@testable import WebView

/// The web view in process: the composition root's gateway on the shipped simulated home (a
/// manual clock) over a `MemoryBroker`, and its `WebView`'s application served by
/// HummingbirdTesting's live server (a loopback port of its own, the connection guard included).
/// What a test sees is what a browser or `curl` would; EndToEndTests' Web*Tests keep the same
/// routes through the real binary on mosquitto.
struct WebRig: Sendable {
    let broker: MemoryBroker
    let home: SimulatedHome
    let gateway: Gateway
    /// Another client, subscribed to the whole base since before the gateway started.
    let seen: MessageCollector
    let publisher: MemoryTransport
    /// The gateway's own connection to `broker`.
    let transport: MemoryTransport
    /// Everything the gateway and its web view logged (at `logLevel`), a line each.
    let log: LogLines
    let client: any TestClientProtocol

    /// Runs a gateway and its web view until `body` returns, then stops both.
    /// `token`: `web.token`; `yaml`: more of the config file (`access:`); `logLevel`: what the
    /// log keeps (warnings and errors go to standard error too); `homeKitSetup`: what the web
    /// view is told of the home's HomeKit bridge (the composition root's is a running bridge's);
    /// `configure`: the gateway's config beyond the rig's; `clock`: what the gateway's timers read.
    static func run(
        token: String? = nil, yaml: String = "", logLevel: Logger.Level = .info,
        homeKitSetup: @escaping @Sendable () async -> HomeKitSetup? = { nil },
        configure: (inout GatewayConfig) -> Void = { _ in }, clock: GatewayClock = .continuous,
        _ body: @Sendable (WebRig) async throws -> Void
    ) async throws {
        TestCensus.record(.memory)
        // This gateway's own exporter: `/metrics` counts it alone, not the other tests' gateways
        // in this process (HealthMetricsAgreementTests compares its counts with the gateway's).
        let metrics = WebMetrics.separate()
        let state = try TemporaryDirectory(prefix: "homemqtt-web-inprocess")
        let home = try SimulatedHome.load(
            directory: repositoryRoot.appendingPathComponent("Config/accessories"), clock: .manual)
        var config = GatewayConfig(file: "test.yml", directory: repositoryRoot.appendingPathComponent("Config").path)
        config[AccessConfig.self] = try HomeMQTTApp.parseConfig(yaml, file: "test.yml", environment: [:])[
            AccessConfig.self]
        config.mqtt.clientID = "gateway-under-test"
        config.stateDirectory = state.path
        config.pollInterval = 0
        config.requestTimeout = 2
        configure(&config)
        var web = WebConfig()
        web.enabled = true
        web.token = token
        let log = LogLines()
        let logger = log.logger("test.web", level: logLevel)

        let broker = MemoryBroker()
        let transport = broker.transport(configuration: HomeMQTTApp.gatewayConnection(config))
        var options = HomeMQTTApp.Options()
        options.transport = { _, _ in transport }
        options.clock = clock
        options.metrics = metrics.factory
        // The web section stays off in the config: the test serves the web view itself.
        let parts = try HomeMQTTApp.build(
            config: config, source: home, database: HomeDatabase(directory: URL(fileURLWithPath: state.path)),
            options: options, logger: logger)
        let observer = broker.transport()
        let seen = MessageCollector(observer.messages())
        observer.connect()
        try await observer.subscribe("\(config.baseTopic)/#")
        let publisher = broker.transport()
        publisher.connect()
        let view = WebView(
            gateway: parts.gateway, config: web, access: config[AccessConfig.self], metrics: metrics, logger: logger,
            homeKitSetup: homeKitSetup)
        let app = await view.application()

        // The hub beside the gateway, as `WebView.run` runs it, stopped first (the group stops
        // services in reverse).
        let services = parts.services + [.init(service: HubService(hub: view.hub))]
        let group = ServiceGroup(configuration: .init(services: services, logger: logger))
        // Unstructured, as `RiggedGateway`'s: a failure of the gateway is reported as its own,
        // and never cancels the test's task in its middle.
        let runner = Task { try await group.run() }
        var failure: (any Error)?
        do {
            let status = "\(config.baseTopic)/$gateway/status"
            try await seen.waitFor("online", timeout: 5) { $0.topic == status && $0.string == "online" }
            try await waitUntil("notifications on", timeout: 5) { await !home.notificationsEnabled().isEmpty }
            try await waitUntil("the web view's hub observing", timeout: 5) { await view.hub.isObserving }
            try await app.test(.live) { client in
                try await body(
                    WebRig(
                        broker: broker, home: home, gateway: parts.gateway, seen: seen, publisher: publisher,
                        transport: transport, log: log, client: client))
            }
        } catch {
            failure = error
        }
        await group.triggerGracefulShutdown()
        if case .failure(let error) = await runner.result {
            XCTFail("the gateway's services failed: \(error)")
        }
        observer.disconnect()
        await seen.cancel()
        publisher.disconnect()
        if let failure { throw failure }
    }

    // MARK: HTTP

    struct Answer: Sendable {
        var status: Int
        var headers: HTTPFields
        var body: String
        var json: JSONValue? { try? JSONValue(parsing: Array(body.utf8)) }
        func header(_ name: String) -> String? { HTTPField.Name(name).flatMap { headers[$0] } }
    }

    func get(_ path: String, headers: [String: String] = [:]) async throws -> Answer {
        try await request(.get, path, headers: headers)
    }

    func request(
        _ method: HTTPRequest.Method, _ path: String, headers: [String: String] = [:], body: String? = nil
    ) async throws -> Answer {
        var fields = HTTPFields()
        for (name, value) in headers { fields[HTTPField.Name(name)!] = value }
        let response = try await client.execute(
            uri: path, method: method, headers: fields, body: body.map { ByteBuffer(string: $0) })
        return Answer(status: Int(response.status.code), headers: response.headers, body: String(buffer: response.body))
    }

    /// The value of the metric line that starts with `name ` in `/metrics` now, 0 without one.
    func metric(_ name: String) async throws -> Double {
        let text = try await get("/metrics").body
        let line = text.split(separator: "\n").first { $0.hasPrefix(name + " ") }
        return line.flatMap { Double($0.dropFirst(name.count + 1)) } ?? 0
    }

    // MARK: MQTT

    /// Publishes as another client of the broker would.
    func publish(_ topic: String, _ payload: String) async throws {
        try await publisher.publish(topic, payload: Array(payload.utf8), qos: .atLeastOnce)
    }

    // MARK: /ws

    /// Opens `/ws` as the page does and runs `body` with it; the socket closes when `body`
    /// returns. Throws when the upgrade is refused (`body` is not run).
    func page(
        query: String = "", headers: [String: String] = [:], _ body: @escaping @Sendable (Page) async throws -> Void
    ) async throws {
        var configuration = WebSocketClientConfiguration()
        for (name, value) in headers { configuration.additionalHeaders[HTTPField.Name(name)!] = value }
        try await client.ws("/ws" + query, configuration: configuration) { inbound, outbound, _ in
            let (stream, continuation) = AsyncStream.makeStream(of: JSONValue.self)
            let frames = StreamCollector(stream)
            let page = Page(frames: frames, outbound: outbound)
            // The handler's own task reads the socket (its one reader: the close handshake after
            // the handler reads it too, and a second reader cancelled meanwhile made that throw
            // CancellationError about 1 run in 20); `body` runs beside it and closes the socket
            // when done, which ends the reading once the server answers the close.
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    do {
                        try await body(page)
                    } catch {
                        try? await outbound.close(.normalClosure, reason: nil)
                        throw error
                    }
                    try? await outbound.close(.normalClosure, reason: nil)
                }
                do {
                    for try await message in inbound.messages(maxSize: 1 << 24) {
                        if case .text(let text) = message, let frame = try? JSONValue(parsing: Array(text.utf8)) {
                            continuation.yield(frame)
                        }
                    }
                } catch {}
                page.ended.store(true, ordering: .relaxed)
                continuation.finish()
                try await group.waitForAll()
            }
        }
    }
}

/// `LiveHub.run` as a service of the gateway's group, as `WebView.run` runs it.
private struct HubService: Service {
    let hub: LiveHub
    func run() async throws { await cancelWhenGracefulShutdown { await hub.run() } }
}

/// A page's side of `/ws`: the frames received (JSON), and requests as the page sends them.
final class Page: Sendable {
    let frames: StreamCollector<JSONValue>
    let outbound: WebSocketOutboundWriter
    /// Set when the server closed the socket (or it dropped).
    let ended = Atomic<Bool>(false)
    private let nextID = Atomic<Int>(1)

    init(frames: StreamCollector<JSONValue>, outbound: WebSocketOutboundWriter) {
        (self.frames, self.outbound) = (frames, outbound)
    }

    func send(_ text: String) async throws { try await outbound.write(.text(text)) }

    /// Sends `{id, topic, payload}` and returns the answer frame's `answer`.
    func request(_ topic: String, _ payload: String) async throws -> JSONValue {
        let id = nextID.add(1, ordering: .relaxed).oldValue
        try await send(
            JSONValue.object(["id": .int(Int64(id)), "topic": .string(topic), "payload": .string(payload)]).encoded())
        let frame = try await frames.waitFor("the answer to request \(id)", timeout: 5) {
            $0["type"] == "answer" && $0["id"] == .int(Int64(id))
        }
        return frame["answer"] ?? .null
    }

    /// The first frame giving the characteristic at `topic` a value satisfying `predicate`: an
    /// `update`, or the whole `home` (a structural change in the same batch carries the values).
    @discardableResult
    func update(
        of topic: String, timeout: Double = 5, where predicate: @escaping @Sendable (JSONValue) -> Bool
    ) async throws -> JSONValue {
        let frame = try await frames.waitFor("an update of \(topic)", timeout: timeout) {
            Self.value(of: topic, in: $0).map(predicate) ?? false
        }
        return Self.value(of: topic, in: frame) ?? .null
    }

    static func value(of topic: String, in frame: JSONValue) -> JSONValue? {
        if frame["type"] == "update" { return frame["values"]?[topic] }
        guard frame["type"] == "home" else { return nil }
        for accessory in frame["accessories"]?.arrayValue ?? [] {
            for service in accessory["services"]?.arrayValue ?? [] {
                guard let serviceTopic = service["topic"]?.stringValue, topic.hasPrefix(serviceTopic + "/") else {
                    continue
                }
                let slug = String(topic.dropFirst(serviceTopic.count + 1))
                for characteristic in service["chars"]?.arrayValue ?? []
                where characteristic["slug"]?.stringValue == slug {
                    return characteristic["v"]
                }
            }
        }
        return nil
    }
}

/// A log kept in memory, a line each (`level message key=value…`), as a test reads the binary's;
/// warnings and errors go to standard error as well.
final class LogLines: Sendable {
    private let lines = Mutex<[String]>([])

    /// Everything logged so far.
    var text: String { lines.withLock { $0.joined(separator: "\n") } }

    func logger(_ label: String, level: Logger.Level) -> Logger {
        let stderr = StreamLogHandler.standardError(label: label)
        var logger = Logger(label: label) { _ in Handler(lines: self, stderr: stderr) }
        logger.logLevel = level
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
