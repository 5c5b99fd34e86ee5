import Foundation
import Gateway
import HomeModel
import MQTT
import TestSupport
import XCTest

/// The topic contract in one process, over a broker held in memory: what a client of the broker
/// sees when the gateway starts, answers a `set` and stops. Each test takes a fraction of a
/// second; `GatewayContractTests` checks the same contract through mosquitto.
final class InProcessGatewayTests: XCTestCase {
    let door = "home/garage/garage-door-opener/garage-door"
    let light = "home/garage/garage-door-opener/garage-light"

    func testStartPutsTheRetainedTreeOnTheBrokerAndOnlineLast() async throws {
        try await InProcessGateway.run { gw in
            let retained = gw.broker.retainedText(under: "home/#")
            XCTAssertEqual(retained["home/$gateway/status"], "online")
            XCTAssertEqual(retained["\(door)/target-door-state/state"], "1")
            XCTAssertEqual(retained["\(door)/current-door-state/state"], "1")
            XCTAssertEqual(retained["\(light)/brightness/state"], "80")
            XCTAssertEqual(retained["\(light)/fade-rate/state"], "1.0")
            XCTAssertEqual(retained["home/garage/garage-door-opener/$availability"], "online")
            let meta = try JSONValue(parsing: XCTUnwrap(retained["\(light)/brightness/meta"]))
            XCTAssertEqual(meta["format"], .string("int"))
            let info = try JSONValue(parsing: XCTUnwrap(retained["home/garage/garage-door-opener/$info"]))
            XCTAssertEqual(info["manufacturer"], .string("Kilgo Devices, Inc."))
            let tree = try XCTUnwrap(retained["home/$gateway/tree"])
            XCTAssertTrue(tree.contains("\(door)/target-door-state"), tree)

            // Under MQTT 5 every publication says what it is.
            let state = try XCTUnwrap(gw.broker.retained["\(light)/brightness/state"])
            XCTAssertEqual(state.properties.contentType, "application/json")
            // A client that sees `online` has seen the whole tree before it.
            let order = gw.seen.elements.map(\.topic)
            let online = try XCTUnwrap(order.firstIndex(of: "home/$gateway/status"))
            XCTAssertEqual(
                order.filter { $0.hasSuffix("/state") }.count, retained.keys.filter { $0.hasSuffix("/state") }.count)
            XCTAssertTrue(order[..<online].contains("\(light)/brightness/state"))
            XCTAssertFalse(order[online...].contains { $0.hasSuffix("/state") }, "a state after online")
            // The gateway's marker went to itself only (No Local does not hold it back from the
            // gateway, and the observer never subscribed where it would see it twice).
            XCTAssertEqual(order.filter { $0 == "home/$gateway/sync" }.count, 1)
        }
    }

    func testSetIsAnsweredOkAndTheNewStateIsRetained() async throws {
        try await InProcessGateway.run { gw in
            let answer = try await gw.request("\(light)/brightness/set", "42", answer: "\(light)/brightness/result")
            XCTAssertEqual(answer["status"], .string("ok"), "\(answer)")
            XCTAssertEqual(answer["op"], .string("set"))
            XCTAssertEqual(answer["value"], .int(42))
            XCTAssertEqual(answer["id"], .null)
            let state = try await gw.next("\(light)/brightness/state") { $0 == "42" }
            XCTAssertFalse(state.retain, "a live state is forwarded without the retain flag")
            XCTAssertEqual(gw.broker.retainedText(under: "\(light)/brightness/state").values.first, "42")

            // A valid-value name, with an id; the door starts to travel.
            let door = try await gw.request(
                "\(door)/target-door-state/set", #"{"value": "open", "id": "open-1"}"#,
                answer: "\(door)/target-door-state/result")
            XCTAssertEqual(door["status"], .string("ok"), "\(door)")
            XCTAssertEqual(door["id"], .string("open-1"))
            try await gw.next("\(self.door)/current-door-state/state") { $0 == "2" }
        }
    }

    func testBadPayloadsAreAnsweredWithErrorsAndChangeNothing() async throws {
        try await InProcessGateway.run { gw in
            let cases: [(String, String, String)] = [
                ("\(light)/brightness/set", "140", "out-of-range"),
                ("\(light)/brightness/set", "bright", "invalid-type"),
                ("\(light)/brightness/set", "{\"value\": ", "invalid-json"),
                ("\(door)/target-door-state/set", "ajar", "not-a-valid-value"),
                ("\(door)/current-door-state/set", "0", "read-only"),
            ]
            for (topic, payload, code) in cases {
                let result = topic.replacingOccurrences(of: "/set", with: "/result")
                let answer = try await gw.request(topic, payload, answer: result)
                XCTAssertEqual(answer["status"], .string("error"), "\(topic) \(payload)")
                XCTAssertEqual(answer["code"], .string(code), "\(topic) \(payload): \(answer)")
                XCTAssertFalse(answer["message"]?.stringValue?.isEmpty ?? true, "\(answer)")
            }
            let retained = gw.broker.retainedText(under: "home/garage/#")
            XCTAssertEqual(retained["\(light)/brightness/state"], "80")
            XCTAssertEqual(retained["\(door)/target-door-state/state"], "1")
            XCTAssertFalse(gw.seen.elements.contains { $0.topic.hasSuffix("/state") }, "a state after a refused set")
        }
    }

    func testStopPublishesOfflineAndDisconnectsCleanly() async throws {
        let gw = try await withGateway { gw in
            XCTAssertEqual(gw.broker.retainedText()["home/$gateway/status"], "online")
            gw.seen.clear()
        }
        XCTAssertEqual(gw.transport.connectionState, .disconnected(nil), "a clean DISCONNECT: no will")
        XCTAssertEqual(gw.broker.retainedText()["home/$gateway/status"], "offline")
        let offline = try await gw.seen.waitFor("offline", timeout: 2) { $0.topic == "home/$gateway/status" }
        XCTAssertEqual(offline.string, "offline")
    }

    func testALostConnectionSendsTheWillAndTheReconnectRepublishes() async throws {
        try await InProcessGateway.run { gw in
            gw.transport.loseConnection()
            XCTAssertEqual(gw.broker.retainedText()["home/$gateway/status"], "offline")
            gw.seen.clear()
            gw.transport.connect()
            try await gw.next("home/$gateway/status") { $0 == "online" }
            try await gw.next("\(light)/brightness/state") { $0 == "80" }
            XCTAssertEqual(gw.broker.retainedText()["home/$gateway/status"], "online")
        }
    }

    /// A known accessory described again (a HAP accessory read after a reconnect, a simulated
    /// one replaced) may carry a value no event reported: it is published like any update.
    func testANewDescriptionsValuesArePublishedOnState() async throws {
        try await InProcessGateway.run { gw in
            let tree = await gw.gateway.tree
            let node = try XCTUnwrap(tree.characteristic(topic: "\(light)/brightness"))
            let accessories = await gw.home.accessories()
            var accessory = try XCTUnwrap(accessories.first { $0.id == node.address.accessoryID })
            for si in accessory.services.indices {
                for ci in accessory.services[si].characteristics.indices
                where accessory.services[si].characteristics[ci].iid == node.address.iid {
                    accessory.services[si].characteristics[ci].value = .int(33)
                }
            }
            gw.seen.clear()
            await gw.home.add(accessory)
            try await gw.next("\(light)/brightness/state") { $0 == "33" }
            try await gw.next("home/garage/garage-door-opener/$state") { $0.contains("\"brightness\":33") }
            XCTAssertEqual(gw.broker.retainedText(under: "\(light)/brightness/state").values.first, "33")
        }
    }

    /// While the broker is behind, an accessory's `$state` waits for it (up to a second) and goes
    /// out once with the latest values, where a free broker gets one per 100 ms of changes;
    /// every `state` message still goes out, in order.
    func testStateDocumentsWaitForABrokerThatIsBehind() async throws {
        try await InProcessGateway.run { gw in
            let tree = await gw.gateway.tree
            let address = try XCTUnwrap(tree.characteristic(topic: "\(light)/brightness")).address
            let document = "home/garage/garage-door-opener/$state"
            gw.seen.clear()
            gw.transport.hold()
            for value: Int64 in 51...65 {
                try await gw.home.setValue(address, .int(value))
                try await Task.sleep(for: .milliseconds(20))
            }
            try await Task.sleep(for: .milliseconds(150))
            gw.transport.release()
            try await gw.next(document, timeout: 2) { $0.contains("\"brightness\":65") }
            try await Task.sleep(for: .milliseconds(200))
            let states = gw.seen.elements.filter { $0.topic == "\(light)/brightness/state" }.map(\.string)
            XCTAssertEqual(states, (51...65).map { "\($0)" })
            let documents = gw.seen.elements.filter { $0.topic == document }.map(\.string)
            XCTAssertEqual(documents.count, 1, "\(documents)")

            // With room again, a change's document follows at once.
            let start = ContinuousClock.now
            try await gw.home.setValue(address, .int(20))
            try await gw.next(document, timeout: 2) { $0.contains("\"brightness\":20") }
            XCTAssertLessThan(ContinuousClock.now - start, .milliseconds(900), "not held back once the broker has room")
        }
    }

    /// A caller's node from a tree that has changed since (a Homie controller's, a page's) is
    /// looked up again: a characteristic the scope made read-only is refused, as over MQTT.
    func testAPerformedCommandUsesTheCurrentTree() async throws {
        try await InProcessGateway.run { gw in
            let before = await gw.gateway.tree
            let stale = try XCTUnwrap(before.characteristic(topic: "\(light)/brightness"))
            let answer = try await gw.request(
                "home/$gateway/request/scope/set", #"{"scope": {"read-only": ["Garage Door Opener"]}}"#,
                answer: "home/$gateway/response/scope/set")
            XCTAssertEqual(answer["status"], "ok", "\(answer)")
            let refused = await gw.gateway.perform(.write(stale.address, .int(10)))
            XCTAssertEqual(refused.failure?.code, .readOnlyScope, "\(refused)")
            let read = await gw.gateway.perform(.read(stale.address))
            XCTAssertNotNil(try read.get().value, "\(read)")
        }
    }

    /// A state directory lost (no record of what was published) and `accessory-state` turned
    /// off: the earlier run's `$state` documents, read from its retained tree, are still the
    /// gateway's, and cleared.
    func testAnEarlierRunsStateDocumentsAreClearedWhenTurnedOffWithoutARecord() async throws {
        let broker = MemoryBroker()
        let document = "home/garage/garage-door-opener/$state"
        try await InProcessGateway.run(broker: broker) { gw in
            XCTAssertNotNil(gw.broker.retainedText()[document])
        }
        XCTAssertNotNil(broker.retainedText()[document], "left retained by the first run")
        try await InProcessGateway.run(configure: { $0[AccessoryStateConfig.self].enabled = false }, broker: broker) {
            gw in
            XCTAssertNil(gw.broker.retainedText()[document])
            XCTAssertNotNil(gw.broker.retainedText()["home/garage/garage-door-opener/$info"])
        }
    }

    /// With nothing to watch for a while the deadline watchdog waits instead of waking ten times
    /// a second; the next request wakes it, and an accessory that never answers still gets its
    /// `timeout` on time (`request-timeout` is 2 s here).
    func testATimeoutIsAnsweredAfterTheWatchdogWentIdle() async throws {
        try await InProcessGateway.run { gw in
            try await Task.sleep(for: .milliseconds(1_600))
            await gw.home.setWriteDelay(.seconds(5))
            gw.seen.clear()
            let started = ContinuousClock.now
            try await gw.publish("\(light)/power-state/set", "true")
            let message = try await gw.next("\(light)/power-state/result", timeout: 6)
            let answer = try XCTUnwrap(JSONValue(parsing: message.payload).objectValue)
            XCTAssertEqual(answer["code"], .string("timeout"), "\(answer)")
            XCTAssertLessThan(ContinuousClock.now - started, .milliseconds(3_000))
            await gw.home.setWriteDelay(.zero)
        }
    }

    /// Runs a gateway through `body` and returns it stopped, to look at what the stop left.
    private func withGateway(_ body: (InProcessGateway) async throws -> Void) async throws -> InProcessGateway {
        var stopped: InProcessGateway?
        try await InProcessGateway.run { gw in
            try await body(gw)
            stopped = gw
        }
        return try XCTUnwrap(stopped)
    }
}
