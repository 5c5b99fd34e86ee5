import Foundation
import TestSupport
import XCTest

/// The page in a real browser: Debian's chromium, headless, driven by selenium through
/// chromium-driver (`browser/browser_test.py`, from the project's venv), against the real
/// binary and broker. Scripts/bootstrap.sh installs all three; a missing one fails the test.
final class BrowserTests: XCTestCase {
    let light = "home/garage/garage-door-opener/garage-light"
    static let python = repositoryRoot.appendingPathComponent(".venv/bin/python").path
    static let script = repositoryRoot.appendingPathComponent("Tests/WebViewTests/browser/browser_test.py").path

    /// Where the screenshots go: `.build/web-artifacts` (kept after the run, not in git).
    static let artifacts: String = {
        let path = repositoryRoot.appendingPathComponent(".build/web-artifacts").path
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }()

    static func requireBrowser() throws {
        for (path, what) in [
            ("/usr/bin/chromium", "chromium"), ("/usr/bin/chromedriver", "chromium-driver"),
            (python, "the venv (.venv)"),
        ] where !FileManager.default.isExecutableFile(atPath: path) {
            throw ProcessError("\(what) is missing at \(path): run Scripts/bootstrap.sh")
        }
    }

    func testTheHomesPageAddsAHomeThatIsServedAtOnceAndRemovesIt() async throws {
        try Self.requireBrowser()
        let web = try await WebGateway.start()
        addTeardownBlock { await web.stopAll() }
        let result = try await runProcess(
            Self.python,
            [
                Self.script, "--url", web.url, "--broker-port", "\(web.broker.port)", "--homes", "--artifacts",
                Self.artifacts,
            ],
            timeout: 120)
        XCTAssertEqual(result.status, 0, "\(result.standardOutput)\n\(result.standardError)\n\(web.log)")
        XCTAssertTrue(result.standardOutput.contains("homes test passed"), result.standardOutput)
    }

    /// The HomeKit page of a gateway whose bridge runs (no token: loopback, an administrator's
    /// view): the setup card with the code, and the QR code image as chromium drew it, which
    /// zbarimg reads as the setup URI the gateway logged.
    func testTheHomeKitPageShowsTheBridgesSetupQRCode() async throws {
        try Self.requireBrowser()
        let zbarimg = try QRReader.zbarimg()
        let web = try await WebGateway.start(
            extra: "homekit:\n  enabled: true\n  port: 0\n  listen: 127.0.0.1", logLevel: "notice")
        addTeardownBlock { await web.stopAll() }
        try await waitUntil("the bridge's setup in the log", timeout: 30) { web.log.contains("setup-uri=") }
        let uri = try XCTUnwrap(web.log.firstMatch(of: /setup-uri=(X-HM:\/\/[0-9A-Z]{13})/)?.output.1)
        let code = try XCTUnwrap(web.log.firstMatch(of: /setup code ([0-9]{3}-[0-9]{2}-[0-9]{3})/)?.output.1)
        let result = try await runProcess(
            Self.python, [Self.script, "--url", web.url, "--homekit", "--artifacts", Self.artifacts], timeout: 120)
        XCTAssertEqual(result.status, 0, "\(result.standardOutput)\n\(result.standardError)\n\(web.log)")
        XCTAssertTrue(result.standardOutput.contains("setup-code: \(code)\n"), result.standardOutput)
        XCTAssertTrue(result.standardOutput.contains("setup-uri: \(uri)\n"), result.standardOutput)
        let image = Self.artifacts + "/web-homekit-qr.png"
        let read = try await runChecked(zbarimg, ["--quiet", "--raw", image])
        XCTAssertEqual(read.standardOutput, "\(uri)\n")
        print("artifact: \(image)")
    }

    func testToggleLiveUpdateErrorAndReconnectInChromium() async throws {
        try Self.requireBrowser()
        let web = try await WebGateway.start()
        addTeardownBlock { await web.stopAll() }
        let browser = try ChildProcess(
            Self.python,
            [Self.script, "--url", web.url, "--broker-port", "\(web.broker.port)", "--artifacts", Self.artifacts],
            standardInput: true)
        addTeardownBlock { _ = await browser.terminate(grace: 2) }

        // The script asks for the restart once the page is open on an accessory.
        do {
            try await browser.waitForOutput(containing: "restart-gateway", timeout: 90)
        } catch {
            XCTFail("the browser steps failed before the restart:\n\(browser.standardOutput)\n\(browser.standardError)")
            throw error
        }
        let stopped = await web.stop()
        XCTAssertEqual(stopped, 0, web.log)
        try await Task.sleep(for: .seconds(1))
        try await web.start()
        try browser.write("restarted\n")
        let status = try await browser.waitForExit(timeout: 90)
        let output = browser.standardOutput
        XCTAssertEqual(status, 0, "\(output)\n\(browser.standardError)")
        XCTAssertTrue(output.contains("browser test passed"), output)
        for line in output.split(separator: "\n") where line.hasPrefix("figure:") { print(line) }
        for name in ["web-home.png", "web-accessory.png"] {
            let path = Self.artifacts + "/" + name
            let size = ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0
            XCTAssertGreaterThan(size, 10_000, "no screenshot at \(path)")
            print("artifact: \(path)")
        }
    }

    /// DNS rebinding in chromium: the web view loaded under `127.evil.example` and its likes
    /// (mapped to 127.0.0.1 as a rebinding DNS server would) is refused — the page, the API, a
    /// write and the live feed — while the same browser at 127.0.0.1 goes live.
    func testRebindingNamesAreRefusedInChromium() async throws {
        try Self.requireBrowser()
        let web = try await WebGateway.start()
        addTeardownBlock { await web.stopAll() }
        let state = try await web.subscribe(light + "/brightness/state")
        try await state.waitForMessage("the retained brightness")
        state.clear()
        let script = repositoryRoot.appendingPathComponent("Tests/WebViewTests/browser/rebinding_test.py").path
        let result = try await runProcess(Self.python, [script, "--port", "\(web.port)"], timeout: 120)
        XCTAssertEqual(result.status, 0, "\(result.standardOutput)\n\(result.standardError)")
        XCTAssertTrue(result.standardOutput.contains("rebinding test passed"), result.standardOutput)
        XCTAssertFalse(state.messages.contains { $0.string == "4" }, "a write from a rebinding name was applied")
        await state.stop()
    }
}
