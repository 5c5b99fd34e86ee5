import Foundation
import Gateway
import HomeKitBridgeTestSupport
import HomeMQTTApp
import HomeModel
import Logging
import MQTT
import ServiceLifecycle
import Synchronization
import TestSupport
import WebView
import XCTest

/// `homemqtt run` in process, on a `MemoryBroker`, for the tests whose subject is the gateway
/// against a real peer (a HAP-python accessory, a page over `/ws`) rather than the process: the
/// config file read as the binary reads it (`HomeMQTTApp.loadConfig`), its sources made by the
/// composition root (`makeSource`: a `hap` source takes the pairings in the state directory),
/// the state directory prepared and opened as `run` opens it, and `HomeMQTTApp.build`'s services
/// in one `ServiceGroup`; each home's gateway connects under its own client id.
///
/// What the binary's tests read of the process has its substitute here: its stderr is `logs`,
/// its exit status 0 after SIGTERM is the group's clean stop after `body` (checked by `run`),
/// and a CLI command is the same operation sent to `<base>/$gateway/request/<op>` (`request`),
/// as the CLI sends it.
struct InProcessRun: Sendable {
    let broker: MemoryBroker
    let config: GatewayConfig
    let gateway: Gateway
    /// The config's sources as `makeSource` made them (a `hap` source alone: its `HAPSource`).
    let source: any AccessorySource
    /// Another client, subscribed to `#` since before the gateway started.
    let seen: MessageCollector
    let publisher: MemoryTransport
    /// Every line the gateway logged at the config's `log-level`.
    let logs: LogCapture
    /// The web view's port when the config enables it (`configure` may set `port` 0: one the
    /// system picks).
    let webPort: Int?

    var webURL: String { "http://127.0.0.1:\(webPort ?? 0)" }

    /// Writes `gateway.yml` in `directory` (state in `directory/state`) and returns its path:
    /// a simulator source on the shipped home and/or a `hap` source, then `extra` at the top
    /// level. The broker's URL is never dialled: the gateway's connection is the memory broker's.
    static func writeConfig(
        in directory: TemporaryDirectory, simulator: Bool = false, hap: Bool = true, extra: String = ""
    ) throws -> String {
        let accessories = repositoryRoot.appendingPathComponent("Config/accessories").path
        let sources =
            (simulator ? ["  - type: simulator\n    directory: \"\(accessories)\""] : [])
            + (hap ? ["  - type: hap"] : [])
        let path = directory.file("gateway.yml")
        try """
        broker:
          url: mqtt://127.0.0.1:1883
        state-directory: \(directory.file("state"))
        poll-interval: 0
        sources:
        \(sources.joined(separator: "\n"))
        \(extra)
        """.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// Runs the gateway of the config at `file` until `body` returns, then stops it as SIGTERM
    /// would and fails the test unless every service stopped cleanly. `broker` is the caller's,
    /// to read what is retained after the stop.
    static func run(
        file: String, broker: MemoryBroker = MemoryBroker(), configure: (inout GatewayConfig) -> Void = { _ in },
        _ body: (InProcessRun) async throws -> Void
    ) async throws {
        TestCensus.record(.memory)
        var config = try HomeMQTTApp.loadConfig(file: file, environment: [:])
        configure(&config)
        let logs = LogCapture()
        logs.logLevel = Logger.Level(rawValue: config.logLevel) ?? .info
        let logger = Logger(label: "homemqtt", factory: { _ in logs })
        _ = try HomeMQTTApp.prepareState(config)
        let database = try HomeDatabase(directory: URL(fileURLWithPath: config.stateDirectory), exclusive: true)
        let made = try HomeMQTTApp.makeSource(config, logger: logger, deferred: true)
        let listening = Mutex<Int?>(nil)
        var options = HomeMQTTApp.Options(pairings: made.pairings)
        options.webListening = { port in listening.withLock { $0 = port } }
        options.transport = { configuration, _ in broker.transport(configuration: configuration) }
        let parts = try HomeMQTTApp.build(
            config: config, source: made.source, database: database, options: options, logger: logger)

        let observer = broker.transport()
        let seen = MessageCollector(observer.messages())
        observer.connect()
        try await observer.subscribe("#")
        let publisher = broker.transport()
        publisher.connect()
        let stopped = StopOutcome()
        let group = ServiceGroup(configuration: .init(services: parts.services, logger: logger))
        let failure: (any Error)? = await withDiscardingTaskGroup { tasks in
            tasks.addTask {
                do { try await group.run() } catch { stopped.error.withLock { $0 = error } }
            }
            var thrown: (any Error)?
            do {
                let status = "\(config.baseTopic)/$gateway/status"
                try await waitUntil("the gateway online", timeout: 30) {
                    if let error = stopped.error.withLock({ $0 }) { throw error }
                    return seen.elements.contains { $0.topic == status && $0.string == "online" }
                }
                let web = config[WebConfig.self].enabled
                if web {
                    try await waitUntil("the web view to listen", timeout: 10) { listening.withLock { $0 } != nil }
                }
                try await body(
                    InProcessRun(
                        broker: broker, config: config, gateway: parts.gateway, source: made.source, seen: seen,
                        publisher: publisher,
                        logs: logs, webPort: web ? listening.withLock { $0 } : nil))
            } catch {
                thrown = error
            }
            await group.triggerGracefulShutdown()
            return thrown
        }
        if let error = stopped.error.withLock({ $0 }) {
            XCTFail("the gateway's services did not stop cleanly: \(error); log: \(logs.lines.suffix(20))")
        }
        observer.disconnect()
        await seen.cancel()
        publisher.disconnect()
        if let failure { throw failure }
    }

    /// Publishes as another client of the broker would (`mosquitto_pub -q 1`).
    func publish(_ topic: String, _ payload: String) async throws {
        try await publisher.publish(topic, payload: Array(payload.utf8), qos: .atLeastOnce, retain: false)
    }

    /// `op` with `fields` sent to `<base>/$gateway/request/<op>` as the CLI sends it (an `id` of
    /// its own), and the response carrying that id: `{"id", "status", "data"}` or the error.
    func request(_ op: String, _ fields: [String: JSONValue] = [:], base: String? = nil) async throws -> JSONValue {
        let base = base ?? config.baseTopic
        let id = "test-" + UUID().uuidString.lowercased()
        try await publish(
            "\(base)/$gateway/request/\(op)",
            JSONValue.object(fields.merging(["id": .string(id)]) { a, _ in a }).encoded())
        let answer = try await seen.waitFor("the answer to \(op)", timeout: 30) { message in
            message.topic == "\(base)/$gateway/response/\(op)"
                && (try? JSONValue(parsing: message.payload))?["id"] == .string(id)
        }
        return try JSONValue(parsing: answer.payload)
    }

    /// Every retained message under `filter` once `condition` holds of them (what a fresh
    /// subscriber would be sent); fails with the last ones after `timeout`.
    @discardableResult
    func retained(
        _ filter: String, until what: String = "the retained messages", timeout: Double = 20,
        _ condition: ([String: String]) -> Bool = { _ in true }
    ) async throws -> [String: String] {
        var last: [String: String] = [:]
        do {
            try await waitUntil(what, timeout: timeout) {
                last = broker.retainedText(under: filter)
                return condition(last)
            }
        } catch {
            XCTFail("retained under \(filter): \(last.keys.sorted())")
            throw error
        }
        return last
    }
}

/// How the service group's run ended: the error it threw, if any.
private final class StopOutcome: Sendable {
    let error = Mutex<(any Error)?>(nil)
}
