import Foundation
import Gateway
import HomeMQTTApp
import HomeModel
import TestSupport
import WebTestSupport
import WebView
import XCTest

/// HTTP must never starve the gateway: connections are capped, a request head has a deadline
/// and a size bound, and what does not finish is closed. The web view served in process as
/// `homemqtt run` serves it (`ServedWeb`), on real sockets; moved from EndToEndTests, which
/// keeps the flood at a descriptor limit (`WebDescriptorLimitTests`: the limit is a process's,
/// and in process the flood's own sockets would count against it).
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

    /// At the cap a connection that has sent no whole head makes room for a new one; when every
    /// connection is busy (here two live pages) the new one is answered 503 and closed.
    func testAtTheCapSilentConnectionsMakeRoomAndBusyOnesDoNot() async throws {
        let light = light
        try await ServedWeb.onEveryBroker(web: "  max-connections: 2") { web in
            let silent = try RawConnection(port: web.port)
            try silent.send("GET /healthz HTTP/1.1\r\n")
            let page = try await web.page()
            let health = try await HTTP.get(web.url + "/healthz")
            XCTAssertEqual(health.status, 200, "a silent connection did not make room")
            let silentClosed = try await offThePool { silent.isClosed(within: 2) }
            XCTAssertTrue(silentClosed, "the silent connection was kept")

            // curl's connection is let go as its FIN is read: until then it holds the second
            // place, and a page tried meanwhile is refused (then tried again).
            var second: PageClient?
            try await waitUntil("room for a second page once curl was gone", timeout: 5, pollInterval: 0.1) {
                second = try? await web.page()
                return second != nil
            }
            let page2 = try XCTUnwrap(second, "no room for a second page once curl was gone")
            let refused = try RawConnection(port: web.port)
            try refused.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            let (bytes, closed) = try await offThePool { refused.receive(timeout: 5) }
            let text = String(decoding: bytes, as: UTF8.self)
            XCTAssertTrue(text.hasPrefix("HTTP/1.1 503 Service Unavailable"), text)
            XCTAssertTrue(text.contains("Retry-After: 5") && text.contains(#""code":"busy""#), text)
            XCTAssertTrue(closed)
            // The pages are still served.
            let answer = try await page2.request(light + "/brightness/set", "30")
            XCTAssertEqual(answer["status"], "ok", "\(answer)")
            await page2.close()
            await page.close()
        }
    }

    /// A head over `max-header-bytes` is answered 431 and closed; a partial head is answered
    /// 408 and closed at the head timeout; HEAD answers as GET without the body.
    func testHeadTooLargeOrLateAndHEAD() async throws {
        try await ServedWeb.onEveryBroker(web: "  head-timeout: 2\n  max-header-bytes: 16384") { web in
            let big = try RawConnection(port: web.port)
            try big.send(
                "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + String(repeating: "b", count: 200_000)
                    + "\r\n\r\n")
            let (bigStatus, bigClosed) = try await offThePool { (big.statusLine(timeout: 5), big.isClosed(within: 5)) }
            XCTAssertEqual(bigStatus, "HTTP/1.1 431 Request Header Fields Too Large")
            XCTAssertTrue(bigClosed)

            let late = try RawConnection(port: web.port)
            let start = ContinuousClock.now
            try late.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            let (lateStatus, lateClosed) = try await offThePool {
                (late.statusLine(timeout: 6), late.isClosed(within: 3))
            }
            XCTAssertEqual(lateStatus, "HTTP/1.1 408 Request Timeout")
            XCTAssertTrue(lateClosed)
            let waited = ContinuousClock.now - start
            XCTAssertGreaterThan(waited, .milliseconds(1500))
            XCTAssertLessThan(waited, .seconds(5))

            // A whole head just under the bound is served.
            let fine = try RawConnection(port: web.port)
            try fine.send(
                "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Fair: " + String(repeating: "f", count: 12_000)
                    + "\r\n\r\n")
            let fineStatus = try await offThePool { fine.statusLine(timeout: 5) }
            XCTAssertEqual(fineStatus, "HTTP/1.1 200 OK")

            let port = web.port
            for path in ["/", "/assets/app.js", "/api/home", "/healthz", "/metrics"] {
                let get = try await HTTP.get(web.url + path)
                let head = try await offThePool { try RawConnection.exchange(port: port, "HEAD", path) }
                XCTAssertEqual(head.status, "HTTP/1.1 200 OK", path)
                XCTAssertEqual(head.body, [], "\(path): HEAD sent a body")
                XCTAssertEqual(head.headers["content-type"], get.headers["content-type"], path)
                if path != "/metrics" {
                    XCTAssertEqual(head.headers["content-length"], "\(get.body.utf8.count)", path)
                }
            }
        }
    }
}
