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
import WebTestSupport
import XCTest

@testable import WebView

/// Where a served web view's gateway runs: on a `MemoryBroker`, or on a real mosquitto. The
/// same choice as GatewayTests' `Rig`: memory only by default, both under `CI=true` or
/// `HOMEMQTT_LIVE=1`.
enum WebBroker: String, CaseIterable, Sendable {
    case memory
    case mosquitto

    static var enabled: [WebBroker] {
        let environment = ProcessInfo.processInfo.environment
        let live = environment["CI"] == "true" || environment["HOMEMQTT_LIVE"] == "1"
        return live ? allCases : [.memory]
    }
}

/// The web view as `homemqtt run` serves it, in process: the composition root's services with
/// `web.enabled` (the gateway on the shipped simulated home, a manual clock, and its `WebView`
/// service with the connection guard), listening on a real socket at 127.0.0.1 and a port the
/// system picks. What a test sends there is what a browser, `curl` or a misbehaving client
/// would; the web view's own lines are in `log`. Unlike `WebRig` (HummingbirdTesting's server
/// around the application), nothing here is the test's: the listener, the hub and their order
/// in the service group are the binary's.
struct ServedWeb: Sendable {
    let on: WebBroker
    let port: Int
    let gateway: Gateway
    /// Everything the gateway and its web view logged (at the rig's level), a line each.
    let log: LogLines
    let publisher: any MQTTTransport
    let broker: Broker

    enum Broker: Sendable {
        case memory(MemoryBroker)
        case mosquitto(MosquittoBroker)
    }

    var url: String { "http://127.0.0.1:\(port)" }

    /// Runs a gateway and its web view until `body` returns, then stops both and checks that
    /// they stopped cleanly (what the binary's exit status 0 said).
    /// - Parameters:
    ///   - token: `web.token`; nil for none.
    ///   - web: more keys of the `web:` section, each line indented by two spaces, as in the file.
    ///   - logLevel: what `log` keeps (warnings and errors go to standard error too).
    static func run(
        on kind: WebBroker, token: String? = nil, web: String = "", logLevel: Logger.Level = .info,
        _ body: @Sendable (ServedWeb) async throws -> Void
    ) async throws {
        TestCensus.record(kind == .memory ? .memory : .mosquitto)
        _ = WebMetrics.shared
        let state = try TemporaryDirectory(prefix: "homemqtt-web-served")
        let home = try SimulatedHome.load(
            directory: repositoryRoot.appendingPathComponent("Config/accessories"), clock: .manual)
        // The `web:` section as the file says it (the binary's tests' text), on a port the system picks.
        let yaml = "web:\n  enabled: true\n" + (token.map { "  token: \"\($0)\"\n" } ?? "") + web + "\n"
        let parsed = try HomeMQTTApp.parseConfig(yaml, file: "test.yml", environment: [:])
        var config = GatewayConfig(file: "test.yml", directory: repositoryRoot.appendingPathComponent("Config").path)
        config[WebConfig.self] = parsed[WebConfig.self]
        config[WebConfig.self].port = 0
        config[AccessConfig.self] = parsed[AccessConfig.self]

        let broker: Broker
        switch kind {
        case .memory: broker = .memory(MemoryBroker())
        case .mosquitto:
            let mosquitto = try await MosquittoBroker.start(.init(extraConfiguration: ["max_queued_messages 0"]))
            broker = .mosquitto(mosquitto)
            config.mqtt = mosquitto.clientConfiguration()
        }
        config.mqtt.clientID = "gateway-under-test"
        config.stateDirectory = state.path
        config.pollInterval = 0
        config.requestTimeout = 2
        let log = LogLines()
        let logger = log.logger("test.web.served", level: logLevel)

        let listening = Mutex<Int?>(nil)
        var options = HomeMQTTApp.Options()
        options.webListening = { port in listening.withLock { $0 = port } }
        options.transport = { configuration, logger in
            let transport: any MQTTTransport =
                switch broker {
                case .memory(let memory): memory.transport(configuration: configuration)
                case .mosquitto: MQTTClient(configuration: configuration, logger: logger)
                }
            return transport
        }
        let parts = try HomeMQTTApp.build(
            config: config, source: home, database: HomeDatabase(directory: URL(fileURLWithPath: state.path)),
            options: options, logger: logger)
        let observer = try await broker.client("web-observer")
        let publisher = try await broker.client("web-publisher")
        let seen = MessageCollector(observer.messages())
        try await observer.subscribe("\(config.baseTopic)/$gateway/status", qos: .atLeastOnce)

        let group = ServiceGroup(configuration: .init(services: parts.services, logger: logger))
        // Unstructured, as `RiggedGateway`'s: a failure of the gateway is reported as its own.
        let runner = Task { try await group.run() }
        var failure: (any Error)?
        do {
            try await seen.waitFor("online", timeout: 10) { $0.string == "online" }
            try await waitUntil("notifications on", timeout: 5) { await !home.notificationsEnabled().isEmpty }
            try await waitUntil("the web view to listen", timeout: 10) { listening.withLock { $0 } != nil }
            let port = try XCTUnwrap(listening.withLock { $0 })
            // As the binary's harness waited: `/healthz` says it serves the home, connected.
            try await waitUntil("the web view's /healthz to answer 200", timeout: 10) {
                (try? await HTTP.get("http://127.0.0.1:\(port)/healthz"))?.status == 200
            }
            try await body(
                ServedWeb(on: kind, port: port, gateway: parts.gateway, log: log, publisher: publisher, broker: broker))
        } catch {
            failure = error
        }
        await group.triggerGracefulShutdown()
        if case .failure(let error) = await runner.result {
            XCTFail("[\(kind)] the gateway's services did not stop cleanly: \(error)")
        }
        await broker.disconnect(observer)
        await seen.cancel()
        await broker.disconnect(publisher)
        if case .mosquitto(let mosquitto) = broker { await mosquitto.stop() }
        if let failure { throw failure }
    }

    /// Runs `body` on a served web view of its own on each enabled broker in turn; a failure is
    /// thrown naming the broker.
    static func onEveryBroker(
        token: String? = nil, web: String = "", logLevel: Logger.Level = .info,
        _ body: @Sendable (ServedWeb) async throws -> Void
    ) async throws {
        for kind in WebBroker.enabled {
            do {
                try await run(on: kind, token: token, web: web, logLevel: logLevel, body)
            } catch {
                throw ServedWebFailure(broker: kind, error: error)
            }
        }
    }

    struct ServedWebFailure: Error, CustomStringConvertible {
        var broker: WebBroker
        var error: any Error
        var description: String { "[\(broker) broker] \(error)" }
    }

    // MARK: MQTT

    /// Publishes as another client of the broker would (`mosquitto_pub -q 1` in the binary's tests).
    func publish(_ topic: String, _ payload: String, qos: MQTTQoS = .atLeastOnce) async throws {
        try await publisher.publish(topic, payload: Array(payload.utf8), qos: qos)
    }

    /// Another client subscribed to `filter` (the subscription confirmed); `close` disconnects it.
    func subscriber(_ filter: String) async throws -> (seen: MessageCollector, close: @Sendable () async -> Void) {
        let client = try await broker.client("web-subscriber")
        let seen = MessageCollector(client.messages())
        try await client.subscribe(filter, qos: .atLeastOnce)
        let broker = broker
        return (
            seen,
            {
                await broker.disconnect(client); await seen.cancel()
            }
        )
    }

    /// A page over `/ws`, as the browser opens it (`query`: `?token=…`).
    func page(_ query: String = "") async throws -> PageClient {
        try await PageClient.connect("ws://127.0.0.1:\(port)/ws" + query)
    }
}

extension ServedWeb.Broker {
    /// A new client of the broker, connected.
    func client(_ name: String) async throws -> any MQTTTransport {
        switch self {
        case .memory(let broker):
            let transport = broker.transport()
            transport.connect()
            return transport
        case .mosquitto(let broker):
            let client = MQTTClient(
                configuration: broker.clientConfiguration(clientID: "\(name)-\(UUID().uuidString.prefix(8))"))
            try await client.connect()
            return client
        }
    }

    func disconnect(_ client: any MQTTTransport) async {
        if let client = client as? MQTTClient {
            await client.disconnect()
        } else if let transport = client as? MemoryTransport {
            transport.disconnect()
        }
    }
}

/// Runs `body` on a thread of its own: a `RawConnection` waits for its socket by blocking, which
/// must not hold one of the few threads the gateway and the web view run their tasks on.
func offThePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}
