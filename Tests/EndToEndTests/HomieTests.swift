import Foundation
import HomeModel
import TestSupport
import XCTest

/// The Homie v5 output of the real binary, seen by a Homie controller written from the
/// convention (`homie/homie_consumer.py`, paho-mqtt): discovery on `+/5/+/$state`, every
/// description and value checked point by point, sets, structural changes, and the root
/// device's `disconnected` and `lost`.
final class HomieTests: XCTestCase {
    static let consumer = HAPPeer.repositoryRoot.appendingPathComponent("Tests/HomieTests/homie/homie_consumer.py").path
    let root = "homemqtt-e2e"

    func consume(_ broker: MosquittoBroker, _ arguments: [String]) async throws -> JSONValue {
        guard FileManager.default.isExecutableFile(atPath: HAPPeer.python.path) else {
            throw ProcessError("no .venv: run Scripts/bootstrap.sh")
        }
        let result = try await runChecked(
            HAPPeer.python.path, [Self.consumer, "--port", "\(broker.port)"] + arguments, timeout: 40)
        return try JSONValue(parsing: Array(result.standardOutput.utf8))
    }

    func discover(_ broker: MosquittoBroker) async throws -> (devices: [String: JSONValue], violations: [String]) {
        let report = try await consume(broker, ["discover", "--wait-ready", root])
        let violations = report["violations"]?.arrayValue?.compactMap(\.stringValue) ?? []
        return (report["devices"]?.objectValue ?? [:], violations)
    }

    func startGateway(_ broker: MosquittoBroker) async throws -> (E2EConfig, ChildProcess) {
        let setup = try E2EConfig(
            brokerURL: "mqtt://127.0.0.1:\(broker.port)", extra: "homie:\n  enabled: true")
        let gateway = try await BinaryGateway.start(setup, broker: broker)
        return (setup, gateway)
    }

    func testAControllerDiscoversTheHomeAndSetsAValue() async throws {
        let broker = try await MosquittoBroker.start()
        addTeardownBlock { await broker.stop() }
        let (_, gateway) = try await startGateway(broker)
        addTeardownBlock { await gateway.terminate(grace: 2) }

        let (devices, violations) = try await discover(broker)
        XCTAssertEqual(violations, [], "points of the convention broken")
        let treeText = try await runChecked(
            "mosquitto_sub", broker.clientArguments + ["-t", "home/$gateway/tree", "-C", "1", "-W", "5"])
        let tree = try JSONValue(parsing: Array(treeText.standardOutput.utf8))
        let accessories = tree["rooms"]?.arrayValue?.flatMap { $0["accessories"]?.arrayValue ?? [] } ?? []
        XCTAssertGreaterThan(accessories.count, 3)
        let rootDevice = try XCTUnwrap(devices[root]?["description"])
        XCTAssertEqual(devices[root]?["state"], "ready")
        XCTAssertEqual(rootDevice["homie"], "5.0")
        XCTAssertNil(rootDevice["root"], "the root device names no root")
        let children = rootDevice["children"]?.arrayValue?.compactMap(\.stringValue) ?? []
        XCTAssertEqual(children.count, accessories.count, "one child device per accessory")
        print("figure: Homie devices: 1 root + \(children.count) children, \(violations.count) violations")

        // The garage's light: a settable percentage, its value as the gateway's `state` has it.
        let (garageID, garage) = try XCTUnwrap(
            devices.first { $0.value["description"]?["name"] == "Garage Door Opener" })
        XCTAssertEqual(garage["state"], "ready")
        XCTAssertEqual(garage["description"]?["root"]?.stringValue, root)
        let brightness = try XCTUnwrap(garage["description"]?["nodes"]?["garage-light"]?["properties"]?["brightness"])
        XCTAssertEqual(brightness["datatype"], "integer")
        XCTAssertEqual(brightness["format"], "0:100")
        XCTAssertEqual(brightness["unit"], "%")
        XCTAssertEqual(brightness["settable"], true)
        let door = try XCTUnwrap(garage["description"]?["nodes"]?["garage-door"]?["properties"]?["current-door-state"])
        XCTAssertEqual(door["datatype"], "enum")
        XCTAssertEqual(door["settable"], false)
        XCTAssertEqual(garage["values"]?["garage-door/current-door-state"], "closed")

        // A set as a controller sends it: the property reports it, and so does the gateway's topic.
        let set = try await consume(broker, ["set", "\(garageID)/garage-light/brightness", "30"])
        XCTAssertEqual(set["value"], "30", "\(set)")
        let state = try await runChecked(
            "mosquitto_sub",
            broker.clientArguments + [
                "-t", "home/garage/garage-door-opener/garage-light/brightness/state", "-C", "1", "-W", "5",
            ])
        XCTAssertEqual(state.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines), "30")
        // Refused by the same validation as `set`: said on the device's `$log/warn`.
        let refused = try await consume(broker, ["set", "\(garageID)/garage-light/brightness", "140"])
        XCTAssertEqual(refused["value"], "30")
        let log = refused["logs"]?.arrayValue?.first?.stringValue ?? ""
        XCTAssertTrue(log.contains("out-of-range"), "\(refused)")
        // An enum is set by name.
        let opened = try await consume(broker, ["set", "\(garageID)/garage-door/target-door-state", "open"])
        XCTAssertEqual(opened["value"], "open", "\(opened)")
    }

    func testStructuralChangesFollowTheLifecycleAndStoppingSaysDisconnected() async throws {
        let broker = try await MosquittoBroker.start()
        addTeardownBlock { await broker.stop() }
        let (_, gateway) = try await startGateway(broker)
        addTeardownBlock { await gateway.terminate(grace: 2) }
        let (before, _) = try await discover(broker)
        let (garageID, garage) = try XCTUnwrap(
            before.first { $0.value["description"]?["name"] == "Garage Door Opener" })
        let (lampID, _) = try XCTUnwrap(before.first { $0.value["description"]?["name"] == "Bedroom Lamp" })
        let states = try ChildProcess(
            "mosquitto_sub", broker.clientArguments + ["-t", "homie/5/\(garageID)/$state", "-v"])
        try await broker.waitForSubscription(to: "homie/5/\(garageID)/$state")

        for (op, payload) in [
            ("accessory/rename", #"{"accessory": "Garage Door Opener", "name": "Kilgo Door"}"#),
            ("accessory/remove", #"{"accessory": "Bedroom Lamp"}"#),
        ] {
            try await runChecked(
                "mosquitto_pub",
                broker.clientArguments + ["-q", "1", "-t", "home/$gateway/request/\(op)", "-m", payload])
        }
        try await Task.sleep(for: .seconds(1))
        let (after, violations) = try await discover(broker)
        XCTAssertEqual(violations, [])
        let renamed = try XCTUnwrap(after[garageID], "a device keeps its id when renamed")
        XCTAssertEqual(renamed["description"]?["name"], "Kilgo Door")
        let oldVersion = garage["description"]?["version"]?.int64Value ?? .max
        XCTAssertGreaterThan(renamed["description"]?["version"]?.int64Value ?? 0, oldVersion)
        XCTAssertNil(after[lampID], "a removed accessory's device is gone")
        XCTAssertFalse(
            after[root]?["description"]?["children"]?.arrayValue?.contains(.string(lampID)) ?? true,
            "and is no longer the root's child")
        // mosquitto_sub ends at its timeout (status 27) when nothing came, as it should here.
        let lampTopics = try await runProcess(
            "mosquitto_sub", broker.clientArguments + ["-t", "homie/5/\(lampID)/#", "-v", "-W", "1"])
        XCTAssertEqual(lampTopics.standardOutput, "", "every retained topic of the removed device is cleared")

        // The description changed only while `init`: init, then ready, around the rename.
        let status = await gateway.terminate(grace: 5)
        XCTAssertEqual(status, 0)
        states.signal(SIGTERM)
        let seen = states.standardOutput.split(separator: "\n").map {
            $0.split(separator: " ").last.map(String.init) ?? ""
        }
        XCTAssertEqual(Array(seen.prefix(3)), ["ready", "init", "ready"], "\(seen)")
        XCTAssertEqual(seen.last, "disconnected", "a gateway that stops says disconnected")
        let rootState = try await runChecked(
            "mosquitto_sub", broker.clientArguments + ["-t", "homie/5/\(root)/$state", "-C", "1", "-W", "5"])
        XCTAssertEqual(rootState.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines), "disconnected")
    }

    func testAGatewayThatDiesIsLostByItsWill() async throws {
        let broker = try await MosquittoBroker.start()
        addTeardownBlock { await broker.stop() }
        let (_, gateway) = try await startGateway(broker)
        _ = try await discover(broker)
        gateway.signal(SIGKILL)
        _ = try await gateway.waitForExit(timeout: 5)
        // The broker publishes the will as it sees the connection drop: retained, `lost`.
        var state = ""
        for _ in 0..<50 where state != "lost" {
            let result = try await runChecked(
                "mosquitto_sub", broker.clientArguments + ["-t", "homie/5/\(root)/$state", "-C", "1", "-W", "5"])
            state = result.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
            if state != "lost" { try await Task.sleep(for: .milliseconds(100)) }
        }
        XCTAssertEqual(state, "lost")
    }
}
