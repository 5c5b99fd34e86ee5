import HomeMQTTApp
import Foundation
import Gateway
import HomeModel
import TestSupport
import WebTestSupport
import WebView
import XCTest

/// HTTP must never starve the gateway: connections are capped below the descriptor limit. The
/// real binary under a real descriptor limit (`prlimit`), on a real broker: the limit is a
/// process's, and in process the flood's own 2,000 sockets would count against it. The cap, the
/// head's deadline and size bound and the limit keys moved to WebViewTests'
/// `WebConnectionLimitTests`, served in process on real sockets.
final class WebDescriptorLimitTests: XCTestCase {
    let light = "home/garage/garage-door-opener/garage-light"

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
