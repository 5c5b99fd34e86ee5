import Foundation
import HomeModel
import Logging
import Testing

@testable import Gateway

/// The health document as a function of what the gateway gathers (`GatewayHealth.document`),
/// its fit under a broker's packet limit, and the refresh schedule it shares with `$last-seen`.
/// The rig tests (`HealthDocumentTests`) hold the document on the broker; these hold the parts
/// the actor no longer computes itself.
@Suite struct HealthDocumentUnitTests {
    private func inputs(accessories: [(String, Bool)], interval: Double? = 60) -> GatewayHealth.Inputs {
        GatewayHealth.Inputs(
            status: "online", uptime: .seconds(90), brokerURL: "mqtt://127.0.0.1:1883", brokerState: "connected",
            connected: true, lastError: ("the connection ended", Date(timeIntervalSince1970: 0)),
            activity: GatewayActivity(), backlog: 3, sourceName: "simulator", accessories: accessories, rooms: 2,
            characteristics: 17, retainedTopics: 40, publishesNotSent: 1, publishesRefused: 2, interval: interval)
    }

    @Test func countsReachableAccessoriesBySourcePrefix() {
        let health = GatewayHealth(interval: 60)
        let document = health.document(
            inputs(accessories: [("sim:lamp", true), ("sim:fan", false), ("hap:AA:BB", true), ("plain", true)]))
        #expect(document["accessories"]?["in-scope"]?.intValue == 4)
        #expect(document["accessories"]?["reachable"]?.intValue == 3)
        #expect(document["accessories"]?["unreachable"]?.intValue == 1)
        let bySource = document["accessories"]?["by-source"]
        #expect(bySource?["sim"]?["reachable"]?.intValue == 1)
        #expect(bySource?["sim"]?["unreachable"]?.intValue == 1)
        #expect(bySource?["hap"]?["reachable"]?.intValue == 1, "the id's first field names the source")
        #expect(bySource?["plain"]?["reachable"]?.intValue == 1, "an id without a prefix counts as its own")
        #expect(document["broker"]?["last-error"] == .string("the connection ended"))
        #expect(document["broker"]?["last-error-at"] == .string("1970-01-01T00:00:00Z"))
        #expect(document["counts"]?["publishes-refused"]?.intValue == 2)
        #expect(document["counts"]?["retained-topics"]?.intValue == 40)
        #expect(document["uptime"]?.doubleValue == 90)
        #expect(document["interval"]?.doubleValue == 60)
        #expect(health.document(inputs(accessories: [], interval: nil))["interval"] == nil, "asked for, not published")
    }

    @Test func shrinksToThePacketLimitThenSaysOnceThatNoneFits() {
        let activity = GatewayActivity()
        for index in 0..<5 {
            activity.answered(
                "home/a/b/c/d/result", op: "set",
                Result<Int, GatewayFailure>.failure(
                    GatewayFailure(code: .timeout, message: String(repeating: "x", count: 200) + "\(index)")))
        }
        var input = inputs(accessories: [("sim:lamp", true)])
        input.activity = activity
        var health = GatewayHealth(interval: 60)
        let whole = health.document(input).encodedUTF8().count
        #expect(whole > 1000)

        let fitted = health.payload(input, budget: whole - 1, topic: "t", limit: "x", logger: Logger(label: "test"))
        let document = fitted.flatMap { try? JSONValue(parsing: $0) }
        #expect(document?["last-errors"] == .array([]), "the last errors go first")
        #expect(document?["status"] == .string("online"))

        #expect(health.payload(input, budget: 50, topic: "t", limit: "x", logger: Logger(label: "test")) == nil)
        #expect(health.saidTooLarge)
    }

    @Test func refreshesCountFromTheFirstDocumentAndSkipWhatASleepMissed() {
        var refresh = Refresh(seconds: 60)
        #expect(refresh.next == nil)
        let start = ContinuousClock.now
        refresh.start(now: start)
        #expect(refresh.next == start + .seconds(60))
        refresh.done(start + .seconds(60), now: start + .seconds(61))
        #expect(refresh.next == start + .seconds(120), "on time: an interval after the one due")
        refresh.done(start + .seconds(120), now: start + .seconds(500))
        #expect(refresh.next == start + .seconds(560), "late by more than an interval: one from now")

        var off = Refresh(seconds: 0)
        off.start(now: start)
        #expect(!off.isOn && off.next == nil, "0 turns it off: no loop waits")
        var lastSeen = LastSeen(interval: 0)
        lastSeen.heard("sim:lamp")
        #expect(lastSeen.changedIDs().isEmpty, "off, nothing heard is recorded")
    }

    /// An accessory heard from several times in a row is written into the table once another is
    /// heard from (`LastSeen.pending`); what every reader returns is the same as if each time
    /// had been written at once.
    @Test func lastSeenOfValuesInARowReadsAsEachWereWritten() {
        let t0 = Date(timeIntervalSince1970: 1_800_000_000)
        var seen = LastSeen(interval: 60)
        seen.heard("a", at: t0)
        seen.heard("a", at: t0 + 1)
        #expect(seen.records == ["a": AccessorySeen(date: t0 + 1, reconnects: 0)])
        #expect(seen.changedIDs() == ["a"])
        seen.heard("b", at: t0 + 2)
        seen.heard("a", at: t0 + 3)
        #expect(
            seen.records == [
                "a": AccessorySeen(date: t0 + 3, reconnects: 0), "b": AccessorySeen(date: t0 + 2, reconnects: 0),
            ])
        #expect(seen.changedIDs() == ["a", "b"])
        seen.reconnected("a")
        seen.heard("a", at: t0 + 4)
        #expect(
            seen.records["a"] == AccessorySeen(date: t0 + 4, reconnects: 1), "the count kept beside the time in waiting"
        )
        seen.forget("a")
        #expect(seen.records == ["b": AccessorySeen(date: t0 + 2, reconnects: 0)])
        #expect(seen.changedIDs() == ["b"])
        seen.reconnected("c")
        #expect(seen.records["c"] == nil, "never heard from: no reconnect counted")
    }
}
