import Foundation
import HomeModel
import Synchronization
import TestSupport
import XCTest

/// The live feed, `/ws`, in process (`WebRig`): the home first, a change made on MQTT on the
/// page within a second, a write from the page reaching the gateway and its state coming back
/// on MQTT and on the page, bad input answered (never a closed socket), an oversized message
/// closing only its socket, the token refused. Moved from EndToEndTests' `WebSocketTests`; the
/// binary's `/ws` stays tested there by BrowserTests, WebSocketLimitTests and WebRoutesTests.
final class WebSocketInProcessTests: XCTestCase {
    let light = "home/garage/garage-door-opener/garage-light"

    func testHomeFirstThenLiveValuesAndAnsweredWrites() async throws {
        let light = light
        try await WebRig.run { web in
            try await web.page { page in
                let first = try await page.frames.waitFor("the first frame")
                XCTAssertEqual(first["type"], "home")
                XCTAssertEqual(first["connected"], true)
                try await page.frames.waitFor("the history") { $0["type"] == "history" }

                // A value set on MQTT reaches the page within a second, batched in an update.
                let start = ContinuousClock.now
                try await web.publish(light + "/brightness/set", "42")
                try await page.update(of: light + "/brightness", timeout: 1) { $0 == 42 }
                print("figure: a set on MQTT → update on the page in \(ContinuousClock.now - start) (in process)")

                // A write from the page: the gateway's answer, the value on MQTT and on the page.
                let before = try XCTUnwrap(
                    web.broker.retainedText(under: light + "/power-state/state")[light + "/power-state/state"])
                web.seen.clear()
                let toggled = try await page.request(light + "/$toggle", "")
                XCTAssertEqual(toggled["status"], "ok", "\(toggled)")
                XCTAssertEqual(toggled["op"], "toggle")
                let after = try await web.seen.waitFor("the toggled power state") {
                    $0.topic == light + "/power-state/state" && !$0.retain && $0.string != before
                }
                let onPage: JSONValue = after.string == "true" ? true : false
                try await page.update(of: light + "/power-state") { $0 == onPage }

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
                XCTAssertEqual(health["data"]?["counts"]?["accessories"], 13)
            }
        }
    }

    /// Issue 44, live: the first home has each accessory's last seen; after a write the gateway
    /// heard from the accessory, an update carries its later last seen (the hub reads it every
    /// second while a page is open).
    func testLastSeenComesWithTheHomeAndMovesOnLive() async throws {
        let light = light
        try await WebRig.run { web in
            try await web.page { page in
                let home = try await page.frames.waitFor("the first home") { $0["type"] == "home" }
                let garage = try XCTUnwrap(
                    home["accessories"]?.arrayValue?.first { $0["topic"] == "home/garage/garage-door-opener" })
                let id = try XCTUnwrap(garage["id"]?.stringValue)
                let before = try XCTUnwrap(garage["seen"]?["at"]?.doubleValue, "\(garage)")
                XCTAssertEqual(garage["seen"]?["reconnects"], 0)

                try await web.publish(light + "/brightness/set", "38")
                let update = try await page.frames.waitFor("a later last seen of the garage") { frame in
                    frame["type"] == "update" && (frame["seen"]?[id]?["at"]?.doubleValue ?? 0) > before
                }
                XCTAssertEqual(update["seen"]?[id]?["reconnects"], 0)
                // The write itself reached the page too.
                try await page.update(of: light + "/brightness") { $0 == 38 }
            }
        }
    }

    /// Every kind of bad input is answered with its code; the socket stays open and the gateway
    /// goes on answering.
    func testBadInputIsAnsweredNeverFatal() async throws {
        let light = light
        try await WebRig.run { web in
            try await web.page { page in
                func answer(toRaw text: String) async throws -> JSONValue {
                    page.frames.clear()
                    try await page.send(text)
                    let frame = try await page.frames.waitFor("an answer to \(text.prefix(40))") {
                        $0["type"] == "answer"
                    }
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
                try await page.send(#"{"id": "x-1", "topic": "nowhere", "payload": "1"}"#)
                let matched = try await page.frames.waitFor("the answer to x-1") {
                    $0["type"] == "answer" && $0["id"] == "x-1"
                }
                XCTAssertEqual(matched["answer"]?["code"], "invalid-topic")

                page.frames.clear()
                try await page.outbound.write(.binary(.init(bytes: [1, 2, 3])))
                let binary = try await page.frames.waitFor("the answer to a binary frame") { $0["type"] == "answer" }
                XCTAssertEqual(binary["answer"]?["code"], "invalid-payload")

                // Still the same socket, still served.
                let ok = try await page.request(light + "/brightness/set", "10")
                XCTAssertEqual(ok["status"], "ok", "\(ok)")
            }
            let health = try await web.get("/healthz").status
            XCTAssertEqual(health, 200)
        }
    }

    /// A message above the limit closes that socket (WebSocket code 1009); the server goes on.
    func testOversizedMessageClosesOnlyThatSocket() async throws {
        let light = light
        try await WebRig.run { web in
            try await web.page { big in
                try? await big.send(String(repeating: "x", count: 2 << 20))
                try await waitUntil("the oversized socket to close", timeout: 10) { big.ended.load(ordering: .relaxed) }
            }
            try await web.page { page in
                let answer = try await page.request(light + "/brightness/set", "20")
                XCTAssertEqual(answer["status"], "ok", "\(answer)")
            }
        }
    }

    func testTokenRefusedWhenWrongAcceptedWhenRight() async throws {
        let token = "ws-\(UUID().uuidString)"
        try await WebRig.run(token: token) { web in
            for query in ["", "?token=wrong"] {
                let opened = Opened()
                do {
                    try await web.page(query: query) { _ in opened.set() }
                } catch {
                }
                XCTAssertFalse(opened.value, "\(query): the WebSocket opened without the right token")
            }
            for (query, headers) in [("?token=\(token)", [:]), ("", ["Authorization": "Bearer \(token)"])] {
                try await web.page(query: query, headers: headers) { page in
                    let first = try await page.frames.waitFor("the home")["type"]
                    XCTAssertEqual(first, "home", query)
                }
            }
            // The right token from a page of another site is still refused.
            let opened = Opened()
            do {
                try await web.page(query: "?token=\(token)", headers: ["Origin": "https://evil.example"]) { _ in
                    opened.set()
                }
            } catch {
            }
            XCTAssertFalse(opened.value, "a cross-site WebSocket opened")
        }
    }

    /// Structural changes send the whole home again: a rename from the page shows on it.
    func testStructuralChangeSendsTheHomeAgain() async throws {
        try await WebRig.run { web in
            try await web.page { page in
                try await page.frames.waitFor("the home") { $0["type"] == "home" }
                let answer = try await page.request(
                    "home/$gateway/request/accessory/rename", #"{"accessory": "sim:garage", "name": "Barn Door"}"#)
                XCTAssertEqual(answer["status"], "ok", "\(answer)")
                let renamed = try await page.frames.waitFor("the renamed home", timeout: 2) { frame in
                    frame["type"] == "home"
                        && (frame["accessories"]?.arrayValue ?? []).contains { $0["name"] == "Barn Door" }
                }
                XCTAssertTrue(
                    (renamed["accessories"]?.arrayValue ?? []).contains { $0["topic"] == "home/garage/barn-door" })
                try await page.frames.waitFor("the rename among the events", timeout: 2) { frame in
                    frame["type"] == "update"
                        && (frame["events"]?.arrayValue ?? []).contains {
                            $0["event"]?["event"] == "accessory-renamed"
                        }
                }
                // And on MQTT, as every client sees it.
                try await web.seen.waitFor("the renamed accessory's $info") {
                    $0.topic == "home/garage/barn-door/$info" && !$0.payload.isEmpty
                }
            }
        }
    }
}

/// Whether a page's handler ran (the upgrade was accepted).
private final class Opened: Sendable {
    private let flag = Atomic<Bool>(false)
    func set() { flag.store(true, ordering: .relaxed) }
    var value: Bool { flag.load(ordering: .relaxed) }
}
