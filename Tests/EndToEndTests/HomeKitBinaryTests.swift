import Foundation
import Gateway
import HomeModel
import TestSupport
import WebTestSupport
import XCTest

/// The real binary with `homekit.enabled`: the setup code in the log and its QR code on standard
/// error at the first start and never after, `homemqtt homekit code` showing the same code, URI
/// and QR code, the web view's SVG QR code for an administrator only, `homekit status` through
/// the running gateway and on the state directory without it. Every QR code is read by zbarimg.
final class HomeKitBinaryTests: XCTestCase {
    func testTheCodeIsLoggedOnceAndTheCommandsShowTheBridge() async throws {
        TestCensus.record(.binary)
        _ = try QRReader.zbarimg()
        let broker = try await MosquittoBroker.start()
        addTeardownBlock { await broker.stop() }
        let directory = try TemporaryDirectory(prefix: "homekit-binary")
        let config = directory.file("gateway.yml")
        let webPort = try freePort()
        let (admin, guest) = ("admin-token-0123456789", "guest-token-0123456789")
        func user(_ name: String, _ token: String, _ role: String) -> String {
            """
                - name: \(name)
                  token-sha256: \(AccessConfig.hex(AccessConfig.sha256(token)))
                  roles: { "*": \(role) }
            """
        }
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
        web:
          enabled: true
          listen: 127.0.0.1:\(webPort)
        access:
          users:
        \(user("admin", admin, "administrator"))
        \(user("guest", guest, "guest"))
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
        // Under it, the QR code of the URI (plain half blocks: the output is no terminal).
        XCTAssertFalse(shown.standardOutput.contains("\u{1B}"), "no colours into a pipe")
        let shownQR = try await QRReader.decode(QRReader.modules(terminal: shown.standardOutput, darkDrawn: false))
        XCTAssertEqual(shownQR, [String(uri)])
        let textOnly = try await runChecked(binary, ["homekit", "code", "--no-qr", "--config", config])
        XCTAssertEqual(textOnly.standardOutput, "\(code)\n\(uri)\n")
        // The first start's QR code on standard error, read as the same URI.
        try await waitUntil("the QR code on standard error", timeout: 10) {
            first.standardError.contains("Scan this code with the Home app")
        }
        let startQR = try await QRReader.decode(QRReader.modules(terminal: first.standardError, darkDrawn: false))
        XCTAssertEqual(startQR, [String(uri)])

        // The web view: the SVG QR code for an administrator; a guest gets neither it nor the code.
        let web = "http://127.0.0.1:\(webPort)"
        let svg = try await HTTP.get(web + "/api/homekit/setup.svg", headers: ["Authorization": "Bearer \(admin)"])
        XCTAssertEqual(svg.status, 200, svg.body)
        let webQR = try await QRReader.decode(QRReader.modules(svg: svg.body))
        XCTAssertEqual(webQR, [String(uri)])
        let setup = try await HTTP.get(web + "/api/homekit/setup", headers: ["Authorization": "Bearer \(admin)"])
        XCTAssertEqual(setup.json?["code"], .string(String(code)), setup.body)
        for path in ["/api/homekit/setup", "/api/homekit/setup.svg"] {
            let refused = try await HTTP.get(web + path, headers: ["Authorization": "Bearer \(guest)"])
            XCTAssertEqual(refused.status, 403, refused.body)
            XCTAssertFalse(refused.body.contains(String(code)), refused.body)
            XCTAssertFalse(refused.body.contains("<svg"), refused.body)
        }
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
        XCTAssertEqual(QRReader.modules(terminal: second.standardError, darkDrawn: false), [], "no QR code again")
        let secondExit = await second.terminate()
        XCTAssertEqual(secondExit, 0)
    }
}
