import Foundation
import Gateway
import HomeModel
import MQTT
import TestSupport
import XCTest

/// `<base>/$gateway/health` as a dashboard sees it: retained, refreshed every `health-interval`
/// (the gateway's manual clock moves it) and at once when an accessory stops answering, saying
/// what the `health` request says, cleared like every topic the gateway owns.
final class HealthDocumentTests: RigTestCase {
    private static let topic = "home/$gateway/health"

    private func document(_ message: MQTTMessage) throws -> JSONValue {
        try JSONValue(parsing: message.payload)
    }

    /// A document's count of unreachable accessories.
    private static func unreachable(_ text: String) -> Int? {
        (try? JSONValue(parsing: Array(text.utf8)))?["accessories"]?["unreachable"]?.intValue
    }

    func testItIsRetainedRefreshedAndSaysWhatTheHealthRequestSays() async {
        let manual = ManualGatewayClock()
        await onEveryRig(configure: { $0.healthInterval = 30 }, clock: .manual(manual)) { gw in
            let first = try self.document(
                try await gw.seen.waitFor("the first health document") {
                    $0.topic == Self.topic
                })
            let tree = await gw.gateway.tree
            XCTAssertEqual(first["status"], "online")
            XCTAssertEqual(first["interval"]?.doubleValue, 30)
            XCTAssertEqual(first["broker"]?["connected"], true)
            XCTAssertEqual(first["broker"]?["reconnects"], 0)
            XCTAssertEqual(first["accessories"]?["in-scope"], .int(Int64(tree.accessories.count)))
            XCTAssertEqual(first["accessories"]?["unreachable"], 0)
            XCTAssertEqual(
                first["accessories"]?["by-source"]?["sim"]?["reachable"], .int(Int64(tree.accessories.count)))
            XCTAssertGreaterThan(first["process"]?["rss-bytes"]?.intValue ?? 0, 1_000_000, "the process's memory")
            XCTAssertNotNil(first["process"]?["cpu-seconds"]?.doubleValue)
            XCTAssertEqual(first["outbox"]?["backlog"]?.intValue.map { $0 >= 0 }, true)
            XCTAssertEqual(first["counts"]?["publishes-not-sent"], 0)
            let retained = try await gw.retained(Self.topic)
            XCTAssertEqual(retained[Self.topic].map { try? JSONValue(parsing: Array($0.utf8)) }, first)

            // The `health` request: the same document, the counters since moved on.
            let answer = try await gw.request(
                "home/$gateway/request/health", "{}", answer: "home/$gateway/response/health")
            let asked = try XCTUnwrap(answer["data"])
            for key in ["accessories", "sources", "interval"] {
                XCTAssertEqual(asked[key], first[key], key)
            }
            XCTAssertEqual(asked["counts"]?["characteristics"], first["counts"]?["characteristics"])
            XCTAssertEqual(asked["broker"]?["url"], first["broker"]?["url"])
            let published = first["messages"]?["published"]?.intValue ?? 0
            XCTAssertGreaterThan(published, 100, "the first publication counted")
            XCTAssertGreaterThan(asked["messages"]?["published"]?.intValue ?? 0, published)
            XCTAssertGreaterThan(asked["messages"]?["received"]?.intValue ?? 0, 0, "the request counted")

            // Refreshed once the interval is up, not before.
            gw.seen.clear()
            manual.advance(by: .seconds(29))
            manual.advance(by: .seconds(1))
            let refreshed = try self.document(try await gw.next(Self.topic))
            XCTAssertGreaterThan(
                refreshed["messages"]?["published"]?.intValue ?? 0, asked["messages"]?["published"]?.intValue ?? 0)
            XCTAssertGreaterThanOrEqual(refreshed["messages"]?["published-per-second"]?.doubleValue ?? -1, 0)
            XCTAssertEqual(gw.seen.elements.filter { $0.topic == Self.topic }.count, 1, "one refresh per interval")
        }
    }

    func testAnAccessoryThatStopsAnsweringChangesTheUnreachableCountAtOnce() async {
        let manual = ManualGatewayClock()
        await onEveryRig(configure: { $0.healthInterval = 3600 }, clock: .manual(manual)) { gw in
            try await gw.seen.waitFor("the first health document") { $0.topic == Self.topic }
            let lamp = try await gw.accessoryID(named: "Bedroom Lamp")
            gw.seen.clear()
            _ = await gw.home.setReachable(lamp, false)
            // The clock stands still: the change itself publishes.
            let down = try self.document(try await gw.next(Self.topic) { Self.unreachable($0) == 1 })
            XCTAssertEqual(down["accessories"]?["by-source"]?["sim"]?["unreachable"], 1)
            let retained = try await gw.retained(Self.topic)
            XCTAssertEqual(retained[Self.topic].flatMap(Self.unreachable), 1)

            let answer = try await gw.request(
                "home/$gateway/request/health", "{}", answer: "home/$gateway/response/health")
            XCTAssertEqual(answer["data"]?["accessories"], down["accessories"], "the request says the same")

            _ = await gw.home.setReachable(lamp, true)
            try await gw.next(Self.topic) { Self.unreachable($0) == 0 }
        }
    }

    func testAGracefulStopSaysOfflineAndAnEarlierRunsDocumentIsClearedWhenTurnedOff() async {
        await onEveryRig(configure: { $0.healthInterval = 60 }) { gw in
            try await gw.seen.waitFor("the first health document") { $0.topic == Self.topic }
            await gw.stopGateway()
            let retained = try await gw.retained(Self.topic)
            let last = try XCTUnwrap(retained[Self.topic].flatMap { try? JSONValue(parsing: Array($0.utf8)) })
            XCTAssertEqual(last["status"], "offline")
        }
        // An earlier run's document, and no record of it (a lost state directory): the gateway's
        // own all the same, and cleared when this run publishes none.
        await onEveryRig(
            configure: { $0.healthInterval = 0 },
            before: { publisher in
                try await publisher.publish(
                    Self.topic, payload: Array(#"{"status":"online"}"#.utf8), qos: .atLeastOnce, retain: true)
            }
        ) { gw in
            // Cleared before `online`, which the rig waited for.
            let retained = try await gw.retained(Self.topic)
            XCTAssertNil(retained[Self.topic], "the earlier run's document is gone")
            let answer = try await gw.request(
                "home/$gateway/request/health", "{}", answer: "home/$gateway/response/health")
            XCTAssertEqual(answer["status"], "ok", "the request answers without the document")
            XCTAssertNil(answer["data"]?["interval"])
        }
    }

    func testBadIntervalsAreErrorsNamingTheFileAndKey() {
        for (value, accepted) in [("0", true), ("1", true), ("0.5", false), ("-1", false), ("often", false)] {
            do {
                let config = try GatewayConfig.parse("health-interval: \(value)\n", file: "gateway.yml")
                XCTAssertTrue(accepted, value)
                XCTAssertEqual(config.healthInterval, Double(value))
            } catch {
                XCTAssertFalse(accepted, "\(value): \(error)")
                XCTAssertTrue(error.description.hasPrefix("gateway.yml: health-interval: "), error.description)
            }
        }
        XCTAssertEqual(GatewayConfig().healthInterval, 60, "on by default, every minute")
    }
}
