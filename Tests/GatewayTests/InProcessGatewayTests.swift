import Foundation
@testable import Gateway
import HomeMQTTApp
import HomeModel
import MQTT
import TestSupport
import TopicAPI
import XCTest

/// What only a broker held in memory lets a test do (drop one connection while the broker keeps
/// its retained messages, hold the broker back), and checks of the gateway's own workings (the
/// typed API on a changed tree, a second run without a state record, the idle watchdog). The
/// topic contract itself (start, `set`, errors, stop, a new description) is
/// `GatewayContractTests`, run on the memory rig and, under `CI=true`, on mosquitto.
final class InProcessGatewayTests: XCTestCase {
    let light = "home/garage/garage-door-opener/garage-light"

    /// Memory only: the gateway's connection drops while the broker stays up with its retained
    /// messages (the will is seen there). The mosquitto rig can only restart its broker, which
    /// forgets them: `GatewayContractTests.testReconnectRepublishesEverything` on both rigs.
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

    /// Memory only: `transport.hold()` makes a broker that is behind, which mosquitto cannot be
    /// made to be on demand.
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
    /// a second; the next request wakes it, and an accessory that never answers gets its
    /// `timeout` when `request-timeout` (2 s here) has passed, not before. On a manual clock: the
    /// test moves time itself, and sleeps for no timer.
    func testATimeoutIsAnsweredAfterTheWatchdogWentIdle() async throws {
        let clock = ManualGatewayClock()
        // No health document nor `$last-seen`: their refreshes are an idle gateway's other timers.
        try await InProcessGateway.run(
            configure: {
                $0.healthInterval = 0
                $0.lastSeenInterval = 0
            }, options: .init(clock: .manual(clock))
        ) { gw in
            let deadlines = await gw.gateway.work.deadlines
            // A second with nothing to watch: the watchdog stops waking on the clock.
            try await waitUntil("the watchdog asleep on the clock") { clock.sleepers >= 1 }
            clock.advance(by: .milliseconds(1_100))
            try await waitUntil("the watchdog idle") { deadlines.isWaitingForWork }
            XCTAssertEqual(clock.sleepers, 0, "an idle watchdog still wakes on the clock")

            await gw.home.setWriteDelay(.seconds(5))
            gw.seen.clear()
            let result = "\(light)/power-state/result"
            try await gw.publish("\(light)/power-state/set", "true")
            try await waitUntil("the request's deadline kept") { !deadlines.isEmpty }
            try await waitUntil("the watchdog woken, and asleep on the clock") {
                clock.sleepers >= 1 && !deadlines.isWaitingForWork
            }
            // 1.9 s on: the watchdog looks, and leaves the request to its accessory.
            let first = try XCTUnwrap(clock.nextDeadline)
            clock.advance(by: .milliseconds(1_900))
            try await waitUntil("the watchdog asleep again") {
                clock.nextDeadline.map { $0 > first } ?? false
            }
            XCTAssertFalse(gw.seen.elements.contains { $0.topic == result }, "answered before its deadline")
            // 2 s on: `timeout`.
            clock.advance(by: .milliseconds(100))
            let message = try await gw.next(result, timeout: 5)
            let answer = try XCTUnwrap(JSONValue(parsing: message.payload).objectValue)
            XCTAssertEqual(answer["code"], .string("timeout"), "\(answer)")
            await gw.home.setWriteDelay(.zero)
        }
    }
}
