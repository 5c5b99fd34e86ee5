import Foundation
import HTTPTypes
import HomeModel
import TestSupport
import XCTest

/// The live feed's protocol, `/ws`, through the real binary on a real broker: the home first,
/// changes from MQTT within a second, writes answered as on MQTT, bad input answered with an
/// error (never a closed socket or a crash), and a wrong token refused.
final class WebSocketTests: XCTestCase {
    let light = "home/garage/garage-door-opener/garage-light"

    func testHomeFirstThenLiveValuesAndAnsweredWrites() async throws {
        let web = try await WebGateway.start()
        addTeardownBlock { await web.stopAll() }
        let page = try await PageClient.connect("ws://127.0.0.1:\(web.port)/ws")
        addTeardownBlock { await page.close() }

        let first = try await page.frames.waitFor("the first frame")
        XCTAssertEqual(first["type"], "home")
        XCTAssertEqual(first["connected"], true)
        try await page.frames.waitFor("the history") { $0["type"] == "history" }

        // A value set on MQTT reaches the page within a second, batched in an update.
        let start = ContinuousClock.now
        try await web.publish(light + "/brightness/set", "42")
        try await page.update(of: light + "/brightness", timeout: 1) { $0 == 42 }
        print("figure: mosquitto_pub set → update on the page in \(ContinuousClock.now - start)")

        // A write from the page: the gateway's answer, and the value on MQTT.
        let state = try await web.subscribe(light + "/power-state/state")
        let before = try await state.waitForMessage("the retained power state").string
        let toggled = try await page.request(light + "/$toggle", "")
        XCTAssertEqual(toggled["status"], "ok", "\(toggled)")
        XCTAssertEqual(toggled["op"], "toggle")
        try await state.waitForMessage("the toggled power state") { !$0.retain && $0.string != before }
        await state.stop()

        let refused = try await page.request(light + "/brightness/set", "140")
        XCTAssertEqual(refused["status"], "error")
        XCTAssertEqual(refused["code"], "out-of-range")
        XCTAssertEqual(refused["message"], "brightness must be 0…100, got 140")
        XCTAssertEqual(refused["hap"], -70410)

        // The error is in the next update's recent errors, for the events page.
        try await page.frames.waitFor("the refused set among the errors") { frame in
            frame["type"] == "update"
                && (frame["errors"]?.arrayValue ?? []).contains { $0["code"] == "out-of-range" }
        }

        // A gateway request, with its JSON answer.
        let health = try await page.request("home/$gateway/request/health", "{}")
        XCTAssertEqual(health["status"], "ok")
        XCTAssertEqual(health.value(at: "data", "counts", "accessories"), 13)
    }

    /// Every kind of bad input is answered with its code; the socket stays open and the gateway
    /// goes on answering.
    func testBadInputIsAnsweredNeverFatal() async throws {
        let web = try await WebGateway.start()
        addTeardownBlock { await web.stopAll() }
        let page = try await PageClient.connect("ws://127.0.0.1:\(web.port)/ws")
        addTeardownBlock { await page.close() }

        func answer(toRaw text: String) async throws -> JSONValue {
            page.frames.clear()
            try await page.sendText(text)
            let frame = try await page.frames.waitFor("an answer to \(text)") { $0["type"] == "answer" }
            return frame["answer"] ?? .null
        }
        let cases: [(String, String)] = [
            ("not json at all", "invalid-json"),
            ("[1, 2, 3]", "invalid-json"),
            (#"{"id": 1}"#, "missing-field"),
            (#"{"id": 2, "topic": 42}"#, "invalid-field"),
            (#"{"id": 3, "topic": "home/x/set", "payload": "1", "extra": true}"#, "unknown-field"),
            (#"{"id": 4, "topic": "elsewhere/lamp/set", "payload": "1"}"#, "invalid-topic"),
            (#"{"id": 5, "topic": "home/#", "payload": "1"}"#, "invalid-topic"),
            (#"{"id": 6, "topic": "home//set", "payload": "1"}"#, "invalid-topic"),
            (#"{"id": 7, "topic": "home/no/such/thing/set", "payload": "1"}"#, "unknown-topic"),
            (#"{"id": 8, "topic": "\#(light)/brightness/set", "payload": "bright"}"#, "invalid-type"),
            (#"{"id": 9, "topic": "\#(light)/brightness/set", "payload": ""}"#, "empty"),
            (#"{"id": 10, "topic": "\#(light)/name/set", "payload": "x"}"#, "read-only"),
            (#"{"id": 11, "topic": "home/$gateway/request/nothing", "payload": "{}"}"#, "unknown-op"),
            (
                #"{"id": 12, "topic": "home/$gateway/request/room/add", "payload": "{\"name\": \"X\", \"nme\": 1}"}"#,
                "unknown-field"
            ),
            (String(repeating: "{", count: 5000), "invalid-json"),
            ("\u{0}\u{1}\u{2}", "invalid-json"),
        ]
        for (text, code) in cases {
            let answer = try await answer(toRaw: text)
            XCTAssertEqual(answer["status"], "error", "\(text.prefix(60)): \(answer)")
            XCTAssertEqual(answer["code"], .string(code), "\(text.prefix(60)): \(answer)")
        }
        // The id comes back with the error, so the page can match it.
        page.frames.clear()
        try await page.sendText(#"{"id": "x-1", "topic": "nowhere", "payload": "1"}"#)
        let matched = try await page.answer(id: "x-1")
        XCTAssertEqual(matched["code"], "invalid-topic")

        page.frames.clear()
        try await page.sendBinary([1, 2, 3])
        let binary = try await page.frames.waitFor("the answer to a binary frame") { $0["type"] == "answer" }
        XCTAssertEqual(binary.value(at: "answer", "code"), "invalid-payload")

        // Still the same socket, still served.
        XCTAssertNil(page.ending.withLock { $0 })
        let ok = try await page.request(light + "/brightness/set", "10")
        XCTAssertEqual(ok["status"], "ok", "\(ok)")
        let health = try await HTTP.get(web.url + "/healthz").status
        XCTAssertEqual(health, 200)
    }

    /// A message above the limit closes that socket (WebSocket code 1009); the server goes on.
    func testOversizedMessageClosesOnlyThatSocket() async throws {
        let web = try await WebGateway.start()
        addTeardownBlock { await web.stopAll() }
        let big = try await PageClient.connect("ws://127.0.0.1:\(web.port)/ws")
        try? await big.sendText(String(repeating: "x", count: 2 << 20))
        try await waitUntil("the oversized socket to close", timeout: 10) { big.ending.withLock { $0 } != nil }
        let page = try await PageClient.connect("ws://127.0.0.1:\(web.port)/ws")
        addTeardownBlock { await page.close() }
        let answer = try await page.request(light + "/brightness/set", "20")
        XCTAssertEqual(answer["status"], "ok", "\(answer)")
    }

    func testTokenRefusedWhenWrongAcceptedWhenRight() async throws {
        let token = "ws-\(UUID().uuidString)"
        let web = try await WebGateway.start(token: token)
        addTeardownBlock { await web.stopAll() }
        let url = "ws://127.0.0.1:\(web.port)/ws"
        for attempt in [url, url + "?token=wrong"] {
            do {
                let page = try await PageClient.connect(attempt)
                await page.close()
                XCTFail("\(attempt): the WebSocket opened without the right token")
            } catch is PageClient.WebSocketRefused {
            }
        }
        let byQuery = try await PageClient.connect(url + "?token=\(token)")
        let firstByQuery = try await byQuery.frames.waitFor("the home")["type"]
        XCTAssertEqual(firstByQuery, "home")
        await byQuery.close()
        let byHeader = try await PageClient.connect(url, headers: [.authorization: "Bearer \(token)"])
        let firstByHeader = try await byHeader.frames.waitFor("the home")["type"]
        XCTAssertEqual(firstByHeader, "home")
        await byHeader.close()
        // The right token from a page of another site is still refused.
        do {
            let crossSite = try await PageClient.connect(
                url + "?token=\(token)", headers: [HTTPField.Name("Origin")!: "https://evil.example"])
            await crossSite.close()
            XCTFail("a cross-site WebSocket opened")
        } catch is PageClient.WebSocketRefused {
        }
    }

    /// Structural changes send the whole home again: a rename made over MQTT shows on the page.
    func testStructuralChangeSendsTheHomeAgain() async throws {
        let web = try await WebGateway.start()
        addTeardownBlock { await web.stopAll() }
        let page = try await PageClient.connect("ws://127.0.0.1:\(web.port)/ws")
        addTeardownBlock { await page.close() }
        try await page.frames.waitFor("the home") { $0["type"] == "home" }
        let answer = try await page.request(
            "home/$gateway/request/accessory/rename", #"{"accessory": "sim:garage", "name": "Barn Door"}"#)
        XCTAssertEqual(answer["status"], "ok", "\(answer)")
        let renamed = try await page.frames.waitFor("the renamed home", timeout: 2) { frame in
            frame["type"] == "home"
                && (frame["accessories"]?.arrayValue ?? []).contains { $0["name"] == "Barn Door" }
        }
        XCTAssertTrue(
            (renamed["accessories"]?.arrayValue ?? []).contains {
                $0["topic"] == "home/garage/barn-door"
            })
        try await page.frames.waitFor("the rename among the events", timeout: 2) { frame in
            frame["type"] == "update"
                && (frame["events"]?.arrayValue ?? []).contains {
                    $0.value(at: "event", "event") == "accessory-renamed"
                }
        }
    }
}
