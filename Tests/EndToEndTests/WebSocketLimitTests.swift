import Foundation
import HomeModel
import TestSupport
import WebTestSupport
import XCTest

/// The live feed against clients that break the rules: a page that never reads, a client frame
/// without its mask, messages that must close the socket with a given code (RFC 6455 §7.4.1).
/// Raw sockets against the real binary on a real broker.
final class WebSocketLimitTests: XCTestCase {
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

    /// A page that falls `page-queue` frames behind but still reads is told why: 1013, try
    /// again later.
    func testAPageLetGoIsToldToTryAgainLater() async throws {
        let web = try await WebGateway.start(web: "  page-queue: 8")
        addTeardownBlock { await web.stopAll() }
        let page = try openRawPage(web, receiveBuffer: 4096)
        // What it does not read fills the sockets' buffers (megabytes on loopback); then the
        // answers wait in its queue, and the ninth overflows it.
        for id in 0..<2000 {
            let request = #"{"id": \#(id), "topic": "home/$gateway/request/tree", "payload": "{}"}"#
            guard (try? page.send(RawConnection.textFrame(request))) != nil else { break }
            if id % 32 == 0 { try await Task.sleep(for: .milliseconds(20)) }
        }
        let ending = page.awaitClose(timeout: 5)
        XCTAssertEqual(ending.code, 1013)
        XCTAssertTrue(ending.closed)
    }

    /// Sends each line as one message to `topic` with one `mosquitto_pub -l`.
    func publishLines(_ web: WebGateway, _ topic: String, _ lines: [String]) async throws {
        let directory = try TemporaryDirectory(prefix: "homemqtt-lines")
        let file = directory.file("lines")
        try (lines.joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
        try await runChecked(
            "sh", ["-c", "mosquitto_pub -p \(web.broker.port) -q 0 -t '\(topic)' -l < '\(file)'"])
    }

    /// RFC 6455 §5.1: a server must fail the connection on an unmasked client frame (1002).
    func testAnUnmaskedClientFrameFailsTheConnectionWith1002() async throws {
        let web = try await WebGateway.start()
        addTeardownBlock { await web.stopAll() }
        let health = #"{"id": 1, "topic": "home/$gateway/request/health", "payload": "{}"}"#

        let masked = try openRawPage(web)
        try masked.send(RawConnection.textFrame(health))
        let answered = masked.receive(timeout: 5) { String(decoding: $0, as: UTF8.self).contains(#""type":"answer""#) }
        XCTAssertFalse(answered.closed, "a masked request closed the socket")
        XCTAssertTrue(String(decoding: answered.bytes, as: UTF8.self).contains(#""type":"answer""#))

        let unmasked = try openRawPage(web)
        try unmasked.send(RawConnection.textFrame(health, masked: false))
        let (code, closed, bytes) = unmasked.awaitClose()
        XCTAssertTrue(closed, "the connection stayed open after an unmasked frame")
        XCTAssertEqual(code, 1002)
        XCTAssertFalse(
            String(decoding: bytes, as: UTF8.self).contains(#""type":"answer""#), "the unmasked request was answered")
    }

    /// Each way a client's message must end the socket, with its code.
    func testCloseCodesSayWhy() async throws {
        let web = try await WebGateway.start()
        addTeardownBlock { await web.stopAll() }
        let big = [UInt8](repeating: UInt8(ascii: "x"), count: 700_000)
        let cases: [(String, [UInt8], Int)] = [
            // Its header only: the length alone is refused, before the rest would be sent.
            (
                "a frame over 1 MB",
                Array(RawConnection.frame([UInt8](repeating: 0x20, count: (1 << 20) + 10)).prefix(14)), 1009
            ),
            (
                "a message over 1 MB in two fragments",
                RawConnection.frame(big, fin: false) + RawConnection.frame(big, opcode: 0x0), 1009
            ),
            ("text that is not UTF-8", RawConnection.frame([0x7B, 0xFF, 0xFE, 0x7D]), 1007),
            ("a reserved opcode", RawConnection.frame([1, 2], opcode: 0x3), 1002),
            ("the client's own close", RawConnection.frame([0x03, 0xE8], opcode: 0x8), 1000),
        ]
        for (what, bytes, code) in cases {
            let page = try openRawPage(web)
            try? page.send(bytes)
            let ending = page.awaitClose()
            XCTAssertTrue(ending.closed, "\(what): still open")
            XCTAssertEqual(ending.code, code, what)
        }
        let still = try await HTTP.get(web.url + "/healthz").status
        XCTAssertEqual(still, 200)
    }
}
