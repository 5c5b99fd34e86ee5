import Foundation
import Logging
import NIOCore
import Synchronization
import TestSupport
import WebTestSupport
import XCTest

@testable import WebView

/// What the web view turns away as a matter of course is not a warning each time: each refusal
/// at debug level, one warning a minute with the counts. A declared body over the limit is
/// answered 413 before it is sent; `/ws` without a token gets the 401 every route gives. Served
/// in process as `homemqtt run` serves it (`ServedWeb`), on real sockets; moved from
/// EndToEndTests, where the binary ran it.
final class WebRefusalTests: XCTestCase {
    let light = "home/garage/garage-door-opener/garage-light"

    /// Every line logged, as `level message metadata`.
    final class Lines: LogHandler, @unchecked Sendable {
        let lines = Mutex<[String]>([])
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            let fields = (event.metadata ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            lines.withLock { $0.append("\(event.level) \(event.message) \(fields.joined(separator: " "))") }
        }
        var all: [String] { lines.withLock { $0 } }
        func at(_ level: Logger.Level) -> [String] { all.filter { $0.hasPrefix("\(level) ") } }
    }

    /// The first refusal warns at once; the next ones within the interval are debug lines only,
    /// and the warning at the interval's end counts each kind since the last warning.
    func testOneWarningPerIntervalWithTheCountsSinceTheLast() {
        let lines = Lines()
        let clock = Mutex(ContinuousClock.now)
        let log = RefusalLog(
            logger: Logger(label: "test") { _ in lines }, interval: .seconds(60), now: { clock.withLock { $0 } })
        log.note(.headTooLarge, peer: nil, on: nil)
        XCTAssertEqual(lines.at(.warning).count, 1)
        XCTAssertTrue(lines.at(.warning)[0].contains("head-too-large=1"), lines.at(.warning)[0])
        for _ in 0..<5 { log.note(.evicted, peer: nil, on: nil) }
        for _ in 0..<2 { log.note(.headTimeout, peer: nil, on: nil) }
        log.note(.bodyTooLarge, peer: nil, on: nil)
        clock.withLock { $0 += .seconds(30) }
        log.note(.busy, peer: nil, on: nil)
        XCTAssertEqual(lines.at(.warning).count, 1, "\(lines.all)")
        XCTAssertEqual(lines.at(.debug).count, 10, "\(lines.all)")

        // The interval is over: what was counted is told, once.
        clock.withLock { $0 += .seconds(30) }
        log.flush()
        let warnings = lines.at(.warning)
        XCTAssertEqual(warnings.count, 2, "\(lines.all)")
        XCTAssertTrue(warnings[1].contains("turned away 9 connection(s)"), warnings[1])
        for count in ["evicted=5", "head-timeout=2", "body-too-large=1", "busy=1", "head-too-large=0"] {
            XCTAssertTrue(warnings[1].contains(count), "\(count): \(warnings[1])")
        }
        log.flush()
        XCTAssertEqual(lines.at(.warning).count, 2, "a flush with nothing counted warned")
        // Quiet for a while: the next refusal warns at once again.
        clock.withLock { $0 += .seconds(61) }
        log.note(.evicted, peer: nil, on: nil)
        XCTAssertEqual(lines.at(.warning).count, 3)
        XCTAssertTrue(lines.at(.warning)[2].contains("evicted=1"), lines.at(.warning)[2])
    }

    /// The web view at log level debug: 431, 408, an eviction at the cap and a 413 are each a
    /// debug line; the log has one warning about them.
    func testRoutineRefusalsAreDebugLinesAndOneWarning() async throws {
        try await ServedWeb.onEveryBroker(
            web: "  head-timeout: 1\n  max-connections: 3\n  max-header-bytes: 16384", logLevel: .debug
        ) { web in
            let big = try RawConnection(port: web.port)
            try big.send(
                "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + String(repeating: "b", count: 40_000))
            let bigStatus = try await offThePool { big.statusLine(timeout: 5) }
            XCTAssertEqual(bigStatus, "HTTP/1.1 431 Request Header Fields Too Large")
            let late = try RawConnection(port: web.port)
            try late.send("GET /healthz HTTP/1.1\r\n")
            let lateStatus = try await offThePool { late.statusLine(timeout: 5) }
            XCTAssertEqual(lateStatus, "HTTP/1.1 408 Request Timeout")
            let body = try RawConnection(port: web.port)
            try body.send("POST /api/request HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5000000\r\n\r\n")
            let bodyStatus = try await offThePool { body.statusLine(timeout: 5) }
            XCTAssertTrue(bodyStatus.hasPrefix("HTTP/1.1 413 "), bodyStatus)
            // Three silent connections fill the cap; a fourth takes the oldest one's place.
            var silent: [RawConnection] = []
            for _ in 0..<4 {
                let connection = try RawConnection(port: web.port)
                try connection.send("GET /healthz HTTP/1.1\r\n")
                silent.append(connection)
            }
            let oldest = silent[0]
            let madeRoom = try await offThePool { oldest.isClosed(within: 3) }
            XCTAssertTrue(madeRoom, "no connection made room")

            try await waitUntil("a debug line for each kind", timeout: 10) {
                ["head-too-large", "head-timeout", "body-too-large", "evicted"].allSatisfy {
                    web.log.text.contains("kind=\($0)")
                }
            }
            // The binary's lines say ` debug ` and ` warning ` after the time; the rig's begin with the level.
            let text = web.log.text
            let lines = text.split(separator: "\n")
            let debug = lines.filter { $0.hasPrefix("debug ") && $0.contains("web view: connection ") }
            XCTAssertGreaterThanOrEqual(debug.count, 4, text)
            let warnings = lines.filter { $0.hasPrefix("warning ") && $0.contains("web view turned away") }
            XCTAssertEqual(warnings.count, 1, text)
            XCTAssertTrue(warnings.first?.contains("head-too-large=1") ?? false, text)
        }
    }

    /// A body declared over 1 MB is refused before it is sent: on a connection's first request
    /// by the guard (closed), on a later one of a keep-alive connection by the route.
    func testADeclaredBodyOverTheLimitIsAnswered413AtOnce() async throws {
        let light = light
        try await ServedWeb.onEveryBroker { web in
            let first = try RawConnection(port: web.port)
            let start = ContinuousClock.now
            try first.send(
                "POST /api/request HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    + "Content-Length: 2000000000\r\n\r\n")
            let (bytes, closed) = try await offThePool { first.receive(timeout: 5) }
            let text = String(decoding: bytes, as: UTF8.self)
            XCTAssertTrue(text.hasPrefix("HTTP/1.1 413 "), text)
            XCTAssertTrue(text.contains(#""code":"too-large""#), text)
            XCTAssertTrue(closed, "the connection stayed open with a body on its way")
            XCTAssertLessThan(ContinuousClock.now - start, .seconds(3))

            let later = try RawConnection(port: web.port)
            try later.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            let status = try await offThePool { later.statusLine(timeout: 5) }
            XCTAssertEqual(status, "HTTP/1.1 200 OK")
            _ = try await offThePool { later.receive(timeout: 0.5) }
            try later.send(
                "POST /api/request HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2000000000\r\n\r\n")
            let (laterBytes, _) = try await offThePool {
                later.receive(timeout: 5) { $0.firstRange(of: Array("too-large".utf8)) != nil }
            }
            let laterText = String(decoding: laterBytes, as: UTF8.self)
            XCTAssertTrue(laterText.hasPrefix("HTTP/1.1 413 "), laterText)
            XCTAssertTrue(laterText.contains(#""code":"too-large""#), laterText)

            // A body within the limit is served as before.
            let fine = try await HTTP.request(
                "POST", web.url + "/api/request", body: #"{"topic": "\#(light)/brightness/set", "payload": "40"}"#)
            XCTAssertEqual(fine.json?.value(at: "answer", "status"), "ok", fine.body)
        }
    }

    /// `/ws` without a token, or with a wrong one, answers 401 with the body every other route
    /// gives for a missing token; with the token it opens.
    func testWebSocketWithoutATokenIs401LikeEveryRoute() async throws {
        let light = light
        let token = "tok-\(UUID().uuidString)"
        try await ServedWeb.onEveryBroker(token: token) { web in
            let expected = try await HTTP.get(web.url + "/api/home")
            XCTAssertEqual(expected.status, 401)

            for path in ["/ws", "/ws?token=wrong"] {
                let connection = try RawConnection(port: web.port)
                let port = web.port
                let status = try await offThePool { try connection.upgrade(host: "127.0.0.1:\(port)", path: path) }
                XCTAssertEqual(status, "HTTP/1.1 401 Unauthorized")
                let (rest, _) = try await offThePool { connection.receive(timeout: 5) }
                XCTAssertEqual(String(decoding: rest, as: UTF8.self), expected.body, path)
            }
            let port = web.port
            let withHeader = try await offThePool {
                try HTTP1Upgrade.response(port: port, path: "/ws", extra: "Authorization: Bearer nope\r\n")
            }
            XCTAssertTrue(withHeader.hasPrefix("HTTP/1.1 401 Unauthorized\r\n"), withHeader)
            XCTAssertTrue(withHeader.contains("WWW-Authenticate: Bearer\r\n"), withHeader)
            XCTAssertTrue(withHeader.contains("Content-Type: application/json"), withHeader)

            let page = try await web.page("?token=\(token)")
            let answer = try await page.request(light + "/brightness/set", "30")
            await page.close()
            XCTAssertEqual(answer["status"], "ok", "\(answer)")
        }
    }
}
