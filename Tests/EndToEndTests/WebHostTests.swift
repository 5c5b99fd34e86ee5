import HomeMQTTApp
import Foundation
import Gateway
import HomeModel
import TestSupport
import WebTestSupport
import WebView
import XCTest

/// DNS rebinding: a name of the attacker's (`127.evil.example`) resolved to 127.0.0.1 makes the
/// browser send that name as `Host`. Without a token only loopback literals are served, on every
/// route; the real binary on a real broker, through curl and raw sockets.
final class WebHostTests: XCTestCase {
    let light = "home/garage/garage-door-opener/garage-light"
    static let foreignNames = ["127.evil.example", "127.0.0.1.evil.example", "localhost.evil", "evil.example"]
    /// Every route that serves something; `/healthz` is apart (liveness, open to any Host).
    static let routes = [
        "/", "/index.html", "/assets/app.js", "/favicon.ico", "/api/home", "/api/session", "/api/pairings",
        "/metrics",
    ]

    /// `web.listen: 127.attacker.example:8080` is a name, not loopback: it needs a token, and
    /// `check-config` says so naming the file and key.
    func testListenOnANameThatLooksLoopbackNeedsAToken() async throws {
        for listen in ["127.attacker.example:8080", "localhost.attacker.example:8080"] {
            XCTAssertThrowsError(
                try HomeMQTTApp.parseConfig("web:\n  enabled: true\n  listen: \(listen)\n", file: "/etc/g.yml")
            ) { error in
                XCTAssertEqual((error as? ConfigError)?.key, "web.token", listen)
            }
        }
        let directory = try TemporaryDirectory(prefix: "homemqtt-web-host")
        let config = directory.file("gateway.yml")
        try """
        sources:
          - type: simulator
            directory: \(repositoryRoot.appendingPathComponent("Config/accessories").path)
        web:
          enabled: true
          listen: 127.attacker.example:8080
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let result = try await runProcess(homemqttBinary, ["check-config", "--config", config], timeout: 20)
        XCTAssertEqual(result.status, 2, result.standardError)
        XCTAssertTrue(result.standardError.contains("\(config): web.token: required"), result.standardError)
        XCTAssertTrue(result.standardError.contains("127.attacker.example:8080"), result.standardError)
    }

    func testForeignHostNamesAreRefusedOnEveryRouteWithoutAToken() async throws {
        let web = try await WebGateway.start()
        addTeardownBlock { await web.stopAll() }
        let state = try await web.subscribe(light + "/brightness/state")
        try await state.waitForMessage("the retained brightness")
        state.clear()

        for name in Self.foreignNames {
            let host = "\(name):\(web.port)"
            for path in Self.routes {
                let answer = try await HTTP.get(web.url + path, headers: ["Host": host])
                XCTAssertEqual(answer.status, 403, "GET \(path) as \(host): \(answer.body)")
                XCTAssertEqual(answer.json?["code"], "forbidden-origin", "\(path) as \(host)")
                let head = try RawConnection.exchange(port: web.port, "HEAD", path, host: host)
                XCTAssertEqual(head.status, "HTTP/1.1 403 Forbidden", "HEAD \(path) as \(host)")
            }
            let write = try await HTTP.request(
                "POST", web.url + "/api/request", headers: ["Host": host],
                body: #"{"topic": "\#(light)/brightness/set", "payload": "3"}"#)
            XCTAssertEqual(write.status, 403, "POST as \(host): \(write.body)")
            let socket = try RawConnection(port: web.port)
            let status = try socket.upgrade(host: host)
            // Hummingbird answers a refused upgrade 400, whatever the handler said.
            XCTAssertTrue(status.hasPrefix("HTTP/1.1 4"), "/ws as \(host): \(status)")
            // Liveness only: whether the gateway runs and reaches the broker, nothing of the home.
            let health = try await HTTP.get(web.url + "/healthz", headers: ["Host": host])
            XCTAssertEqual(health.status, 200)
            XCTAssertNil(health.json?["accessories"])
        }
        // None of the writes reached the accessory.
        try await Task.sleep(for: .milliseconds(500))
        XCTAssertFalse(state.messages.contains { $0.string == "3" }, "a refused write was applied")
        await state.stop()

        // The literal loopback names are served, with any port or none.
        for host in [
            "127.0.0.1:\(web.port)", "localhost:\(web.port)", "127.9.9.9:\(web.port)", "localhost", "[::1]:\(web.port)",
        ] {
            let home = try await HTTP.get(web.url + "/api/home", headers: ["Host": host])
            XCTAssertEqual(home.status, 200, "as \(host): \(home.body)")
        }
        let socket = try RawConnection(port: web.port)
        let upgraded = try socket.upgrade(host: "localhost:\(web.port)")
        XCTAssertTrue(upgraded.contains(" 101 "), upgraded)
    }

    /// With a token any Host may be used, and the token is what is asked for.
    func testWithATokenForeignNamesNeedTheToken() async throws {
        let token = "host-\(UUID().uuidString)"
        let web = try await WebGateway.start(token: token)
        addTeardownBlock { await web.stopAll() }
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
