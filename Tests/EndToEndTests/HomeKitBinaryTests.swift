import Foundation
import HomeModel
import TestSupport
import XCTest

/// The real binary with `homekit.enabled`: the setup code in the log at the first start and
/// never after, `homemqtt homekit code` showing the same code, `homekit status` through the
/// running gateway and on the state directory without it.
final class HomeKitBinaryTests: XCTestCase {
    func testTheCodeIsLoggedOnceAndTheCommandsShowTheBridge() async throws {
        TestCensus.record(.binary)
        let broker = try await MosquittoBroker.start()
        addTeardownBlock { await broker.stop() }
        let directory = try TemporaryDirectory(prefix: "homekit-binary")
        let config = directory.file("gateway.yml")
        try """
        broker:
          url: \(broker.url)
          client-id: homekit-binary
        state-directory: state
        poll-interval: 0
        sources:
          - type: simulator
            directory: \(HAPPeer.repositoryRoot.appendingPathComponent("Config/accessories").path)
        homeassistant:
          enabled: false
        homekit:
          enabled: true
          port: 0
          listen: 127.0.0.1
        log-level: notice
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let binary = BinaryGateway.binary

        let first = try ChildProcess(binary, ["run", "--config", config])
        try await waitUntil("the bridge's code in the log", timeout: 30) {
            guard first.isRunning else { throw ProcessError("homemqtt run exited: \(first.standardError)") }
            return first.standardError.contains("setup code")
        }
        let line = try XCTUnwrap(first.standardError.split(separator: "\n").first { $0.contains("setup code") })
        let code = try XCTUnwrap(line.firstMatch(of: /[0-9]{3}-[0-9]{2}-[0-9]{3}/)).output

        let shown = try await runChecked(binary, ["homekit", "code", "--config", config])
        let shownLines = shown.standardOutput.split(separator: "\n")
        XCTAssertEqual(shownLines.first.map(String.init), String(code))
        // The setup URI on the next line, as the log line gives it.
        let uri = try XCTUnwrap(line.firstMatch(of: /setup-uri=(X-HM:\/\/[0-9A-Z]{13})/)).output.1
        XCTAssertEqual(shownLines.dropFirst().first.map(String.init), String(uri))
        let online = try await runChecked(binary, ["homekit", "status", "--config", config], timeout: 30)
        let status = try JSONValue(parsing: Array(online.standardOutput.utf8))
        XCTAssertGreaterThan(status["port"]?.intValue ?? 0, 0, online.standardOutput)
        XCTAssertEqual(status["paired"], false)
        XCTAssertEqual(
            status["accessories"]?.intValue, 13,
            "the bridge and the simulated home's 12 (its bridge has nothing to control)")
        XCTAssertFalse(online.standardOutput.contains(String(code)))
        let firstExit = await first.terminate()
        XCTAssertEqual(firstExit, 0)

        // Stopped: the status from the state directory; started again: the code is not logged.
        let offline = try await runChecked(binary, ["homekit", "status", "--config", config], timeout: 30)
        XCTAssertEqual(try JSONValue(parsing: Array(offline.standardOutput.utf8))["id"], status["id"])
        let second = try ChildProcess(binary, ["run", "--config", config])
        try await waitUntil("the gateway online again", timeout: 30) {
            guard second.isRunning else { throw ProcessError("homemqtt run exited: \(second.standardError)") }
            let again = try? await runProcess(binary, ["homekit", "status", "--config", config], timeout: 30)
            return again.flatMap { try? JSONValue(parsing: Array($0.standardOutput.utf8)) }?["port"] != nil
        }
        XCTAssertFalse(second.standardError.contains(String(code)), second.standardError)
        let secondExit = await second.terminate()
        XCTAssertEqual(secondExit, 0)
    }
}
