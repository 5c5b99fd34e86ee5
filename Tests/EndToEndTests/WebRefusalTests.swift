import Foundation
import Logging
import NIOCore
import Synchronization
import TestSupport
import XCTest

@testable import WebView

/// What the web view turns away as a matter of course is not a warning each time: each refusal
/// at debug level, one warning a minute with the counts. A declared body over the limit is
/// answered 413 before it is sent; `/ws` without a token gets the 401 every route gives.
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

    /// The real binary at log level debug: 431, 408, an eviction at the cap and a 413 are each
    /// a debug line; the log has one warning about them.
    func testRoutineRefusalsAreDebugLinesAndOneWarning() async throws {
        let web = try await WebGateway.start(
            logLevel: "debug", web: "  head-timeout: 1\n  max-connections: 3\n  max-header-bytes: 16384")
        addTeardownBlock { await web.stopAll() }

        let big = try RawConnection(port: web.port)
        try big.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + String(repeating: "b", count: 40_000))
        XCTAssertEqual(big.statusLine(timeout: 5), "HTTP/1.1 431 Request Header Fields Too Large")
        let late = try RawConnection(port: web.port)
        try late.send("GET /healthz HTTP/1.1\r\n")
        XCTAssertEqual(late.statusLine(timeout: 5), "HTTP/1.1 408 Request Timeout")
        let body = try RawConnection(port: web.port)
        try body.send("POST /api/request HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5000000\r\n\r\n")
        XCTAssertTrue(body.statusLine(timeout: 5).hasPrefix("HTTP/1.1 413 "))
        // Three silent connections fill the cap; a fourth takes the oldest one's place.
        var silent: [RawConnection] = []
        for _ in 0..<4 {
            let connection = try RawConnection(port: web.port)
            try connection.send("GET /healthz HTTP/1.1\r\n")
            silent.append(connection)
        }
        XCTAssertTrue(silent[0].isClosed(within: 3), "no connection made room")

        try await waitUntil("a debug line for each kind", timeout: 10) {
            ["head-too-large", "head-timeout", "body-too-large", "evicted"].allSatisfy {
                web.log.contains("kind=\($0)")
            }
        }
        let lines = web.log.split(separator: "\n")
        let debug = lines.filter { $0.contains(" debug ") && $0.contains("web view: connection ") }
        XCTAssertGreaterThanOrEqual(debug.count, 4, web.log)
        let warnings = lines.filter { $0.contains(" warning ") && $0.contains("web view turned away") }
        XCTAssertEqual(warnings.count, 1, web.log)
        XCTAssertTrue(warnings.first?.contains("head-too-large=1") ?? false, web.log)
    }

    /// A body declared over 1 MB is refused before it is sent: on a connection's first request
    /// by the guard (closed), on a later one of a keep-alive connection by the route.
    func testADeclaredBodyOverTheLimitIsAnswered413AtOnce() async throws {
        let web = try await WebGateway.start()
        addTeardownBlock { await web.stopAll() }

        let first = try RawConnection(port: web.port)
        let start = ContinuousClock.now
        try first.send(
            "POST /api/request HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                + "Content-Length: 2000000000\r\n\r\n")
        let (bytes, closed) = first.receive(timeout: 5)
        let text = String(decoding: bytes, as: UTF8.self)
        XCTAssertTrue(text.hasPrefix("HTTP/1.1 413 "), text)
        XCTAssertTrue(text.contains(#""code":"too-large""#), text)
        XCTAssertTrue(closed, "the connection stayed open with a body on its way")
        XCTAssertLessThan(ContinuousClock.now - start, .seconds(3))

        let later = try RawConnection(port: web.port)
        try later.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        XCTAssertEqual(later.statusLine(timeout: 5), "HTTP/1.1 200 OK")
        _ = later.receive(timeout: 0.5)
        try later.send(
            "POST /api/request HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2000000000\r\n\r\n")
        let (laterBytes, _) = later.receive(timeout: 5) { $0.firstRange(of: Array("too-large".utf8)) != nil }
        let laterText = String(decoding: laterBytes, as: UTF8.self)
        XCTAssertTrue(laterText.hasPrefix("HTTP/1.1 413 "), laterText)
        XCTAssertTrue(laterText.contains(#""code":"too-large""#), laterText)

        // A body within the limit is served as before.
        let fine = try await HTTP.request(
            "POST", web.url + "/api/request", body: #"{"topic": "\#(light)/brightness/set", "payload": "40"}"#)
        XCTAssertEqual(fine.json?.value(at: "answer", "status"), "ok", fine.body)
    }

    /// `/ws` without a token, or with a wrong one, answers 401 with the body every other route
    /// gives for a missing token; with the token it opens.
    func testWebSocketWithoutATokenIs401LikeEveryRoute() async throws {
        let token = "tok-\(UUID().uuidString)"
        let web = try await WebGateway.start(token: token)
        addTeardownBlock { await web.stopAll() }
        let expected = try await HTTP.get(web.url + "/api/home")
        XCTAssertEqual(expected.status, 401)

        for path in ["/ws", "/ws?token=wrong"] {
            let connection = try RawConnection(port: web.port)
            XCTAssertEqual(
                try connection.upgrade(host: "127.0.0.1:\(web.port)", path: path), "HTTP/1.1 401 Unauthorized")
            let (rest, _) = connection.receive(timeout: 5)
            XCTAssertEqual(String(decoding: rest, as: UTF8.self), expected.body, path)
        }
        let withHeader = try HTTP1Upgrade.response(
            port: web.port, path: "/ws", extra: "Authorization: Bearer nope\r\n")
        XCTAssertTrue(withHeader.hasPrefix("HTTP/1.1 401 Unauthorized\r\n"), withHeader)
        XCTAssertTrue(withHeader.contains("WWW-Authenticate: Bearer\r\n"), withHeader)
        XCTAssertTrue(withHeader.contains("Content-Type: application/json"), withHeader)

        let page = try await PageClient.connect("ws://127.0.0.1:\(web.port)/ws?token=\(token)")
        addTeardownBlock { await page.close() }
        let answer = try await page.request(light + "/brightness/set", "30")
        XCTAssertEqual(answer["status"], "ok", "\(answer)")
    }
}

/// A WebSocket upgrade's whole answer, head and body, on a raw connection.
enum HTTP1Upgrade {
    static func response(port: Int, path: String, extra: String = "") throws -> String {
        let connection = try RawConnection(port: port)
        try connection.send(
            "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" + extra + "\r\n")
        return String(decoding: connection.receive(timeout: 5).bytes, as: UTF8.self)
    }
}
