import Foundation
import HomeModel
import TestSupport
import XCTest

/// Text from the network never reaches a terminal raw: a LAN peer announces an instance name
/// and TXT values with escape sequences (clear screen, an OSC window title, a colour) and a
/// NUL (`peer/hostile_announcer.py`); `homemqtt discover` and the gateway's log show them as
/// `\u{1B}` escapes.
final class PeerTextTests: XCTestCase {
    static let announcer = RepoPaths.root.appendingPathComponent("Tests/HAPTests/peer/hostile_announcer.py").path
    /// What the announcer's name and model look like, escaped.
    static let name = #"Evil\u{1B}[2J\u{1B}]0;pwned\u{07}\u{00}Lamp"#
    static let model = #"Model\u{1B}[31mRed\u{00}"#

    /// Bytes a terminal acts on: ESC, BEL, NUL, any C0 but the line break, C1 (in UTF-8).
    func assertNoControlBytes(_ text: String, _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        let bad = text.unicodeScalars.filter {
            ($0.value < 0x20 && $0 != "\n") || (0x7F...0x9F).contains($0.value)
        }
        XCTAssertTrue(
            bad.isEmpty, "\(what) holds raw control characters \(bad.map { $0.value })", file: file, line: line)
    }

    func testDiscoverAndTheGatewayLogShowAHostilePeersTextEscaped() async throws {
        let ns = try await NetworkNamespace.create()
        addTeardownBlock { await ns.delete() }
        let homemqtt = try builtProduct("homemqtt")
        let directory = try TemporaryDirectory(prefix: "homemqtt-peer-text")
        let config = directory.file("gateway.yml")
        // No broker: the hap source's browser runs while the gateway waits for one.
        try """
        broker:
          url: mqtt://127.0.0.1:1883
        state-directory: \(directory.file("state"))
        sources:
          - type: hap
        homeassistant:
          enabled: false
        log-level: debug
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let announcer = try ChildProcess("ip", ns.exec + ["python3", Self.announcer, "30"])
        addTeardownBlock { await announcer.terminate(grace: 2) }

        let discovered = try await runProcess(
            "ip", ns.exec + [homemqtt, "discover", "--config", config, "--timeout", "3"], timeout: 30)
        XCTAssertEqual(discovered.status, 0, discovered.standardError)
        let line = discovered.standardOutput.split(separator: "\n").first { $0.hasPrefix("AB:CD:EF:01:23:45") }
        XCTAssertEqual(
            line.map(String.init),
            "AB:CD:EF:01:23:45  \(Self.name)  model \(Self.model)  category 5 (lightbulb)  unpaired  c#1  127.0.0.1:51826",
            discovered.standardOutput)
        assertNoControlBytes(discovered.standardOutput, "discover's output")
        assertNoControlBytes(discovered.standardError, "discover's errors")

        TestCensus.record(.binary)
        let gateway = try ChildProcess("ip", ns.exec + [homemqtt, "run", "--config", config])
        addTeardownBlock { await gateway.terminate(grace: 5) }
        try await waitUntil("the gateway to log the announced accessory", timeout: 20, pollInterval: 0.1) {
            gateway.standardError.contains("mDNS: accessory '")
        }
        await gateway.terminate(grace: 5)
        let log = gateway.standardError
        let announced = log.split(separator: "\n").first { $0.contains("mDNS: accessory '") }.map(String.init) ?? ""
        XCTAssertTrue(announced.contains("mDNS: accessory '\(Self.name)' announced"), announced)
        XCTAssertTrue(announced.contains("model=\(Self.model)"), announced)
        assertNoControlBytes(log, "the gateway's log")
    }

    /// The web view's HomeKit page, in headless chromium: the name and model a peer announced
    /// with HTML in them show as text in their cells, and no element they spelled exists.
    func testTheHomeKitPageShowsAPeersMarkupAsText() async throws {
        let python = RepoPaths.root.appendingPathComponent(".venv/bin/python").path
        for (path, what) in [("/usr/bin/chromium", "chromium"), ("/usr/bin/chromedriver", "chromium-driver")]
        where !FileManager.default.isExecutableFile(atPath: path) {
            throw ProcessError("\(what) is missing at \(path): run Scripts/bootstrap.sh")
        }
        try PeerProcess.requireVenv()
        let ns = try await NetworkNamespace.create()
        addTeardownBlock { await ns.delete() }
        let directory = try TemporaryDirectory(prefix: "homemqtt-peer-page")
        let config = directory.file("gateway.yml")
        try """
        broker:
          url: mqtt://127.0.0.1:1883
        state-directory: \(directory.file("state"))
        sources:
          - type: hap
        homeassistant:
          enabled: false
        web:
          enabled: true
          listen: 127.0.0.1:8080
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let broker = try ChildProcess("ip", ns.exec + ["mosquitto", "-p", "1883"])
        addTeardownBlock { await broker.terminate(grace: 2) }
        let announcer = try ChildProcess("ip", ns.exec + ["python3", Self.announcer, "60", "markup"])
        addTeardownBlock { await announcer.terminate(grace: 2) }
        TestCensus.record(.binary)
        let gateway = try ChildProcess("ip", ns.exec + [try builtProduct("homemqtt"), "run", "--config", config])
        addTeardownBlock { await gateway.terminate(grace: 5) }
        try await waitUntil("the web view in the namespace", timeout: 20, pollInterval: 0.2) {
            let probe = try await runProcess(
                "ip",
                ns.exec + ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:8080/healthz"])
            return probe.standardOutput == "200"
        }
        let page = try await runProcess(
            "ip",
            ns.exec + [
                python, RepoPaths.root.appendingPathComponent("Tests/HAPTests/peer/peer_text_browser.py").path, "--url",
                "http://127.0.0.1:8080",
            ], timeout: 90)
        XCTAssertEqual(page.status, 0, "\(page.standardOutput)\n\(page.standardError)\n\(gateway.standardError)")
    }
}
