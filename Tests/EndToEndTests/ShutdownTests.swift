import Foundation
import MQTT
import TestSupport
import XCTest

/// SIGTERM and SIGINT stop the real binary within two seconds, exit 0, in every phase: loading
/// the accessory files, waiting for the broker, publishing the first tree, serving. Where it is
/// connected, `offline` is the last status it publishes.
final class ShutdownTests: XCTestCase {
    static let limit = 2.0

    /// A config for `accessories` and a broker on `port`, logging at info (the phases are read
    /// from the log).
    private func writeConfig(_ dir: TemporaryDirectory, port: Int, accessories: String) throws -> String {
        let path = dir.file("gateway.yml")
        try """
        broker:
          url: mqtt://127.0.0.1:\(port)
          client-id: homemqtt-shutdown
        state-directory: state
        poll-interval: 0
        sources:
          - type: simulator
            directory: \(accessories)
        homeassistant:
          enabled: false
        log-level: info
        """.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// Starts `homemqtt run`, waits until its log shows `phase`, sends `signal`, and returns the
    /// exit status and how long the process took to end.
    private func stop(
        config: String, in phase: String, with signal: Int32 = SIGTERM, unless other: String? = nil, settle: Double = 0
    ) async throws -> (status: Int32, seconds: Double, log: String) {
        TestCensus.record(.binary)
        let gateway = try ChildProcess(BinaryEndToEndTests.binary, ["run", "--config", config])
        addTeardownBlock { await gateway.terminate(grace: 1) }
        try await waitUntil("'\(phase)' in the log", timeout: 30) {
            if !gateway.isRunning { throw ProcessError("exited before '\(phase)': \(gateway.standardError)") }
            return gateway.standardError.contains(phase)
        }
        if let other {
            XCTAssertFalse(gateway.standardError.contains(other), "already past the phase: \(gateway.standardError)")
        }
        if settle > 0 { try await Task.sleep(for: .seconds(settle)) }
        let start = ContinuousClock.now
        gateway.signal(signal)
        let status = try await gateway.waitForExit(timeout: 10)
        let elapsed = ContinuousClock.now - start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return (status, seconds, gateway.standardError)
    }

    private func assertStopped(_ outcome: (status: Int32, seconds: Double, log: String), _ phase: String) {
        print("figure: stopped while \(phase) in \(String(format: "%.2f", outcome.seconds)) s, exit \(outcome.status)")
        XCTAssertEqual(outcome.status, 0, "exit status after a stop while \(phase); log: \(outcome.log)")
        XCTAssertLessThan(outcome.seconds, Self.limit, "took \(outcome.seconds) s to stop while \(phase)")
        XCTAssertTrue(outcome.log.contains("gateway stopped"), outcome.log)
    }

    /// One accessory file of 80,000 services: seconds of parsing, as a home of thousands of
    /// files takes.
    func testSIGTERMWhileLoadingTheAccessoryFiles() async throws {
        let dir = try TemporaryDirectory(prefix: "homemqtt-stop-load")
        let accessories = dir.file("accessories")
        try FileManager.default.createDirectory(atPath: accessories, withIntermediateDirectories: true)
        var yaml = "name: Big Panel\nmanufacturer: Test Co\nservices:\n"
        for i in 0..<80_000 {
            yaml += "  - type: switch\n    name: S\(i)\n    characteristics: { power-state: false }\n"
        }
        try yaml.write(toFile: accessories + "/panel.yml", atomically: false, encoding: .utf8)
        let broker = try await MosquittoBroker.start()
        addTeardownBlock { await broker.stop() }
        let config = try writeConfig(dir, port: broker.port, accessories: accessories)
        let outcome = try await stop(config: config, in: "loading accessory files", unless: "home loaded")
        assertStopped(outcome, "loading")
        XCTAssertFalse(outcome.log.contains("home loaded"), outcome.log)
    }

    func testSIGTERMAndSIGINTWhileTheBrokerIsUnreachable() async throws {
        let dir = try TemporaryDirectory(prefix: "homemqtt-stop-connect")
        // A port nobody listens on: a broker started and stopped again.
        let broker = try await MosquittoBroker.start()
        let port = broker.port
        await broker.stop()
        let config = try writeConfig(
            dir, port: port, accessories: repositoryRoot.appendingPathComponent("Config/accessories").path)
        for signal in [SIGTERM, SIGINT] {
            let outcome = try await stop(config: config, in: "cannot reach the broker, retrying", with: signal)
            assertStopped(outcome, "connecting (signal \(signal))")
        }
        // Retries back off up to 30 s: a stop in the middle of a long wait is as quick.
        let outcome = try await stop(config: config, in: "retry-in=4.0s")
        assertStopped(outcome, "waiting 4 s to retry")
    }

    /// A broker host that drops packets (the TCP connect hangs) or a port that accepts and never
    /// answers (no CONNACK): the connect attempt itself must not hold up a stop.
    func testSIGTERMWhileTheTCPConnectHangsOrNoCONNACKComes() async throws {
        let dir = try TemporaryDirectory(prefix: "homemqtt-stop-hang")
        for dropsPackets in [true, false] {
            let listener = try SilentListener(dropsPackets: dropsPackets)
            defer { listener.close() }
            let config = try writeConfig(
                dir, port: listener.port, accessories: repositoryRoot.appendingPathComponent("Config/accessories").path)
            // Settled: the connect has started and is now waiting.
            let outcome = try await stop(
                config: config, in: "connecting to the broker", unless: "cannot reach the broker", settle: 1)
            assertStopped(
                outcome, dropsPackets ? "in a TCP connect that hangs" : "waiting for a CONNACK that never comes")
            XCTAssertFalse(
                outcome.log.contains("cannot reach the broker"), "the attempt ended before the signal: \(outcome.log)")
        }
    }

    func testSIGTERMWhilePublishingTheFirstTreeSaysOffline() async throws {
        let dir = try TemporaryDirectory(prefix: "homemqtt-stop-publish")
        let accessories = dir.file("accessories")
        try FileManager.default.createDirectory(atPath: accessories, withIntermediateDirectories: true)
        for i in 0..<3000 {
            try """
            name: Lamp \(i)
            manufacturer: Test Co
            room: Room \(i % 20)
            services:
              - type: lightbulb
                characteristics: { power-state: false, brightness: 50, hue: 10, saturation: 20 }
            """.write(toFile: accessories + "/lamp-\(i).yml", atomically: false, encoding: .utf8)
        }
        let broker = try await MosquittoBroker.start()
        addTeardownBlock { await broker.stop() }
        let status = try await MQTTTestSubscriber.start(
            broker: broker, filter: "home/$gateway/status", clientID: "status-watch")
        addTeardownBlock { await status.stop() }
        let config = try writeConfig(dir, port: broker.port, accessories: accessories)
        let outcome = try await stop(config: config, in: "publishing the tree", unless: "gateway online")
        assertStopped(outcome, "publishing the first tree")
        try await status.waitForMessage("offline", timeout: 5) { $0.string == "offline" }
        XCTAssertEqual(status.messages.map(\.string), ["offline"], "never online, and offline once")
    }

    func testSIGTERMWhileServingPublishesOfflineLast() async throws {
        let dir = try TemporaryDirectory(prefix: "homemqtt-stop-serve")
        let broker = try await MosquittoBroker.start()
        addTeardownBlock { await broker.stop() }
        let everything = try await MQTTTestSubscriber.start(broker: broker, filter: "home/#", clientID: "watch-all")
        addTeardownBlock { await everything.stop() }
        let config = try writeConfig(
            dir, port: broker.port, accessories: repositoryRoot.appendingPathComponent("Config/accessories").path)
        // A republication in flight when the signal comes: `offline` still comes after it.
        TestCensus.record(.binary)
        let gateway = try ChildProcess(BinaryEndToEndTests.binary, ["run", "--config", config])
        addTeardownBlock { await gateway.terminate(grace: 1) }
        try await everything.waitForMessage("online", timeout: 20) {
            $0.topic == "home/$gateway/status" && $0.string == "online"
        }
        try await runChecked(
            "mosquitto_pub", ["-p", "\(broker.port)", "-t", "home/$gateway/request/republish", "-m", "{}"])
        let start = ContinuousClock.now
        gateway.signal(SIGTERM)
        let status = try await gateway.waitForExit(timeout: 10)
        let elapsed = ContinuousClock.now - start
        print("figure: stopped while serving (a republication in flight) in \(elapsed), exit \(status)")
        XCTAssertEqual(status, 0, gateway.standardError)
        XCTAssertLessThan(elapsed, .seconds(Self.limit), "took \(elapsed) to stop while serving")
        try await everything.waitForMessage("offline", timeout: 5) {
            $0.topic == "home/$gateway/status" && $0.string == "offline"
        }
        try await Task.sleep(for: .milliseconds(300))
        let live = everything.messages.filter { !$0.retain }
        XCTAssertEqual(
            live.last?.topic, "home/$gateway/status",
            "the last message: \(live.last.map { "\($0.topic) \($0.string)" } ?? "none")")
        XCTAssertEqual(live.last?.string, "offline")
        XCTAssertEqual(live.filter { $0.topic == "home/$gateway/status" && $0.string == "offline" }.count, 1)
        // Retained: the broker keeps `offline` for every client that comes later.
        let reader = try await MQTTTestSubscriber.start(
            broker: broker, filter: "home/$gateway/status", clientID: "later")
        try await reader.waitForMessage("the retained status") { $0.retain }
        await reader.stop()
        XCTAssertEqual(reader.messages.first?.string, "offline")
    }
}
