import HomeMQTTApp
import Foundation
import Gateway
import HomeModel
import TestSupport
import WebTestSupport
import WebView
import XCTest

/// HTTP must never starve the gateway: connections are capped below the descriptor limit, a
/// request head has a deadline and a size bound, and what does not finish is closed. The real
/// binary under a real descriptor limit (`prlimit`), on a real broker.
final class WebConnectionLimitTests: XCTestCase {
    let light = "home/garage/garage-door-opener/garage-light"

    func testLimitKeysAreReadAndBounded() throws {
        let config = try HomeMQTTApp.parseConfig(
            "web:\n  max-connections: 50\n  head-timeout: 2.5\n  idle-timeout: 30\n  max-header-bytes: 8192\n"
                + "  page-queue: 64\n", file: "g.yml")
        XCTAssertEqual(config[WebConfig.self].maxConnections, 50)
        XCTAssertEqual(config[WebConfig.self].headTimeout, 2.5)
        XCTAssertEqual(config[WebConfig.self].idleTimeout, 30)
        XCTAssertEqual(config[WebConfig.self].maxHeaderBytes, 8192)
        XCTAssertEqual(config[WebConfig.self].pageQueue, 64)
        let defaults = try HomeMQTTApp.parseConfig("base-topic: home\n", file: "g.yml")[WebConfig.self]
        XCTAssertEqual(defaults.maxConnections, 256)
        XCTAssertEqual(defaults.headTimeout, 10)
        for (bad, key) in [
            ("max-connections: 0", "web.max-connections"), ("head-timeout: 0", "web.head-timeout"),
            ("idle-timeout: -1", "web.idle-timeout"), ("max-header-bytes: 10", "web.max-header-bytes"),
            ("page-queue: many", "web.page-queue"), ("head-timeout: 7200", "web.head-timeout"),
        ] {
            XCTAssertThrowsError(try HomeMQTTApp.parseConfig("web:\n  \(bad)\n", file: "g.yml"), bad) { error in
                XCTAssertEqual((error as? ConfigError)?.key, key, "\(bad): \(error)")
            }
        }
    }

    /// 2,000 connections that send part of a head and fall silent, against a gateway limited to
    /// 1,024 descriptors (systemd's default): MQTT sets are answered and `/healthz` answers
    /// meanwhile, the gateway never runs out of descriptors, and every such connection is closed
    /// once its head is late.
    func testHalfOpenFloodAtTheDescriptorLimitStarvesNothing() async throws {
        let web = try await WebGateway.start(
            logLevel: "info", web: "  head-timeout: 3",
            launcher: [try findExecutable("prlimit"), "--nofile=1024:1024", "--"])
        addTeardownBlock { await web.stopAll() }
        let pid = try XCTUnwrap(web.process?.pid)
        XCTAssertTrue(web.log.contains("connections=256") || web.log.contains("connections: 256"), web.log)

        // Subscribed first: libmosquitto cannot use a descriptor above 1023 (select), and the
        // flood's sockets take those below.
        let result = try await web.subscribe(light + "/brightness/result")
        let response = try await web.subscribe("home/$gateway/response/room/add")
        var flood: [RawConnection] = []
        let opening = ContinuousClock.now
        for _ in 0..<2000 {
            // A connect can wait for a SYN to be retried while the listen backlog is full.
            let connection = try (try? RawConnection(port: web.port)) ?? RawConnection(port: web.port)
            try connection.send("GET /api/home HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            flood.append(connection)
        }
        print("figure: 2,000 half-open connections opened in \(ContinuousClock.now - opening)")
        let descriptors = openDescriptors(pid)

        // Meanwhile: /healthz, an MQTT set and its result, a request that writes the state file.
        let start = ContinuousClock.now
        let health = try await HTTP.get(web.url + "/healthz")
        XCTAssertEqual(health.status, 200, health.body)
        print("figure: /healthz during the flood answered in \(ContinuousClock.now - start)")
        let setStart = ContinuousClock.now
        try await web.publish(light + "/brightness/set", "61")
        let answer = try await result.waitForMessage("the set's result", timeout: 10)
        XCTAssertEqual(JSONValue.parse(answer.string)?["status"], "ok", answer.string)
        print("figure: MQTT set during the flood answered in \(ContinuousClock.now - setStart)")
        await result.stop()
        try await web.publish("home/$gateway/request/room/add", #"{"name": "Flood Room"}"#)
        let added = try await response.waitForMessage("the room added", timeout: 10)
        XCTAssertEqual(JSONValue.parse(added.string)?["status"], "ok", added.string)
        await response.stop()
        XCTAssertLessThan(descriptors, 1024 - ConnectionLimitFigures.reserve, "descriptors open during the flood")
        // /metrics says what the cap did: the oldest silent connections made room for new ones.
        let metrics = try await HTTP.get(web.url + "/metrics").body
        XCTAssertTrue(metrics.contains("homemqtt_web_connections_max 256.0"), metrics)
        let replaced = metrics.split(separator: "\n").first { $0.hasPrefix("homemqtt_web_connections_replaced ") }
        XCTAssertGreaterThan(replaced.flatMap { Double($0.split(separator: " ")[1]) } ?? 0, 1500, metrics)
        print("figure: gateway descriptors during the flood: \(descriptors) of 1024")

        // Every flood connection is closed: the late ones by the head timeout (3 s here).
        let closing = ContinuousClock.now
        for connection in flood {
            XCTAssertTrue(connection.isClosed(within: max(0.1, 8 - (ContinuousClock.now - closing).seconds)))
        }
        print("figure: all 2,000 closed within \(ContinuousClock.now - opening) of their opening")
        XCTAssertFalse(web.log.contains("Too many open files"), web.log)
        XCTAssertTrue(web.process?.isRunning ?? false)
    }

    /// At the cap a connection that has sent no whole head makes room for a new one; when every
    /// connection is busy (here two live pages) the new one is answered 503 and closed.
    func testAtTheCapSilentConnectionsMakeRoomAndBusyOnesDoNot() async throws {
        let web = try await WebGateway.start(web: "  max-connections: 2")
        addTeardownBlock { await web.stopAll() }
        let silent = try RawConnection(port: web.port)
        try silent.send("GET /healthz HTTP/1.1\r\n")
        let page = try await PageClient.connect("ws://127.0.0.1:\(web.port)/ws")
        addTeardownBlock { await page.close() }
        let health = try await HTTP.get(web.url + "/healthz")
        XCTAssertEqual(health.status, 200, "a silent connection did not make room")
        XCTAssertTrue(silent.isClosed(within: 2), "the silent connection was kept")

        // curl's connection is let go as its FIN is read: until then it holds the second place.
        var second: PageClient?
        for _ in 0..<50 where second == nil {
            second = try? await PageClient.connect("ws://127.0.0.1:\(web.port)/ws")
            if second == nil { try await Task.sleep(for: .milliseconds(100)) }
        }
        let page2 = try XCTUnwrap(second, "no room for a second page once curl was gone")
        addTeardownBlock { await page2.close() }
        let refused = try RawConnection(port: web.port)
        try refused.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        let (bytes, closed) = refused.receive(timeout: 5)
        let text = String(decoding: bytes, as: UTF8.self)
        XCTAssertTrue(text.hasPrefix("HTTP/1.1 503 Service Unavailable"), text)
        XCTAssertTrue(text.contains("Retry-After: 5") && text.contains(#""code":"busy""#), text)
        XCTAssertTrue(closed)
        // The pages are still served.
        let answer = try await page2.request(light + "/brightness/set", "30")
        XCTAssertEqual(answer["status"], "ok", "\(answer)")
    }

    /// A head over `max-header-bytes` is answered 431 and closed; a partial head is answered
    /// 408 and closed at the head timeout; HEAD answers as GET without the body.
    func testHeadTooLargeOrLateAndHEAD() async throws {
        let web = try await WebGateway.start(web: "  head-timeout: 2\n  max-header-bytes: 16384")
        addTeardownBlock { await web.stopAll() }

        let big = try RawConnection(port: web.port)
        try big.send(
            "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + String(repeating: "b", count: 200_000) + "\r\n\r\n")
        XCTAssertEqual(big.statusLine(timeout: 5), "HTTP/1.1 431 Request Header Fields Too Large")
        XCTAssertTrue(big.isClosed(within: 5))

        let late = try RawConnection(port: web.port)
        let start = ContinuousClock.now
        try late.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        XCTAssertEqual(late.statusLine(timeout: 6), "HTTP/1.1 408 Request Timeout")
        XCTAssertTrue(late.isClosed(within: 3))
        let waited = ContinuousClock.now - start
        XCTAssertGreaterThan(waited, .milliseconds(1500))
        XCTAssertLessThan(waited, .seconds(5))

        // A whole head just under the bound is served.
        let fine = try RawConnection(port: web.port)
        try fine.send(
            "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Fair: " + String(repeating: "f", count: 12_000) + "\r\n\r\n")
        XCTAssertEqual(fine.statusLine(timeout: 5), "HTTP/1.1 200 OK")

        for path in ["/", "/assets/app.js", "/api/home", "/healthz", "/metrics"] {
            let get = try await HTTP.get(web.url + path)
            let head = try RawConnection.exchange(port: web.port, "HEAD", path)
            XCTAssertEqual(head.status, "HTTP/1.1 200 OK", path)
            XCTAssertEqual(head.body, [], "\(path): HEAD sent a body")
            XCTAssertEqual(head.headers["content-type"], get.headers["content-type"], path)
            if path != "/metrics" {
                XCTAssertEqual(head.headers["content-length"], "\(get.body.utf8.count)", path)
            }
        }
    }
}

/// What the tests know of the gateway's reserve (`ConnectionLimiter.reserve`).
enum ConnectionLimitFigures {
    static let reserve = 64
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

extension JSONValue {
    static func parse(_ text: String) -> JSONValue? { try? JSONValue(parsing: Array(text.utf8)) }
}
