import Foundation
import HomeModel
import TestSupport
import WebTestSupport
import XCTest

/// The live feed against clients that break the rules: a page that falls behind, a client frame
/// without its mask, messages that must close the socket with a given code (RFC 6455 §7.4.1).
/// Raw sockets against the web view served in process as `homemqtt run` serves it (`ServedWeb`);
/// moved from EndToEndTests, which keeps the gateway's memory under a page that never reads
/// (`WebSocketMemoryTests`: the resident memory measured is the binary's own).
final class WebSocketLimitTests: XCTestCase {
    /// Upgrades `/ws` on a raw connection and reads the first frames (home, history).
    static func openRawPage(_ web: ServedWeb, receiveBuffer: Int32? = nil) async throws -> RawConnection {
        let page = try RawConnection(port: web.port, receiveBuffer: receiveBuffer)
        let port = web.port
        let status = try await offThePool { try page.upgrade(host: "127.0.0.1:\(port)") }
        XCTAssertEqual(status, "HTTP/1.1 101 Switching Protocols")
        return page
    }

    /// A page that falls `page-queue` frames behind but still reads is told why: 1013, try
    /// again later.
    func testAPageLetGoIsToldToTryAgainLater() async throws {
        try await ServedWeb.onEveryBroker(web: "  page-queue: 8") { web in
            let page = try await Self.openRawPage(web, receiveBuffer: 4096)
            // What it does not read fills the sockets' buffers (megabytes on loopback); then the
            // answers wait in its queue, and the ninth overflows it. (Paced, not ordered: the
            // 32 requests a page may have waiting are answered, more would be answered busy.)
            for id in 0..<2000 {
                let request = #"{"id": \#(id), "topic": "home/$gateway/request/tree", "payload": "{}"}"#
                guard (try? page.send(RawConnection.textFrame(request))) != nil else { break }
                if id % 32 == 0 { try await Task.sleep(for: .milliseconds(20)) }
            }
            let ending = try await offThePool { page.awaitClose(timeout: 5) }
            XCTAssertEqual(ending.code, 1013)
            XCTAssertTrue(ending.closed)
        }
    }

    /// RFC 6455 §5.1: a server must fail the connection on an unmasked client frame (1002).
    func testAnUnmaskedClientFrameFailsTheConnectionWith1002() async throws {
        try await ServedWeb.onEveryBroker { web in
            let health = #"{"id": 1, "topic": "home/$gateway/request/health", "payload": "{}"}"#

            let masked = try await Self.openRawPage(web)
            try masked.send(RawConnection.textFrame(health))
            let answered = try await offThePool {
                masked.receive(timeout: 5) { String(decoding: $0, as: UTF8.self).contains(#""type":"answer""#) }
            }
            XCTAssertFalse(answered.closed, "a masked request closed the socket")
            XCTAssertTrue(String(decoding: answered.bytes, as: UTF8.self).contains(#""type":"answer""#))

            let unmasked = try await Self.openRawPage(web)
            try unmasked.send(RawConnection.textFrame(health, masked: false))
            let (code, closed, bytes) = try await offThePool { unmasked.awaitClose() }
            XCTAssertTrue(closed, "the connection stayed open after an unmasked frame")
            XCTAssertEqual(code, 1002)
            XCTAssertFalse(
                String(decoding: bytes, as: UTF8.self).contains(#""type":"answer""#),
                "the unmasked request was answered")
        }
    }

    /// Each way a client's message must end the socket, with its code.
    func testCloseCodesSayWhy() async throws {
        try await ServedWeb.onEveryBroker { web in
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
                let page = try await Self.openRawPage(web)
                let ending = try await offThePool {
                    try? page.send(bytes)
                    return page.awaitClose()
                }
                XCTAssertTrue(ending.closed, "\(what): still open")
                XCTAssertEqual(ending.code, code, what)
            }
            let still = try await HTTP.get(web.url + "/healthz").status
            XCTAssertEqual(still, 200)
        }
    }
}
