public import Foundation
public import Harness
import XCTest

/// A config for the test broker and the shipped simulated home, with its own state directory:
/// what the tests that run the real `homemqtt` binary start it on.
public final class E2EConfig: Sendable {
    public let directory: TemporaryDirectory
    public let configPath: String
    public var statePath: String { directory.file("state") }

    public init(brokerURL: String, extra: String = "") throws {
        directory = try TemporaryDirectory(prefix: "homemqtt-e2e")
        configPath = directory.file("gateway.yml")
        let yaml = """
            broker:
              url: \(brokerURL)
              client-id: homemqtt-e2e
            state-directory: state
            poll-interval: 0
            sources:
              - type: simulator
                directory: \(HAPPeer.repositoryRoot.appendingPathComponent("Config/accessories").path)
            homeassistant:
              enabled: false
            log-level: warning
            \(extra)
            """
        try yaml.write(toFile: configPath, atomically: true, encoding: .utf8)
    }
}

/// The real `homemqtt` binary, run by the tests of every module it serves.
public enum BinaryGateway {
    /// `homemqtt` beside the test bundle (both are in the build's products directory).
    public static var binary: String { (try? builtProduct("homemqtt")) ?? "homemqtt (not built)" }

    /// `homemqtt run` on `setup`, once it has published `online`.
    public static func start(_ setup: E2EConfig, broker: MosquittoBroker) async throws -> ChildProcess {
        let watcher = try await MQTTTestSubscriber.start(
            broker: broker, filter: "home/$gateway/status", clientID: "status-\(UUID().uuidString.prefix(6))")
        TestCensus.record(.binary)
        let gateway = try ChildProcess(binary, ["run", "--config", setup.configPath], keeping: setup)
        do {
            try await watcher.waitForMessage("the gateway online", timeout: 20) { message in
                if !gateway.isRunning { return true }
                return !message.retain && message.string == "online"
            }
        } catch {
            XCTFail("no online status; stderr: \(gateway.standardError)")
            throw error
        }
        await watcher.stop()
        guard gateway.isRunning else {
            throw ProcessError("homemqtt run exited (\(gateway.exitStatus ?? -1)): \(gateway.standardError)")
        }
        return gateway
    }
}
