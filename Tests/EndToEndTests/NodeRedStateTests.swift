import Foundation
import HomeModel
import TestSupport
import XCTest

/// A Node-RED flow sees the same `state` values whether its broker config speaks MQTT 5 or
/// 3.1.1: the real binary against mosquitto, read by MQTT.js (the client Node-RED uses, Debian's
/// node-mqtt) through Node-RED's own "auto-detect" conversion (`node-red/auto_detect.js`).
final class NodeRedStateTests: XCTestCase {
    static let script = repositoryRoot.appendingPathComponent("Tests/GatewayTests/node-red/auto_detect.js").path
    static let nodePath = "/usr/share/nodejs"

    /// An accessory whose string values are a word and a text that reads as JSON.
    static let panel = """
        name: Label Panel
        manufacturer: Test Co
        model: LP-1
        serial: LP-1-0001
        firmware: 1.0.0
        room: Office
        services:
          - type: switch
            name: Panel
            characteristics:
              power-state: true
            custom:
              - uuid: 0A1B2C3D-0000-4000-8000-000000000001
                name: Label
                format: string
                permissions: [read, notify]
                value: Garage
              - uuid: 0A1B2C3D-0000-4000-8000-000000000002
                name: Code
                format: string
                permissions: [read, notify]
                value: "42"
        """

    func autoDetect(_ broker: MosquittoBroker) async throws -> (v5: JSONValue, v311: JSONValue) {
        guard FileManager.default.fileExists(atPath: Self.nodePath + "/mqtt/package.json") else {
            throw ProcessError("no MQTT.js in \(Self.nodePath): run Scripts/bootstrap.sh (node-mqtt)")
        }
        let run = try await runProcess(
            "node", [Self.script, "--port", "\(broker.port)"], timeout: 30, environment: ["NODE_PATH": Self.nodePath])
        XCTAssertEqual(run.status, 0, run.standardError)
        let seen = try JSONValue(parsing: Array(run.standardOutput.utf8))
        return (try XCTUnwrap(seen["5"]), try XCTUnwrap(seen["3.1.1"]))
    }

    func testAFlowSeesTheSameStateValuesOnMQTT5AndMQTT311() async throws {
        let dir = try TemporaryDirectory(prefix: "homemqtt-node-red")
        let accessories = dir.file("accessories")
        try FileManager.default.createDirectory(atPath: accessories, withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            atPath: repositoryRoot.appendingPathComponent("Config/accessories/garage.yml").path,
            toPath: accessories + "/garage.yml")
        try Self.panel.write(toFile: accessories + "/panel.yml", atomically: true, encoding: .utf8)
        let broker = try await MosquittoBroker.start()
        addTeardownBlock { await broker.stop() }
        let setup = try BinaryEndToEndTests.E2EConfig(brokerURL: "mqtt://127.0.0.1:\(broker.port)")
        let config = try String(contentsOfFile: setup.configPath, encoding: .utf8).replacingOccurrences(
            of: repositoryRoot.appendingPathComponent("Config/accessories").path, with: accessories)
        try config.write(toFile: setup.configPath, atomically: true, encoding: .utf8)
        let gateway = try await BinaryEndToEndTests.startGateway(setup, broker: broker)
        addTeardownBlock { await gateway.terminate(grace: 2) }

        let (v5, v311) = try await autoDetect(broker)
        print("figure: Node-RED auto-detect, MQTT 5:\n\(v5.encoded())\nMQTT 3.1.1:\n\(v311.encoded())")
        let topics = try XCTUnwrap(v5.objectValue).keys.sorted()
        XCTAssertEqual(topics, try XCTUnwrap(v311.objectValue).keys.sorted())
        XCTAssertGreaterThan(topics.count, 8, "\(topics)")
        for topic in topics {
            XCTAssertNil(v5[topic]?["error"], "\(topic): Node-RED would drop it on MQTT 5: \(v5[topic]!)")
            XCTAssertEqual(v5[topic]?["type"], v311[topic]?["type"], topic)
            XCTAssertEqual(v5[topic]?["value"], v311[topic]?["value"], topic)
        }
        // The values the issue named: a bool and a number, as such on both protocols.
        let light = "home/garage/garage-door-opener/garage-light"
        for seen in [v5, v311] {
            XCTAssertEqual(seen["\(light)/power-state/state"]?["value"], false)
            XCTAssertEqual(seen["\(light)/power-state/state"]?["type"], "boolean")
            XCTAssertEqual(seen["\(light)/brightness/state"]?["value"], 80)
            XCTAssertEqual(seen["\(light)/brightness/state"]?["type"], "number")
        }
        XCTAssertEqual(v5["\(light)/brightness/state"]?["contentType"], "application/json")
        // A word stays a string (text/plain); a string value that reads as JSON is read as
        // JSON on both, as Node-RED reads it over 3.1.1.
        let panelValues = topics.filter { $0.hasPrefix("home/office/label-panel/") }.compactMap { v5[$0] }
        XCTAssertTrue(
            panelValues.contains { $0["value"] == "Garage" && $0["contentType"] == "text/plain" }, "\(panelValues)")
        XCTAssertTrue(
            panelValues.contains { $0["value"] == 42 && $0["contentType"] == "application/json" }, "\(panelValues)")
    }
}
