import Foundation
import HomeModel
import MQTT
import TestSupport
import XCTest

/// A state directory written by the previous release (commit 14db57d, Tests/Fixtures/state-14db57d:
/// rooms, names, assignments, a run-time scope and a HAP-python pairing, made by that version's
/// binary) under today's `homemqtt` binary, a real mosquitto and the same HAP-python accessory; then
/// `homemqtt backup`, a wiped state directory and `homemqtt restore`.
final class UpgradeAndBackupTests: XCTestCase {
    static let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../Fixtures/state-14db57d").standardizedFileURL
    static let accessories = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Config/accessories").standardizedFileURL
    /// The pairing stores the port the accessory had when the old version paired it. Each rig's
    /// accessory listens on a free port of its own, written into its copy of the pairing: two
    /// rigs on this one port collided when the end-to-end tests ran in parallel.
    static let fixturePort = 28153
    static let pairingFile = "pairings/hap-pairing-A4-4B-1E-CF-2B-D7.json"

    final class Rig: @unchecked Sendable {
        let directory: TemporaryDirectory
        var broker: MosquittoBroker
        var peer: HAPPeer?
        var gateway: ChildProcess?
        var config: String { directory.file("gateway.yml") }
        var state: String { directory.file("state") }

        init(directory: TemporaryDirectory, broker: MosquittoBroker) {
            self.directory = directory
            self.broker = broker
        }

        func writeConfig() throws {
            try """
            broker:
              url: \(broker.url)
              client-id: homemqtt-upgrade
            state-directory: \(state)
            poll-interval: 0
            request-timeout: 5
            sources:
              - type: simulator
                directory: \(UpgradeAndBackupTests.accessories.path)
              - type: hap
            homeassistant:
              enabled: false
            """.write(toFile: config, atomically: true, encoding: .utf8)
        }
    }

    /// The fixture's state and accessory copied (both are written to when used), a broker, the
    /// accessory running with its old keys, a config with the fixture's sources.
    func makeRig() async throws -> Rig {
        if let reason = HAPPeer.unavailableReason {
            if HAPPeer.isRequired { throw ProcessError("\(reason) (CI=true: the HAP tests must run)") }
            throw XCTSkip(reason)
        }
        let directory = try TemporaryDirectory(prefix: "homemqtt-upgrade")
        try FileManager.default.copyItem(
            atPath: Self.fixture.appendingPathComponent("state").path, toPath: directory.file("state"))
        try FileManager.default.copyItem(
            atPath: Self.fixture.appendingPathComponent("peer/peer.json").path, toPath: directory.file("peer.json"))
        let rig = Rig(directory: directory, broker: try await MosquittoBroker.start())
        addTeardownBlock {
            if let gateway = rig.gateway { await gateway.terminate(grace: 5) }
            await rig.peer?.stop()
            await rig.broker.stop()
        }
        let port = try freePort()
        let pairing = directory.file("state/" + Self.pairingFile)
        let stored = try String(contentsOfFile: pairing, encoding: .utf8)
        guard stored.contains("\"port\" : \(Self.fixturePort)") else {
            throw ProcessError("\(pairing) does not store port \(Self.fixturePort): \(stored)")
        }
        try stored.replacingOccurrences(of: "\"port\" : \(Self.fixturePort)", with: "\"port\" : \(port)")
            .write(toFile: pairing, atomically: true, encoding: .utf8)
        rig.peer = try await HAPPeer.start(port: port, state: directory.file("peer.json"))
        try rig.writeConfig()
        return rig
    }

    func homemqtt(_ arguments: [String]) async throws -> ProcessResult {
        try await runProcess(try builtProduct("homemqtt"), arguments, timeout: 60)
    }

    /// Runs the gateway until the HAP accessory's light and the simulated garage are on the
    /// broker; returns every retained `state` topic with its payload.
    func runGateway(_ rig: Rig) async throws -> (states: [String: String], observer: MQTTTestSubscriber) {
        let observer = try await MQTTTestSubscriber.start(
            broker: rig.broker, filter: "home/#", clientID: "upgrade-observer")
        addTeardownBlock { await observer.stop() }
        TestCensus.record(.binary)
        let gateway = try ChildProcess(try builtProduct("homemqtt"), ["run", "--config", rig.config])
        rig.gateway = gateway
        do {
            for prefix in [
                "home/workshop/peer-light/", "home/workshop/garage-door-opener/", "home/guest-room/porch-switch/",
            ] {
                try await observer.waitForMessage(prefix, timeout: 30) {
                    $0.topic.hasPrefix(prefix) && $0.topic.hasSuffix("/state")
                }
            }
        } catch {
            XCTFail("gateway stderr: \(gateway.standardError)")
            throw error
        }
        try await Task.sleep(for: .seconds(1))
        var states: [String: String] = [:]
        for message in observer.messages where message.topic.hasSuffix("/state") && !message.topic.contains("$") {
            states[message.topic] = message.string
        }
        return (states, observer)
    }

    func set(_ rig: Rig, _ observer: MQTTTestSubscriber, _ topic: String, _ value: String) async throws -> String {
        try await runChecked(
            "mosquitto_pub", rig.broker.clientArguments + ["-q", "1", "-t", "\(topic)/set", "-m", value])
        return try await observer.waitForMessage("\(topic)/result", timeout: 20) { $0.topic == "\(topic)/result" }
            .string
    }

    func testThePreviousReleasesStateIsMigratedWithItsRoomsNamesScopeAndAWorkingPairing() async throws {
        let rig = try await makeRig()
        let original = try Data(
            contentsOf: URL(fileURLWithPath: rig.state + "/pairings/hap-pairing-A4-4B-1E-CF-2B-D7.json"))
        let (states, observer) = try await runGateway(rig)
        let stderr = rig.gateway?.standardError ?? ""
        XCTAssertTrue(
            stderr.contains("migrated the state directory \(rig.state) from format 1 to \(StateFormat.current)"), stderr
        )

        // Rooms, names and assignments as the old version left them.
        let accessories = Set(states.keys.map { $0.split(separator: "/").prefix(3).joined(separator: "/") })
        for expected in [
            "home/workshop/garage-door-opener", "home/guest-room/coffee-maker-outlet", "home/study/desk-fan",
            "home/workshop/peer-light", "home/guest-room/porch-switch",
        ] {
            XCTAssertTrue(accessories.contains(expected), "\(expected) missing from \(accessories.sorted())")
        }
        // The run-time scope: nothing from the Bedroom, the Front Door Lock read-only.
        XCTAssertFalse(accessories.contains { $0.hasPrefix("home/bedroom/") }, "\(accessories.sorted())")
        let lock = try XCTUnwrap(
            states.keys.first { $0.contains("/front-door-lock/") && $0.hasSuffix("/target-lock-mechanism-state/state") }
        )
        let refused = try await set(rig, observer, String(lock.dropLast("/state".count)), "1")
        XCTAssertTrue(refused.contains("read-only"), refused)

        // The pairing works: the accessory answers a write made with the old keys.
        let light = try XCTUnwrap(
            states.keys.first { $0.hasPrefix("home/workshop/peer-light/") && $0.hasSuffix("/power-state/state") })
        let answer = try await set(rig, observer, String(light.dropLast("/state".count)), "true")
        XCTAssertTrue(answer.contains("\"status\":\"ok\""), answer)

        // The old files are kept as they were; the new ones carry their versions.
        let backups = try FileManager.default.contentsOfDirectory(atPath: rig.state + "/backups")
        let backup = try XCTUnwrap(backups.first { $0.hasPrefix("format-1-") }, "\(backups)")
        XCTAssertEqual(
            try Data(
                contentsOf: URL(
                    fileURLWithPath: "\(rig.state)/backups/\(backup)/pairings/hap-pairing-A4-4B-1E-CF-2B-D7.json")),
            original)
        let marker = try JSONValue(
            parsing: Array(try Data(contentsOf: URL(fileURLWithPath: rig.state + "/state.json"))))
        XCTAssertEqual(marker["format"]?.intValue, StateFormat.current)
        for file in ["scope.json", "pairings/hap-pairing-A4-4B-1E-CF-2B-D7.json"] {
            let json = try JSONValue(parsing: Array(try Data(contentsOf: URL(fileURLWithPath: "\(rig.state)/\(file)"))))
            XCTAssertEqual(json["version"]?.intValue, 1, file)
        }
        // The home database: version 2, its one home on the gateway's base topic.
        let database = try JSONValue(
            parsing: Array(try Data(contentsOf: URL(fileURLWithPath: rig.state + "/home.json"))))
        XCTAssertEqual(database["version"]?.intValue, 2)
        XCTAssertEqual(database["homes"]?.arrayValue?.count, 1)
        XCTAssertNil(database["homes"]?[0]?["baseTopic"])
    }

    func testBackupWipeRestoreServesTheSameTopicsWithAWorkingPairing() async throws {
        let rig = try await makeRig()
        let (before, _) = try await runGateway(rig)
        let archive = rig.directory.file("backup.json")

        // A backup while the gateway runs; a restore is refused while it holds the state.
        let backup = try await homemqtt(["backup", "--config", rig.config, "--output", archive])
        XCTAssertEqual(backup.status, 0, backup.standardError)
        var info = stat()
        XCTAssertEqual(stat(archive, &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o600)
        let held = try await homemqtt(["restore", "--config", rig.config, "--replace", archive])
        XCTAssertNotEqual(held.status, 0)
        XCTAssertTrue(held.standardError.contains("stop it first"), held.standardError)
        await rig.gateway?.terminate(grace: 5)

        // The state is lost; a new broker, so that only the restored gateway's topics are there.
        try FileManager.default.removeItem(atPath: rig.state)
        await rig.broker.stop()
        rig.broker = try await MosquittoBroker.start()
        try rig.writeConfig()
        let restore = try await homemqtt(["restore", "--config", rig.config, archive])
        XCTAssertEqual(restore.status, 0, restore.standardError)

        let (after, observer) = try await runGateway(rig)
        XCTAssertEqual(Set(after.keys), Set(before.keys))
        let light = try XCTUnwrap(
            after.keys.first { $0.hasPrefix("home/workshop/peer-light/") && $0.hasSuffix("/power-state/state") })
        let answer = try await set(rig, observer, String(light.dropLast("/state".count)), "false")
        XCTAssertTrue(answer.contains("\"status\":\"ok\""), answer)
    }
}
