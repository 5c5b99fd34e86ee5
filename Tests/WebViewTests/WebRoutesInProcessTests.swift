import Foundation
import Gateway
import HomeModel
import TestSupport
import XCTest

/// The web view's routes in process (`WebRig`: HummingbirdTesting's live server, a gateway on
/// the memory broker): the pages, the JSON API's answers, `/metrics` and `/healthz`, the
/// token's and the roles' refusals. Moved from EndToEndTests' `WebRoutesTests`, which keeps
/// what needs the binary (a `Host` name of another site, the stop with SIGTERM); the roles'
/// refusals are in `AccessRolesTests` there too, beside the broker's ACL.
final class WebRoutesInProcessTests: XCTestCase {
    static let light = "home/garage/garage-door-opener/garage-light"

    func testPagesAssetsHealthAndTheJSONAPIWithoutAToken() async throws {
        try await WebRig.run { web in
            let light = Self.light
            let page = try await web.get("/")
            XCTAssertEqual(page.status, 200)
            XCTAssertEqual(page.header("Content-Type"), "text/html; charset=utf-8")
            XCTAssertTrue(page.body.contains("<script src=\"/assets/app.js\">"))
            XCTAssertTrue(page.header("Content-Security-Policy")?.contains("default-src 'self'") ?? false)
            let etag = try XCTUnwrap(page.header("ETag"))
            let again = try await web.get("/", headers: ["If-None-Match": etag])
            XCTAssertEqual(again.status, 304, "an unchanged page is not sent again")
            let index = try await web.get("/index.html")
            XCTAssertEqual(index.body, page.body)
            for (path, type) in [
                ("/assets/app.js", "text/javascript"), ("/assets/app.css", "text/css"),
                ("/assets/favicon.svg", "image/svg+xml"), ("/favicon.ico", "image/svg+xml"),
            ] {
                let asset = try await web.get(path)
                XCTAssertEqual(asset.status, 200, path)
                XCTAssertTrue(asset.header("Content-Type")?.hasPrefix(type) ?? false, "\(path): \(asset.headers)")
            }
            let missing = try await web.get("/assets/nothing.js")
            XCTAssertEqual(missing.status, 404)
            XCTAssertEqual(missing.json?["code"], "not-found")
            let unknownPath = try await web.get("/no/such/path").status
            XCTAssertEqual(unknownPath, 404)

            let health = try await web.get("/healthz")
            XCTAssertEqual(health.status, 200)
            XCTAssertEqual(health.json?["status"], "ok")
            XCTAssertEqual(health.json?["broker"], "connected")
            let session = try await web.get("/api/session")
            XCTAssertEqual(session.status, 200)
            XCTAssertEqual(session.json?["base"], "home")

            let home = try await web.get("/api/home")
            XCTAssertEqual(home.status, 200)
            let document = try XCTUnwrap(home.json)
            XCTAssertEqual(document["type"], "home")
            XCTAssertEqual(document["accessories"]?.arrayValue?.count, 13)
            let garage = try XCTUnwrap(document["accessories"]?.arrayValue?.first { $0["id"] == "sim:garage" })
            XCTAssertEqual(garage["manufacturer"], "Kilgo Devices, Inc.")
            XCTAssertEqual(garage["reachable"], true)
            XCTAssertNotNil(garage["tile"], "a tile shows the garage's main value")
            let services = try XCTUnwrap(garage["services"]?.arrayValue)
            let lamp = try XCTUnwrap(services.first { $0["topic"] == .string(light) })
            XCTAssertEqual(lamp["toggle"], "power-state")
            let brightness = try XCTUnwrap(lamp["chars"]?.arrayValue?.first { $0["slug"] == "brightness" })
            let meta = try XCTUnwrap(document["metas"]?[Int(brightness["m"]?.intValue ?? -1)])
            XCTAssertEqual(meta["min"]?.doubleValue, 0)
            XCTAssertEqual(meta["max"]?.doubleValue, 100)
            XCTAssertEqual(meta["unit"], "percentage")
            XCTAssertEqual(meta["perms"], ["read", "write", "notify"])

            let pairings = try await web.get("/api/pairings")
            XCTAssertEqual(pairings.json?["hap"], false, "no hap source: no pairings to list")
            XCTAssertEqual(pairings.json?["pairings"], [])

            // The rig's exporter is this gateway's alone (`WebMetrics.separate()`); the counters
            // are still read as differences across this test.
            let okBefore = try await web.metric(#"homemqtt_answers_total{op="set",code="ok"}"#)
            let refusedBefore = try await web.metric(#"homemqtt_answers_total{op="set",code="out-of-range"}"#)
            let reconnectsBefore = try await web.metric("homemqtt_broker_reconnects_total")

            // A write through the HTTP API: the same answer as on MQTT, and the value on MQTT.
            web.seen.clear()
            let set = try await web.request(
                .post, "/api/request", body: #"{"id": 7, "topic": "\#(light)/brightness/set", "payload": "35"}"#)
            XCTAssertEqual(set.status, 200, set.body)
            XCTAssertEqual(set.json?["id"], 7)
            XCTAssertEqual(set.json?["answer"]?["status"], "ok", set.body)
            try await web.seen.waitFor("brightness 35 on MQTT") {
                $0.topic == light + "/brightness/state" && $0.string == "35"
            }
            let refused = try await web.request(
                .post, "/api/request", body: #"{"topic": "\#(light)/brightness/set", "payload": "140"}"#)
            XCTAssertEqual(refused.json?["answer"]?["code"], "out-of-range")
            XCTAssertEqual(refused.json?["answer"]?["message"], "brightness must be 0…100, got 140")
            let garbage = try await web.request(.post, "/api/request", body: "not json")
            XCTAssertEqual(garbage.status, 200)
            XCTAssertEqual(garbage.json?["answer"]?["code"], "invalid-json")

            let metrics = try await web.get("/metrics")
            XCTAssertEqual(metrics.status, 200)
            XCTAssertTrue(metrics.header("Content-Type")?.hasPrefix("text/plain; version=0.0.4") ?? false)
            for line in [
                "homemqtt_accessories 13.0", "homemqtt_accessories_reachable 13.0", "homemqtt_broker_connected 1.0",
            ] {
                XCTAssertTrue(metrics.body.contains(line), "/metrics lacks \(line):\n\(metrics.body)")
            }
            let ok = try await web.metric(#"homemqtt_answers_total{op="set",code="ok"}"#)
            XCTAssertEqual(ok - okBefore, 1, "sets answered ok")
            let outOfRange = try await web.metric(#"homemqtt_answers_total{op="set",code="out-of-range"}"#)
            XCTAssertEqual(outOfRange - refusedBefore, 1, "sets refused out of range")
            let reconnects = try await web.metric("homemqtt_broker_reconnects_total")
            XCTAssertEqual(reconnects - reconnectsBefore, 0, "reconnects")
            for family in [
                "homemqtt_mqtt_messages_received_total", "homemqtt_mqtt_messages_published_total",
                #"homemqtt_source_events_total{kind="value"}"#, "homemqtt_request_duration_seconds_bucket",
            ] {
                XCTAssertTrue(metrics.body.contains(family), "/metrics lacks \(family)")
            }
        }
    }

    /// Without a token the web view refuses a page of another site (any page the user visits
    /// could otherwise reach 127.0.0.1); the same request from its own page is served.
    /// Issue 44: each accessory's last seen in the home document, as its `$last-seen` says it;
    /// later after the gateway hears from it, kept while it is unreachable, and its reconnect
    /// counted when it is back.
    func testTheHomeDocumentHasEachAccessorysLastSeen() async throws {
        let light = Self.light
        let garageTopic = "home/garage/garage-door-opener"
        try await WebRig.run { web in
            func garage() async throws -> (object: JSONValue, at: Double, reconnects: Int?) {
                let home = try await web.get("/api/home")
                XCTAssertEqual(home.status, 200, home.body)
                let accessories = try XCTUnwrap(home.json?["accessories"]?.arrayValue)
                // Every accessory was heard from when it was described.
                XCTAssertEqual(accessories.filter { $0["seen"] == nil }.map { $0["topic"] }, [])
                let object = try XCTUnwrap(accessories.first { $0["topic"] == .string(garageTopic) })
                let at = try XCTUnwrap(object["seen"]?["at"]?.doubleValue, "\(object)")
                return (object, at, object["seen"]?["reconnects"]?.intValue)
            }
            let first = try await garage()
            XCTAssertEqual(first.reconnects, 0)
            // Not before the retained `$last-seen` published at start (the page reads the gateway's
            // table, which only moves on; MQTT gets it at most once per `last-seen-interval`).
            let retained = try XCTUnwrap(
                web.broker.retainedText(under: garageTopic + "/$last-seen")[garageTopic + "/$last-seen"])
            let document = try JSONValue(parsing: Array(retained.utf8))
            let published = try XCTUnwrap(
                document["last-seen"]?.stringValue.flatMap {
                    try? Date($0, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true))
                })
            XCTAssertGreaterThanOrEqual(first.at, (published.timeIntervalSince1970 * 1000).rounded(.down))
            XCTAssertEqual(document["reconnects"], 0)

            web.seen.clear()
            try await web.publish(light + "/brightness/set", "37")
            try await web.seen.waitFor("brightness 37 on MQTT") {
                $0.topic == light + "/brightness/state" && $0.string == "37"
            }
            let afterWrite = try await garage()
            XCTAssertGreaterThan(afterWrite.at, first.at, "the write is hearing from it")

            let id = try XCTUnwrap(first.object["id"]?.stringValue)
            let markedFalse = await web.home.setReachable(id, false)
            XCTAssertTrue(markedFalse, "\(id) is in the simulated home")
            try await web.seen.waitFor("garage offline") {
                $0.topic == garageTopic + "/$availability" && $0.string == "offline"
            }
            let away = try await garage()
            XCTAssertEqual(away.object["reachable"], false)
            XCTAssertEqual(away.at, afterWrite.at, "an unreachable accessory keeps its last seen")
            let markedTrue = await web.home.setReachable(id, true)
            XCTAssertTrue(markedTrue, "\(id) is in the simulated home")
            try await web.seen.waitFor("garage online") {
                $0.topic == garageTopic + "/$availability" && $0.string == "online"
            }
            let back = try await garage()
            XCTAssertEqual(back.object["reachable"], true)
            XCTAssertEqual(back.reconnects, 1)
            XCTAssertGreaterThan(back.at, away.at)
        }
    }

    func testAnotherSitesPageIsRefused() async throws {
        try await WebRig.run { web in
            let body = #"{"topic": "\#(Self.light)/$toggle", "payload": ""}"#
            let crossSite = try await web.request(
                .post, "/api/request", headers: ["Origin": "https://evil.example"], body: body)
            XCTAssertEqual(crossSite.status, 403)
            XCTAssertEqual(crossSite.json?["code"], "forbidden-origin")
            let sameSite = try await web.request(
                .post, "/api/request", headers: ["Origin": "http://localhost"], body: body)
            XCTAssertEqual(sameSite.json?["answer"]?["status"], "ok", sameSite.body)
        }
    }

    /// With a token: every route but the page and /healthz wants it, from the header, the query
    /// or the cookie the page gets; a wrong one is refused; and it is never logged.
    func testTheTokenGuardsEveryRouteAndIsNeverLogged() async throws {
        let token = "tok-\(UUID().uuidString)"
        try await WebRig.run(token: token, logLevel: .trace) { web in
            let pageStatus = try await web.get("/").status
            XCTAssertEqual(pageStatus, 200, "the page itself asks for the token")
            let healthStatus = try await web.get("/healthz").status
            XCTAssertEqual(healthStatus, 200)
            for path in ["/api/home", "/api/session", "/api/pairings", "/metrics"] {
                let refused = try await web.get(path)
                XCTAssertEqual(refused.status, 401, path)
                XCTAssertEqual(refused.json?["code"], "unauthorized", path)
                XCTAssertEqual(refused.header("WWW-Authenticate"), "Bearer", path)
                let wrong = try await web.get(path, headers: ["Authorization": "Bearer wrong"])
                XCTAssertEqual(wrong.status, 401, path)
                let right = try await web.get(path, headers: ["Authorization": "Bearer \(token)"])
                XCTAssertEqual(right.status, 200, path)
            }
            let byQuery = try await web.get("/api/home?token=\(token)").status
            XCTAssertEqual(byQuery, 200)
            let wrongQuery = try await web.get("/api/home?token=\(token)x").status
            XCTAssertEqual(wrongQuery, 401)
            let post = try await web.request(
                .post, "/api/request", body: #"{"topic": "\#(Self.light)/$toggle", "payload": ""}"#)
            XCTAssertEqual(post.status, 401)

            // The page's way in: `/?token=` once, kept in a cookie, and the address cleaned of it.
            let entered = try await web.get("/?token=\(token)")
            XCTAssertEqual(entered.status, 302)
            XCTAssertEqual(entered.header("Location"), "/")
            let cookie = try XCTUnwrap(entered.header("Set-Cookie"))
            XCTAssertTrue(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), cookie)
            let pair = String(cookie.split(separator: ";")[0])
            let byCookie = try await web.get("/api/home", headers: ["Cookie": pair]).status
            XCTAssertEqual(byCookie, 200)
            let wrong = try await web.get("/?token=nope")
            XCTAssertEqual(wrong.header("Location"), "/#token-refused")
            XCTAssertNil(wrong.header("Set-Cookie"))

            // Used through every way above, at log level trace: not once in the log.
            let log = web.log.text
            XCTAssertFalse(log.contains(token), "the token is in the log:\n\(log)")
            XCTAssertTrue(log.contains("web view listening"), log)
        }
    }

    /// `/healthz` tells a supervisor the truth: 503 while the broker is away, 200 once back.
    func testHealthFollowsTheBroker() async throws {
        try await WebRig.run { web in
            let reconnectsBefore = try await web.metric("homemqtt_broker_reconnects_total")
            web.transport.loseConnection()
            try await waitUntil("/healthz to say 503") { try await web.get("/healthz").status == 503 }
            let health = try await web.get("/healthz")
            XCTAssertEqual(health.status, 503, health.body)
            XCTAssertEqual(health.json?["broker"], "disconnected", health.body)
            web.transport.connect()
            try await waitUntil("/healthz to say 200 again") { try await web.get("/healthz").status == 200 }
            let reconnects = try await web.metric("homemqtt_broker_reconnects_total")
            XCTAssertEqual(reconnects - reconnectsBefore, 1, "reconnects")
        }
    }

    /// Roles per home (`access:`): the web view refuses what a user's role does not allow, by
    /// token, on the same rule as MQTT's ACL (whose broker side AccessRolesTests keeps).
    func testEachRoleIsRefusedWhatItMayNotDo() async throws {
        let lock = "home/hallway/front-door-lock/front-door/target-lock-mechanism-state"
        let hallLight = "home/hallway/hallway-light/hallway-light/power-state"
        let (alice, bob, gus) = ("alice-token-0123456789", "bob-token-0123456789", "gus-token-0123456789")
        func user(_ name: String, _ token: String, _ role: String, _ extra: String = "") -> String {
            """
                - name: \(name)
                  token-sha256: \(AccessConfig.hex(AccessConfig.sha256(token)))
                  roles: { "*": \(role) }
            \(extra)
            """
        }
        let yaml =
            "access:\n  users:\n" + user("alice", alice, "administrator") + "\n" + user("bob", bob, "member") + "\n"
            + user("gus", gus, "guest", "      guest-control: [hallway/hallway-light]")
        try await WebRig.run(yaml: yaml) { web in
            func post(_ token: String?, _ topic: String, _ payload: String) async throws -> WebRig.Answer {
                var headers = ["Content-Type": "application/json"]
                if let token { headers["Authorization"] = "Bearer \(token)" }
                let body = JSONValue.object(["id": 1, "topic": .string(topic), "payload": .string(payload)]).encoded()
                return try await web.request(.post, "/api/request", headers: headers, body: body)
            }
            let anonymous = try await post(nil, lock + "/set", "0")
            XCTAssertEqual(anonymous.status, 401)
            let cases: [(String, String, String, String, String)] = [
                ("gus", gus, lock + "/set", "0", "insufficient-privileges"),
                ("gus", gus, hallLight + "/set", "false", "ok"),
                ("gus", gus, lock + "/get", "", "ok"),
                ("bob", bob, lock + "/set", "0", "ok"),
                ("bob", bob, "home/$gateway/request/room/add", #"{"name": "Attic"}"#, "insufficient-privileges"),
                ("alice", alice, "home/$gateway/request/room/add", #"{"name": "Attic"}"#, "ok"),
            ]
            for (name, token, topic, payload, expected) in cases {
                let answer = try await post(token, topic, payload)
                let code =
                    answer.json?["answer"]?["code"]?.stringValue ?? answer.json?["answer"]?["status"]?.stringValue
                XCTAssertEqual(code, expected, "\(name) \(topic): \(answer.body)")
            }
            let session = try await web.get("/api/session", headers: ["Authorization": "Bearer \(gus)"])
            XCTAssertEqual(session.json?["role"], .string("guest"))
            let pairings = try await web.get("/api/pairings", headers: ["Authorization": "Bearer \(bob)"])
            XCTAssertEqual(pairings.status, 403)
            let home = try await web.get("/api/home", headers: ["Authorization": "Bearer \(gus)"])
            XCTAssertEqual(home.status, 200)
        }
    }
}
