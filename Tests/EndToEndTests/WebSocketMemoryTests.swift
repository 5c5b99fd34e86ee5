import Foundation
import HomeModel
import TestSupport
import WebTestSupport
import XCTest

/// The live feed against a page that never reads: the gateway's memory stays flat. Here because
/// the figure is the binary's own resident memory (`/proc/<pid>`): in process the test's own
/// clients, the publisher's messages and the broker would be counted with the gateway. The
/// other limits of `/ws` (1013, 1002, the close codes) moved to WebViewTests'
/// `WebSocketLimitTests`, served in process on real sockets.
final class WebSocketMemoryTests: XCTestCase {
    let light = "home/garage/garage-door-opener/garage-light"

    /// Upgrades `/ws` on a raw connection and reads the first frames (home, history).
    func openRawPage(_ web: WebGateway, receiveBuffer: Int32? = nil) throws -> RawConnection {
        let page = try RawConnection(port: web.port, receiveBuffer: receiveBuffer)
        let status = try page.upgrade(host: "127.0.0.1:\(web.port)")
        XCTAssertEqual(status, "HTTP/1.1 101 Switching Protocols")
        return page
    }

    /// A page that never reads while 20,000 updates happen: the gateway's memory stays flat, the
    /// page is let go, and the pages that read go on being served.
    func testAPageThatNeverReadsCannotGrowTheGatewaysMemory() async throws {
        let web = try await WebGateway.start(logLevel: "info")
        addTeardownBlock { await web.stopAll() }
        let pid = try XCTUnwrap(web.process?.pid)
        let reader = try await PageClient.connect("ws://127.0.0.1:\(web.port)/ws")
        addTeardownBlock { await reader.close() }
        try await reader.frames.waitFor("the home") { $0["type"] == "home" }

        let slow = try openRawPage(web, receiveBuffer: 4096)
        try await Task.sleep(for: .milliseconds(300))
        let baseline = try XCTUnwrap(residentMegabytes(pid))
        print("figure: RSS with a page open that never reads, before any update: \(baseline) MB")

        // While it is open, the slow page itself sends the requests, for the whole tree (an answer
        // of kilobytes it never reads), as fast as they are answered; once it is let go, sets
        // through MQTT. The gateway's memory is measured at 4,000, 12,000 and 20,000.
        var sent = 0
        var slowOpen = true
        var figures: [Int: Double] = [:]
        for checkpoint in [4000, 12000, 20000] {
            var lines: [String] = []
            while sent < checkpoint {
                let value = "\(sent % 100)"
                if slowOpen {
                    let request = #"{"id": \#(sent), "topic": "home/$gateway/request/tree", "payload": "{}"}"#
                    // Paced under the 32 requests a page may have waiting (more are answered busy).
                    if sent % 16 == 0 { try await Task.sleep(for: .milliseconds(20)) }
                    do {
                        try slow.send(RawConnection.textFrame(request))
                    } catch {
                        slowOpen = false
                        print("figure: the slow page was closed after \(sent) updates")
                        continue
                    }
                } else {
                    lines.append(value)
                }
                sent += 1
            }
            if !lines.isEmpty { try await publishLines(web, light + "/brightness/set", lines) }
            try await Task.sleep(for: .milliseconds(500))
            figures[checkpoint] = residentMegabytes(pid)
            print(
                "figure: RSS after \(checkpoint) updates with a page that never reads: \(figures[checkpoint] ?? -1) MB")
        }
        let peak = try XCTUnwrap(figures.values.max())
        XCTAssertLessThan(peak - baseline, 30, "RSS grew from \(baseline) to \(figures) MB")

        // The slow page was let go; the gateway says so; the reading page still gets updates.
        try await waitUntil("the slow page to be closed", timeout: 10) { slow.isClosed(within: 0.2) }
        XCTAssertTrue(web.log.contains("a page fell behind and was let go"), web.log)
        try await web.publish(light + "/brightness/set", "77")
        try await reader.update(of: light + "/brightness", timeout: 5) { $0 == 77 }
        let health = try await HTTP.get(web.url + "/healthz").status
        XCTAssertEqual(health, 200)
    }

    /// Sends each line as one message to `topic` with one `mosquitto_pub -l`.
    func publishLines(_ web: WebGateway, _ topic: String, _ lines: [String]) async throws {
        let directory = try TemporaryDirectory(prefix: "homemqtt-lines")
        let file = directory.file("lines")
        try (lines.joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
        try await runChecked(
            "sh", ["-c", "mosquitto_pub -p \(web.broker.port) -q 0 -t '\(topic)' -l < '\(file)'"])
    }
}
