import Foundation
import HomeModel
import Synchronization
import TestSupport
import WebTestSupport
import XCTest

/// The real `homemqtt run` with `web.enabled` on a free loopback port, on the shipped simulated
/// home and a real mosquitto: what a user starts.
final class WebGateway: Sendable {
    let broker: MosquittoBroker
    let directory: TemporaryDirectory
    let port: Int
    let token: String?
    let configPath: String
    /// A command that runs the binary (`prlimit --nofile=… --`), or none.
    let launcher: [String]
    private let child: Mutex<ChildProcess?>

    var url: String { "http://127.0.0.1:\(port)" }
    var process: ChildProcess? { child.withLock { $0 } }
    /// Everything the gateway logged so far.
    var log: String { process?.standardError ?? "" }

    /// - Parameters:
    ///   - token: `web.token`; nil for none.
    ///   - extra: more YAML at the top level (`log-level: debug`, …).
    ///   - accessories: the directory of accessory files (the shipped simulated home by default).
    ///   - hap: a `hap` source beside the simulator (pairings in the state directory).
    ///   - web: more keys of the `web:` section, each line indented by two spaces.
    ///   - launcher: a command that runs the binary (`prlimit --nofile=1024:1024 --`).
    init(
        broker: MosquittoBroker, token: String? = nil, extra: String = "", accessories: String? = nil,
        hap: Bool = false, logLevel: String = "warning", web: String = "", launcher: [String] = [],
        brokerURL: String? = nil
    ) throws {
        self.broker = broker
        self.token = token
        self.launcher = launcher
        directory = try TemporaryDirectory(prefix: "homemqtt-web")
        port = try freePort()
        configPath = directory.file("gateway.yml")
        child = Mutex(nil)
        let home = accessories ?? repositoryRoot.appendingPathComponent("Config/accessories").path
        let yaml = """
            broker:
              url: \(brokerURL ?? broker.url)
              client-id: homemqtt-web-test
            state-directory: state
            poll-interval: 0
            sources:
              - type: simulator
                directory: \(home)
            \(hap ? "  - type: hap" : "")
            homeassistant:
              enabled: false
            web:
              enabled: true
              listen: 127.0.0.1:\(port)
            \(token.map { "  token: \"\($0)\"" } ?? "")
            \(web)
            log-level: \(logLevel)
            \(extra)
            """
        try yaml.write(toFile: configPath, atomically: true, encoding: .utf8)
    }

    static func start(
        broker: MosquittoBroker? = nil, token: String? = nil, extra: String = "", accessories: String? = nil,
        hap: Bool = false, logLevel: String = "warning", web: String = "", launcher: [String] = [],
        brokerURL: String? = nil
    ) async throws -> WebGateway {
        let broker = if let broker { broker } else { try await MosquittoBroker.start() }
        let gateway = try WebGateway(
            broker: broker, token: token, extra: extra, accessories: accessories, hap: hap, logLevel: logLevel,
            web: web, launcher: launcher, brokerURL: brokerURL)
        try await gateway.start()
        return gateway
    }

    /// Starts `homemqtt run` and waits until `/healthz` says it serves the home, connected.
    func start(timeout: Double = 30) async throws {
        TestCensus.record(.binary)
        let command = launcher + [homemqttBinary, "run", "--config", configPath]
        let process = try ChildProcess(command[0], Array(command.dropFirst()))
        child.withLock { $0 = process }
        try await waitUntil("the web view's /healthz to answer 200", timeout: timeout) {
            guard process.isRunning else {
                throw ProcessError("homemqtt run exited (\(process.exitStatus ?? -1)): \(process.standardError)")
            }
            return healthStatus() == 200
        }
    }

    /// The status of `GET /healthz`, asked in process on a socket of our own (no `curl` to
    /// spawn, which a wait that polls every 10 ms did while the gateway under test started);
    /// nil while nothing answers.
    func healthStatus() -> Int? {
        guard let connection = try? RawConnection(port: port),
            (try? connection.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")) != nil
        else { return nil }
        // "HTTP/1.1 200 OK"
        let fields = connection.statusLine(timeout: 2).split(separator: " ")
        return fields.count >= 2 && fields[0].hasPrefix("HTTP/") ? Int(fields[1]) : nil
    }

    /// SIGTERM, as systemd stops it; returns the exit status.
    @discardableResult
    func stop() async -> Int32 {
        guard let process else { return 0 }
        return await process.terminate(grace: 10)
    }

    func stopAll() async {
        await stop()
        await broker.stop()
    }

    /// `mosquitto_pub` to the test broker.
    func publish(_ topic: String, _ payload: String) async throws {
        try await runChecked("mosquitto_pub", ["-p", "\(broker.port)", "-q", "1", "-t", topic, "-m", payload])
    }

    /// A subscriber to `filter` on the test broker.
    func subscribe(_ filter: String) async throws -> MQTTTestSubscriber {
        try await MQTTTestSubscriber.start(
            broker: broker, filter: filter, clientID: "web-test-\(UUID().uuidString.prefix(8))")
    }
}
