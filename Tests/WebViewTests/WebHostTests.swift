import Foundation
import TestSupport
import WebTestSupport
import WebView
import XCTest

/// DNS rebinding: which `Host` names are loopback (the routes' refusals of the others are in
/// `WebHostServedTests`, below).
final class WebHostTests: XCTestCase {
    func testLoopbackIsTheLiteralNamesAndAddresses() {
        for host in ["localhost", "LOCALHOST", "127.0.0.1", "127.1.2.3", "127.255.255.255", "::1", "0:0:0:0:0:0:0:1"] {
            XCTAssertTrue(WebConfig.isLoopback(host), host)
        }
        for host in [
            "127.evil.example", "127.0.0.1.evil.example", "localhost.evil", "localhost.", "128.0.0.1", "0.0.0.0",
            "::", "::2", "::ffff:8.8.8.8", "1.127.0.0", "127.0.0.256", "evil.example", "",
        ] {
            XCTAssertFalse(WebConfig.isLoopback(host), host)
        }
    }
}

/// DNS rebinding on the wire: a name of the attacker's (`127.evil.example`) resolved to 127.0.0.1
/// makes the browser send that name as `Host`. Without a token only loopback literals are served,
/// on every route; the web view served in process as `homemqtt run` serves it (`ServedWeb`),
/// through curl and raw sockets. Moved from EndToEndTests' `WebHostTests`, which keeps
/// `check-config`'s word on a listen address that looks loopback (the binary's exit status).
final class WebHostServedTests: XCTestCase {
    let light = "home/garage/garage-door-opener/garage-light"
    static let foreignNames = ["127.evil.example", "127.0.0.1.evil.example", "localhost.evil", "evil.example"]
    /// Every route that serves something; `/healthz` is apart (liveness, open to any Host).
    static let routes = [
        "/", "/index.html", "/assets/app.js", "/favicon.ico", "/api/home", "/api/session", "/api/pairings",
        "/metrics",
    ]

    func testForeignHostNamesAreRefusedOnEveryRouteWithoutAToken() async throws {
        let light = light
        try await ServedWeb.onEveryBroker { web in
            let (state, close) = try await web.subscriber(light + "/brightness/state")
            try await state.waitFor("the retained brightness") { _ in true }
            state.clear()
            let port = web.port

            for name in Self.foreignNames {
                let host = "\(name):\(port)"
                for path in Self.routes {
                    let answer = try await HTTP.get(web.url + path, headers: ["Host": host])
                    XCTAssertEqual(answer.status, 403, "GET \(path) as \(host): \(answer.body)")
                    XCTAssertEqual(answer.json?["code"], "forbidden-origin", "\(path) as \(host)")
                    let head = try await offThePool { try RawConnection.exchange(port: port, "HEAD", path, host: host) }
                    XCTAssertEqual(head.status, "HTTP/1.1 403 Forbidden", "HEAD \(path) as \(host)")
                }
                let write = try await HTTP.request(
                    "POST", web.url + "/api/request", headers: ["Host": host],
                    body: #"{"topic": "\#(light)/brightness/set", "payload": "3"}"#)
                XCTAssertEqual(write.status, 403, "POST as \(host): \(write.body)")
                let socket = try RawConnection(port: port)
                let status = try await offThePool { try socket.upgrade(host: host) }
                // Hummingbird answers a refused upgrade 400, whatever the handler said.
                XCTAssertTrue(status.hasPrefix("HTTP/1.1 4"), "/ws as \(host): \(status)")
                // Liveness only: whether the gateway runs and reaches the broker, nothing of the home.
                let health = try await HTTP.get(web.url + "/healthz", headers: ["Host": host])
                XCTAssertEqual(health.status, 200)
                XCTAssertNil(health.json?["accessories"])
            }
            // None of the writes reached the accessory. (The binary's test slept 500 ms; here a
            // write that is served, after them, says when the state has settled.)
            let served = try await HTTP.request(
                "POST", web.url + "/api/request", body: #"{"topic": "\#(light)/brightness/set", "payload": "5"}"#)
            XCTAssertEqual(served.json?.value(at: "answer", "status"), "ok", served.body)
            try await state.waitFor("the served write's state") { $0.string == "5" }
            XCTAssertFalse(state.elements.contains { $0.string == "3" }, "a refused write was applied")
            await close()

            // The literal loopback names are served, with any port or none.
            for host in ["127.0.0.1:\(port)", "localhost:\(port)", "127.9.9.9:\(port)", "localhost", "[::1]:\(port)"] {
                let home = try await HTTP.get(web.url + "/api/home", headers: ["Host": host])
                XCTAssertEqual(home.status, 200, "as \(host): \(home.body)")
            }
            let socket = try RawConnection(port: port)
            let upgraded = try await offThePool { try socket.upgrade(host: "localhost:\(port)") }
            XCTAssertTrue(upgraded.contains(" 101 "), upgraded)
        }
    }

    /// With a token any Host may be used, and the token is what is asked for.
    func testWithATokenForeignNamesNeedTheToken() async throws {
        let token = "host-\(UUID().uuidString)"
        try await ServedWeb.onEveryBroker(token: token) { web in
            let host = "127.evil.example:\(web.port)"
            let page = try await HTTP.get(web.url + "/", headers: ["Host": host])
            XCTAssertEqual(page.status, 200, "the page asks for the token itself")
            for path in ["/api/home", "/api/session", "/api/pairings", "/metrics"] {
                let refused = try await HTTP.get(web.url + path, headers: ["Host": host])
                XCTAssertEqual(refused.status, 401, path)
                let allowed = try await HTTP.get(
                    web.url + path, headers: ["Host": host, "Authorization": "Bearer \(token)"])
                XCTAssertEqual(allowed.status, 200, path)
            }
        }
    }
}
