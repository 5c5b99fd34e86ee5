import Foundation
import HomeModel
import TestSupport
import XCTest

@testable import Gateway

/// The record of what the gateway published: which topics it names (and which it does not),
/// what a change clears, an earlier run's tree read as a record, and the file it is kept in.
final class OwnedTopicsTests: XCTestCase {
    func record() -> OwnedTopics {
        var record = OwnedTopics()
        record.topics = ["home/$gateway/status", "home/garage/door/$info", "homeassistant/device/x/config"]
        record.accessories = ["home/garage/door": ["garage-door/target-door-state", "garage-light/power-state"]]
        return record
    }

    func testItNamesItsOwnTopicsAndNoOthers() {
        let record = record()
        XCTAssertTrue(record.contains("home/garage/door/$info"))
        XCTAssertTrue(record.contains("home/garage/door/garage-light/power-state/state"))
        XCTAssertTrue(record.contains("home/garage/door/garage-light/power-state/meta"))
        for other in [
            "home/garage/door/garage-light/power-state/set", "home/garage/door/garage-light/level/state",
            "home/garage/door/$availability", "home/garage/other/garage-light/power-state/state",
            "home/garage/door/garage-light/power-state/x/state", "home/alarm/state", "home", "state",
        ] {
            XCTAssertFalse(record.contains(other), other)
        }
    }

    func testWhatAChangeClearsIsWhatWentAway() {
        var current = record()
        current.topics.remove("home/garage/door/$info")
        current.accessories["home/garage/door"]?.remove("garage-light/power-state")
        XCTAssertEqual(
            record().topicsToClear(keeping: current),
            [
                "home/garage/door/$info", "home/garage/door/garage-light/power-state/meta",
                "home/garage/door/garage-light/power-state/state",
            ])
        XCTAssertEqual(record().topicsToClear(keeping: record()), [])
        XCTAssertTrue(record().covers(current))
        XCTAssertFalse(current.covers(record()))
    }

    /// Lamps of one model share one set of paths in a record; merging a newer record into it
    /// still changes only the accessory that gained or lost a characteristic.
    func testLampsOfOneModelShareTheirPathsAndAMergeChangesOnlyTheOneThatGrew() {
        var shapes = OwnedTopics.Shapes()
        var recorded = OwnedTopics()
        for lamp in ["a", "b", "c"] {
            recorded.accessories["home/hall/\(lamp)"] = shapes.shared(["lightbulb/on", "lightbulb/brightness"])
        }
        var next = recorded
        next.accessories["home/hall/b"]?.insert("lightbulb/hue")
        next.accessories["home/hall/d"] = shapes.shared(["lightbulb/on", "lightbulb/brightness"])
        var merged = recorded
        merged.formUnion(next)
        XCTAssertEqual(merged.accessories["home/hall/b"], ["lightbulb/on", "lightbulb/brightness", "lightbulb/hue"])
        for lamp in ["a", "c", "d"] {
            XCTAssertEqual(merged.accessories["home/hall/\(lamp)"], ["lightbulb/on", "lightbulb/brightness"], lamp)
        }
        XCTAssertEqual(recorded.accessories["home/hall/b"], ["lightbulb/on", "lightbulb/brightness"])
        XCTAssertTrue(merged.covers(next))
        XCTAssertFalse(recorded.covers(next))
        XCTAssertTrue(merged.contains("home/hall/b/lightbulb/hue/state"))
        XCTAssertFalse(merged.contains("home/hall/a/lightbulb/hue/state"))
        XCTAssertEqual(
            merged.topicsToClear(keeping: recorded),
            ["home/hall/b/lightbulb/hue/meta", "home/hall/b/lightbulb/hue/state"]
                + ["home/hall/d/lightbulb/brightness/meta", "home/hall/d/lightbulb/brightness/state"]
                + ["home/hall/d/lightbulb/on/meta", "home/hall/d/lightbulb/on/state"])
    }

    func testAnEarlierRunsTreeIsARecordOfItsAccessories() throws {
        let tree = try JSONValue(
            parsing: #"""
                {"base":"home","rooms":[{"topic":"home/attic","accessories":[{"topic":"home/attic/lamp",
                "services":[{"topic":"home/attic/lamp/lightbulb","characteristics":[
                {"topic":"home/attic/lamp/lightbulb/power-state"},{"topic":"elsewhere/x"}]}]}]}]}
                """#)
        var record = OwnedTopics()
        record.addTreeDocument(tree, documents: ["$info", "$availability", "$state"])
        XCTAssertEqual(record.accessories, ["home/attic/lamp": ["lightbulb/power-state"]])
        XCTAssertTrue(record.contains("home/attic/lamp/$availability"))
        XCTAssertTrue(record.contains("home/attic/lamp/lightbulb/power-state/state"))
        XCTAssertFalse(record.contains("elsewhere/x/state"), "a topic outside its accessory is not taken")
        XCTAssertFalse(record.contains("home/attic/$info"), "a room is not an accessory")
    }

    /// The run that left a tree (or a page of it) held its base's status too: a gateway whose
    /// state directory was lost must not call its own `$gateway/status` another client's.
    func testAnEarlierRunsTreeHoldsItsStatus() throws {
        for document in [
            #"{"base":"home","home":"My Home","rooms":[]}"#,
            #"{"base":"home","home":"My Home","of":2,"page":1,"rooms":[]}"#,
            #"{"accessories":3,"base":"home","home":"My Home","pages":[]}"#,
        ] {
            var record = OwnedTopics()
            record.addTreeDocument(try JSONValue(parsing: Array(document.utf8)), documents: ["$info"])
            XCTAssertTrue(record.contains("home/$gateway/status"), document)
            XCTAssertFalse(record.contains("home/$gateway/other"), document)
        }
        var nested = OwnedTopics()
        nested.addTreeDocument(
            try JSONValue(parsing: Array(#"{"x":{"base":"other"}}"#.utf8)), documents: ["$info"])
        XCTAssertFalse(nested.contains("other/$gateway/status"), "not a tree: no home")
    }

    /// A warning that counts topics names a few of them, then how many more.
    func testAFewTopicsAreNamedThenHowManyMore() {
        XCTAssertEqual(RetainedSnapshot.named(["home/b/state", "home/a/meta"], count: 2), "home/a/meta, home/b/state")
        let many = (1...20).map { "home/lamp-\(String(format: "%02d", $0))/$info" }
        XCTAssertEqual(
            RetainedSnapshot.named(many.reversed(), count: 1_234),
            "home/lamp-01/$info, home/lamp-02/$info, home/lamp-03/$info, home/lamp-04/$info, home/lamp-05/$info and 1229 more"
        )
        XCTAssertEqual(RetainedSnapshot.named([], count: 3), "3 topics")
        XCTAssertEqual(RetainedSnapshot.named(["a"], count: 1, shown: 0), "1 topic")
    }

    func testTheFileIsPrivateAndReadBackAndABadOneIsAnError() throws {
        let directory = try TemporaryDirectory(prefix: "homemqtt-owned")
        let store = OwnedTopicsStore(
            stateDirectory: URL(fileURLWithPath: directory.path), broker: "mqtt://127.0.0.1:1883", base: "home")
        XCTAssertNil(try store.load())
        try store.save(record())
        XCTAssertEqual(try store.load(), record())
        let mode = try FileManager.default.attributesOfItem(atPath: store.file.path)[.posixPermissions] as? Int
        XCTAssertEqual(mode, 0o600)
        let other = OwnedTopicsStore(
            stateDirectory: URL(fileURLWithPath: directory.path), broker: "mqtt://127.0.0.1:1883", base: "site2")
        XCTAssertNil(try other.load(), "another base topic has a record of its own")
        try Data(#"{"version": 1, "topics": "no"}"#.utf8).write(to: store.file)
        XCTAssertThrowsError(try store.load()) { error in
            XCTAssertTrue("\(error)".contains(store.file.path), "\(error)")
        }
    }

    /// The record is written as it is made (never whole in memory): the same JSON document a
    /// `JSONValue` of it encodes to, escapes included, across many of the writer's chunks, and
    /// each accessory's paths sorted however many models share them.
    func testTheRecordIsWrittenAsTheDocumentItIs() throws {
        let directory = try TemporaryDirectory(prefix: "homemqtt-owned")
        let store = OwnedTopicsStore(
            stateDirectory: URL(fileURLWithPath: directory.path), broker: "mqtt://\"broker\":1883", base: "häus")
        var record = OwnedTopics()
        record.topics = Set((0..<5_000).map { "häus/room \($0)/\"quoted\"\\back/$info" })
        record.accessories = Dictionary(
            uniqueKeysWithValues: (0..<3_000).map {
                // Twenty models, more than the writer keeps sorted, mixed in the ids' text order.
                ("häus/room/lamp-\($0)", Set(["light/on", "light/brightness\n", "model-\($0 % 20)/x"]))
            })
        try store.save(record)
        let expected = JSONValue.object([
            "version": .int(1), "broker": .string("mqtt://\"broker\":1883"), "base": .string("häus"),
            "topics": .array(record.topics.sorted().map(JSONValue.string)),
            "accessories": .object(record.accessories.mapValues { .array($0.sorted().map(JSONValue.string)) }),
        ])
        let written = try XCTUnwrap(FileManager.default.contents(atPath: store.file.path))
        XCTAssertGreaterThan(written.count, 4 * 64 * 1024, "more than a few chunks")
        XCTAssertEqual(Array(written), expected.encodedUTF8())
        XCTAssertEqual(try store.load(), record)
    }

    func testRequestFiltersMatchAsABrokerDoes() {
        for (topic, filter, expected) in [
            ("home/a/b/c/d/set", "home/+/+/+/+/set", true),
            ("home/a/b/c/set", "home/+/+/+/+/set", false),
            ("home/a/b/c/d/e/set", "home/+/+/+/+/set", false),
            ("home/$gateway/request/room/add", "home/$gateway/request/#", true),
            ("home/$gateway/request", "home/$gateway/request/#", true),
            ("home/$gateway/response/x", "home/$gateway/request/#", false),
            ("home/a/b/c/d/state", "home/+/+/+/+/set", false),
        ] {
            XCTAssertEqual(RetainedSnapshot.topic(topic, matches: filter), expected, "\(topic) ~ \(filter)")
        }
    }
}
