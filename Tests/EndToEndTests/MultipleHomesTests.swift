import Foundation
import HAP
import HomeModel
import MQTT
import TestSupport
import XCTest

/// Two homes served at once by one gateway (`homemqtt run` in process, on the memory broker):
/// the simulated home on `home/`, and a second home on `home-cabin/` that takes a HAP-python
/// bridge (its whole pairing) and a simulated accessory moved from the first. The homes are
/// managed with the operations the `homemqtt home …` commands send, on the request topic as they
/// send them.
final class MultipleHomesTests: XCTestCase {
    /// Publishes `payload` on `<topic>/set` and returns the `result` answer's status.
    func set(_ run: InProcessRun, _ topic: String, _ payload: String) async throws -> String {
        run.seen.clear()
        try await run.publish(topic + "/set", payload)
        let result = try await run.seen.waitFor("the result of \(topic)", timeout: 20) { $0.topic == topic + "/result" }
        return try JSONValue(parsing: result.payload)["status"]?.stringValue ?? result.string
    }

    /// `op` through the running gateway, which must answer `ok`; the answer's `data`.
    @discardableResult
    func operation(_ run: InProcessRun, _ op: String, _ fields: [String: JSONValue] = [:]) async throws -> JSONValue {
        let answer = try await run.request(op, fields)
        XCTAssertEqual(answer["status"], "ok", "\(op): \(answer)")
        return answer["data"] ?? .null
    }

    /// The simulated garage door's target (`Config/accessories/garage.yml`, 12 s of travel).
    static let simulatedDoor = "/garage-door-opener/garage-door/target-door-state/state"

    func testTwoHomesAreServedApartAndAnAccessoryMovesWithoutLeavingTopicsBehind() async throws {
        if let reason = HAPPeer.unavailableReason {
            if HAPPeer.isRequired { throw ProcessError("\(reason) (CI=true: the HAP tests must run)") }
            throw XCTSkip(reason)
        }
        let directory = try TemporaryDirectory(prefix: "homemqtt-homes")
        let peer = try await HAPPeer.start(state: directory.file("peer.state"))
        addTeardownBlock { await peer.stop() }
        // Paired before the second home exists, into the state directory as `hap pair` pairs:
        // the bridge joins the primary home.
        let store = HAPPairingStore(directory: URL(fileURLWithPath: directory.file("state/pairings")))
        let pairing = try await HAPPeer.pair(HAPController(store: store), port: peer.port, name: "Peer Bridge")
        let config = try InProcessRun.writeConfig(
            in: directory, simulator: true,
            extra: "base-topic: home\nrequest-timeout: 5\nhomeassistant:\n  enabled: true")
        let broker = MemoryBroker()
        try await InProcessRun.run(file: config, broker: broker) { run in
            try await twoHomes(run, pairing: pairing)
        }
        // Stopped (what SIGTERM did): both homes gone, the remaining home says offline.
        XCTAssertEqual(broker.retainedText(under: "home/$gateway/status"), ["home/$gateway/status": "offline"])
    }

    func twoHomes(_ run: InProcessRun, pairing: HAPPairing) async throws {
        do {
            try await run.seen.waitFor("the Peer Light in the first home", timeout: 30) {
                $0.topic.hasPrefix("home/") && $0.topic.contains("/peer-light/")
                    && $0.topic.hasSuffix("/power-state/state")
            }
        } catch {
            XCTFail("topics: \(Set(run.seen.elements.map(\.topic)).sorted()) log: \(run.logs.lines.suffix(20))")
            throw error
        }

        // A second home, through the running gateway: served at once, announced on both.
        let added = try await operation(run, "home/add", ["name": "Cabin"])
        XCTAssertEqual(added["base-topic"], .string("home-cabin"))
        try await run.seen.waitFor("the cabin online", timeout: 20) {
            $0.topic == "home-cabin/$gateway/status" && $0.string == "online"
        }
        try await run.seen.waitFor("home-added on the first home", timeout: 10) {
            $0.topic == "home/$gateway/event" && $0.string.contains("\"home-added\"")
        }

        // The bridge's whole pairing and one simulated accessory go to the cabin.
        try await operation(run, "source/home", ["prefix": .string("\(pairing.idPrefix):"), "home": "Cabin"])
        try await operation(run, "accessory/home", ["accessory": "sim:garage", "home": "Cabin"])
        try await run.seen.waitFor("the garage door in the cabin", timeout: 20) {
            $0.topic.hasPrefix("home-cabin/") && $0.topic.hasSuffix(Self.simulatedDoor)
        }
        try await run.seen.waitFor("the Peer Light in the cabin", timeout: 20) {
            $0.topic.hasPrefix("home-cabin/") && $0.topic.contains("/peer-light/")
                && $0.topic.hasSuffix("/power-state/state")
        }

        // Both trees are complete, and the first keeps nothing of what left it (its clears go
        // out on its own connection, apart from the cabin's publications).
        let first = try await run.retained("home/#", until: "the first home without what left it") {
            !$0.keys.contains { $0.contains("garage-door-opener") || $0.contains("peer-") }
        }
        let cabin = try await run.retained("home-cabin/#")
        XCTAssertEqual(first["home/$gateway/status"], "online")
        XCTAssertEqual(cabin["home-cabin/$gateway/status"], "online")
        XCTAssertTrue(first.keys.contains { $0.contains("/front-door-lock/") }, "\(first.keys.sorted())")
        XCTAssertFalse(
            first.keys.contains { $0.contains("garage-door-opener") || $0.contains("peer-") }, "\(first.keys.sorted())")
        XCTAssertFalse(cabin.keys.contains { $0.contains("front-door-lock") }, "\(cabin.keys.sorted())")
        let cabinTree = try JSONValue(parsing: Array(try XCTUnwrap(cabin["home-cabin/$gateway/tree"]).utf8))
        XCTAssertEqual(cabinTree["home"], .string("Cabin"))

        // Sets are answered in each home: a simulated light, the cabin's garage door and its HAP light.
        let hallway = try XCTUnwrap(
            first.keys.first { $0.hasSuffix("/hallway-light/hallway-light/power-state/state") },
            "\(first.keys.sorted())")
        // The simulated door, not the HAP bridge's (which opens at once): picked by its path.
        let cabinDoor = try XCTUnwrap(cabin.keys.first { $0.hasSuffix(Self.simulatedDoor) }, "\(cabin.keys.sorted())")
        let peerLight = try XCTUnwrap(
            cabin.keys.first { $0.contains("/peer-light/") && $0.hasSuffix("/power-state/state") })
        for (topic, value) in [(hallway, "true"), (cabinDoor, "0"), (peerLight, "true")] {
            let status = try await set(run, String(topic.dropLast("/state".count)), value)
            XCTAssertEqual(status, "ok", topic)
        }

        // The door travels (12 s): its new home hears it, although the home it left turned off
        // the notifications it no longer wants.
        let current = cabinDoor.replacingOccurrences(of: "/target-door-state/", with: "/current-door-state/")
        try await run.seen.waitFor("the cabin's garage door open", timeout: 40) {
            $0.topic == current && $0.string == "0"
        }

        // Home Assistant: one device per accessory, each home's on its own topics, no id twice.
        let discovery = try await run.retained("homeassistant/#")
        var uniqueIDs = Set<String>()
        var cabinDevices = 0
        for (topic, text) in discovery where topic.hasSuffix("/config") {
            let config = try JSONValue(parsing: Array(text.utf8))
            let components = config["components"]?.objectValue ?? [:]
            for component in components.values {
                let id = try XCTUnwrap(component["unique_id"]?.stringValue)
                XCTAssertTrue(uniqueIDs.insert(id).inserted, "unique_id \(id) twice")
            }
            if text.contains("home-cabin/") {
                cabinDevices += 1
                // The cabin's areas carry its name: its default room is the area "Cabin".
                XCTAssertEqual(config["device"]?["suggested_area"]?.stringValue?.hasPrefix("Cabin"), true, text)
                XCTAssertFalse(text.contains("\"home/"), "a cabin device names the first home's topics: \(topic)")
            }
        }
        XCTAssertGreaterThanOrEqual(cabinDevices, 2, "\(discovery.keys.sorted())")

        // The primary home switched: announced, and no topic of either home changes.
        let infoBefore = first.filter { $0.key.hasSuffix("/$info") }.merging(
            cabin.filter { $0.key.hasSuffix("/$info") }
        ) { a, _ in a }
        run.seen.clear()
        try await operation(run, "home/primary", ["home": "Cabin"])
        let event = try await run.seen.waitFor("primary-home-changed", timeout: 10) {
            $0.topic == "home/$gateway/event" && $0.string.contains("primary-home-changed")
        }
        XCTAssertEqual(try JSONValue(parsing: event.payload)["home"]?["name"], .string("Cabin"))
        let homes = try await operation(run, "homes")
        XCTAssertEqual(homes.arrayValue?.first { $0["primary"] == .bool(true) }?["name"], .string("Cabin"))
        let firstInfo = try await run.retained("home/+/+/$info")
        let infoAfter = firstInfo.merging(try await run.retained("home-cabin/+/+/$info")) { a, _ in a }
        XCTAssertEqual(infoAfter, infoBefore)

        // A new base topic: the cabin's topics move, none stay behind.
        try await operation(run, "home/base-topic", ["home": "Cabin", "base-topic": "lake"])
        try await run.seen.waitFor("the cabin online on its new base", timeout: 20) {
            $0.topic == "lake/$gateway/status" && $0.string == "online"
        }
        try await run.seen.waitFor("the Peer Light on the new base", timeout: 20) {
            $0.topic.hasPrefix("lake/") && $0.topic.contains("/peer-light/") && $0.topic.hasSuffix("/power-state/state")
        }
        try await run.retained("home-cabin/#", until: "the cabin's old base cleared") { $0.isEmpty }

        // Removing the cabin needs a home for its accessories; with one, its topics all go.
        try await operation(run, "home/primary", ["home": "My Home"])
        let refused = try await run.request("home/remove", ["home": "Cabin"])
        XCTAssertEqual(refused["status"], "error", "\(refused)")
        XCTAssertEqual(refused["code"], "home-not-empty", "\(refused)")
        try await operation(run, "home/remove", ["home": "Cabin", "move-to": "My Home"])
        try await run.seen.waitFor("the Peer Light back in the first home", timeout: 20) {
            $0.topic.hasPrefix("home/") && $0.topic.contains("/peer-light/") && $0.topic.hasSuffix("/power-state/state")
        }
        // The retired home's clears go out on its own connection, apart from the first home's.
        try await run.retained("lake/#", until: "the removed cabin's topics cleared") { $0.isEmpty }
        try await run.retained("homeassistant/#", until: "the removed cabin's discovery cleared") {
            !$0.values.contains { $0.contains("home-cabin/") || $0.contains("\"lake/") }
        }

        // A home served again under its client id waited for its old connection to close: a
        // takeover could drop the old connection's clears, and the old last will came after them.
        XCTAssertEqual(
            run.broker.takeovers, [], "a home's new connection took over its old one before that one had closed")
    }
}
