import Foundation
import Gateway
import HomeModel
import MQTT
import TestSupport
import XCTest

/// `<accessory>/$last-seen` as a dashboard sees it: when the gateway last heard from each
/// accessory (a value, a read answer) and how often it came back, refreshed at most once per
/// `last-seen-interval` (the gateway's manual clock moves it), at once when it comes back,
/// moved and cleared with the accessory's other documents.
final class LastSeenTests: RigTestCase {
    private struct Seen {
        var date: Date
        var reconnects: Int
    }

    private static func seen(_ text: String?) -> Seen? {
        guard let text, let document = try? JSONValue(parsing: Array(text.utf8)),
            let stamp = document["last-seen"]?.stringValue, let date = try? Date(stamp, strategy: .iso8601),
            let reconnects = document["reconnects"]?.intValue
        else { return nil }
        return Seen(date: date, reconnects: reconnects)
    }

    /// `home/<room>/<accessory>` of a characteristic's topic.
    private static func accessoryTopic(_ node: TopicTree.CharacteristicNode) -> String {
        node.topic.split(separator: "/").prefix(3).joined(separator: "/")
    }

    func testItSaysWhenEachAccessoryWasLastHeardFromAndHowOftenItCameBack() async {
        let manual = ManualGatewayClock()
        await onEveryRig(configure: { $0.lastSeenInterval = 60 }, clock: .manual(manual)) { gw in
            let started = Date()
            let sensor = try await gw.characteristic("Bedroom Climate Sensor", "current-temperature")
            let topic = Self.accessoryTopic(sensor) + "/$last-seen"
            // At start every accessory has one: the simulator described them all.
            let all = try await gw.retained("home/+/+/$last-seen")
            let tree = await gw.gateway.tree
            XCTAssertEqual(all.count, tree.accessories.count, "\(all.keys.sorted())")
            let first = try XCTUnwrap(Self.seen(all[topic]), all[topic] ?? "none")
            XCTAssertEqual(first.reconnects, 0)
            XCTAssertLessThan(first.date.timeIntervalSince(started), 1, "seen as the gateway started")

            // A value heard: one refresh when the interval is up, for that accessory alone.
            gw.seen.clear()
            let before = Date()
            try await gw.home.setValue(sensor.address, .float(22))
            try await gw.next(sensor.topic + "/state")
            manual.advance(by: .seconds(60))
            let refreshedText = try await gw.next(topic).string
            let refreshed = try XCTUnwrap(Self.seen(refreshedText))
            XCTAssertGreaterThanOrEqual(refreshed.date, before.addingTimeInterval(-0.001))
            XCTAssertEqual(refreshed.reconnects, 0)
            // The state, then the refresh: everything the interval gave has been seen.
            let refreshes = gw.seen.elements.filter { $0.topic.hasSuffix("/$last-seen") }.map(\.topic)
            XCTAssertEqual(refreshes, [topic], "only the accessory heard from")

            // Unreachable, then back: counted, and said at once (the clock stands still).
            let lampID = try await gw.accessoryID(named: "Bedroom Lamp")
            let lamp = try await gw.characteristic("Bedroom Lamp", "brightness")
            let lampTopic = Self.accessoryTopic(lamp) + "/$last-seen"
            _ = await gw.home.setReachable(lampID, false)
            _ = await gw.home.setReachable(lampID, true)
            let back = try await gw.next(lampTopic) { Self.seen($0)?.reconnects == 1 }
            XCTAssertEqual(Self.seen(back.string)?.reconnects, 1)

            // A read answered is heard from too (a notifying value read sends no event).
            gw.seen.clear()
            let asked = Date()
            let answer = try await gw.request(lamp.topic + "/get", "", answer: lamp.topic + "/result")
            XCTAssertEqual(answer["status"], "ok")
            manual.advance(by: .seconds(60))
            let readText = try await gw.next(lampTopic).string
            let read = try XCTUnwrap(Self.seen(readText))
            XCTAssertGreaterThanOrEqual(read.date, asked.addingTimeInterval(-0.001))
            XCTAssertEqual(read.reconnects, 1, "kept")

            // Renamed: the document moves with the accessory's others, no ghost left.
            try await gw.database.renameAccessory(id: lampID, to: "Reading Lamp")
            let moved = "home/bedroom/reading-lamp/$last-seen"
            try await gw.next(moved)
            try await waitUntil("the old $last-seen cleared") {
                try await gw.retained(lampTopic)[lampTopic] == nil
            }
            let kept = try await gw.retained(moved)
            XCTAssertEqual(Self.seen(kept[moved])?.reconnects, 1)
        }
    }

    func testTurnedOffNoneIsPublished() async {
        await onEveryRig(configure: { $0.lastSeenInterval = 0 }) { gw in
            let all = try await gw.retained("home/+/+/$last-seen")
            XCTAssertEqual(all, [:])
        }
    }

    func testBadIntervalsAreErrorsNamingTheFileAndKey() {
        for (value, accepted) in [("0", true), ("300", true), ("0.2", false), ("100000", false), ("[]", false)] {
            do {
                let config = try GatewayConfig.parse("last-seen-interval: \(value)\n", file: "gateway.yml")
                XCTAssertTrue(accepted, value)
                XCTAssertEqual(config.lastSeenInterval, Double(value))
            } catch {
                XCTAssertFalse(accepted, "\(value): \(error)")
                XCTAssertTrue(error.description.hasPrefix("gateway.yml: last-seen-interval: "), error.description)
            }
        }
        XCTAssertEqual(GatewayConfig().lastSeenInterval, 60, "on by default, a minute")
    }
}
