import Foundation
import HomeKitBridgeTestSupport
import HomeModel
import TestSupport
import XCTest

/// The real binary with the garage door opener served standalone: its setup code and URI
/// (category 4) logged at the first start beside the bridge's, `homemqtt homekit code` listing
/// both, `homekit status --accessory` through the running gateway and on the state directory
/// without it, and the bridge leaving the accessory out.
final class HomeKitStandaloneBinaryTests: XCTestCase {
    func testTheCommandsShowTheStandaloneAccessory() async throws {
        TestCensus.record(.binary)
        let broker = try await MosquittoBroker.start()
        addTeardownBlock { await broker.stop() }
        let directory = try TemporaryDirectory(prefix: "homekit-standalone-binary")
        let accessories = try BridgedGateway.standaloneGarageFiles(in: directory)
        let config = directory.file("gateway.yml")
        try """
        broker:
          url: \(broker.url)
          client-id: homekit-standalone-binary
        state-directory: state
        poll-interval: 0
        sources:
          - type: simulator
            directory: \(accessories.path)
        homeassistant:
          enabled: false
        homekit:
          enabled: true
          port: 0
          listen: 127.0.0.1
        log-level: notice
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let binary = BinaryGateway.binary

        let run = try ChildProcess(binary, ["run", "--config", config])
        let marker = "HomeKit accessory 'Garage Door Opener': pair it"
        try await waitUntil("the accessory's code in the log", timeout: 30) {
            guard run.isRunning else { throw ProcessError("homemqtt run exited: \(run.standardError)") }
            return run.standardError.contains(marker)
        }
        let lines = run.standardError.split(separator: "\n")
        func setup(_ line: Substring?) throws -> (code: String, uri: String) {
            let line = try XCTUnwrap(line, run.standardError)
            let code = try XCTUnwrap(line.firstMatch(of: /[0-9]{3}-[0-9]{2}-[0-9]{3}/)).output
            let uri = try XCTUnwrap(line.firstMatch(of: /setup-uri=(X-HM:\/\/[0-9A-Z]{13})/)).output.1
            return (String(code), String(uri))
        }
        let bridge = try setup(lines.first { $0.contains("HomeKit bridge: pair it") })
        let alone = try setup(lines.first { $0.contains(marker) })
        XCTAssertNotEqual(alone.code, bridge.code)
        // The URI's payload carries category 4 (garage door opener) in bits 31…38.
        let payload = try XCTUnwrap(UInt64(alone.uri.dropFirst(7).prefix(9), radix: 36))
        XCTAssertEqual((payload >> 31) & 0xFF, 4)

        let shown = try await runChecked(binary, ["homekit", "code", "--no-qr", "--config", config])
        XCTAssertEqual(
            shown.standardOutput,
            "\(bridge.code)\n\(bridge.uri)\n\n\(alone.code)  (Garage Door Opener, sim:garage, standalone)\n\(alone.uri)\n"
        )

        let online = try await runChecked(
            binary, ["homekit", "status", "--accessory", "sim:garage", "--config", config], timeout: 30)
        let status = try JSONValue(parsing: Array(online.standardOutput.utf8))
        XCTAssertEqual(status["accessory"], "sim:garage", online.standardOutput)
        XCTAssertEqual(status["category"], 4)
        XCTAssertEqual(status["accessories"], 1)
        XCTAssertGreaterThan(status["port"]?.intValue ?? 0, 0)
        XCTAssertFalse(online.standardOutput.contains(alone.code))
        let bridgeStatus = try JSONValue(
            parsing: Array(try await runChecked(binary, ["homekit", "status", "--config", config]).standardOutput.utf8))
        XCTAssertEqual(bridgeStatus["accessories"]?.intValue, 12, "the bridge and the home's 12 but the garage")
        XCTAssertEqual(bridgeStatus["standalone"], ["sim:garage"])
        let exit = await run.terminate()
        XCTAssertEqual(exit, 0)

        // Stopped: its status from the state directory.
        let offline = try await runChecked(
            binary, ["homekit", "status", "--accessory", "sim:garage", "--config", config], timeout: 30)
        XCTAssertEqual(try JSONValue(parsing: Array(offline.standardOutput.utf8))["id"], status["id"])
    }
}
