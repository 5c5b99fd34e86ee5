import Foundation
import HomeModel
import MQTT
import TestSupport
import XCTest

/// `state` follows the accessory's values in the order it took them, once per change, however
/// fast sets arrive: a flow triggered on `state` never sees an older value come back.
final class StateOrderTests: XCTestCase {
    let light = "home/garage/garage-door-opener/garage-light"

    /// Sets from the real `mosquitto_pub -l`, as fast as it publishes: one message per line.
    private func publishLines(_ lines: [String], to topic: String, broker: MosquittoBroker) async throws {
        let child = try ChildProcess(
            "mosquitto_pub",
            ["-h", "127.0.0.1", "-p", "\(broker.port)", "-q", "1", "-l", "-t", topic], standardInput: true)
        try child.write(lines.joined(separator: "\n") + "\n")
        child.closeInput()
        let status = try await child.waitForExit(timeout: 30)
        XCTAssertEqual(status, 0, child.standardError)
    }

    /// The live (not retained) `state` values published on `topic` so far.
    private func liveStates(_ subscriber: MQTTTestSubscriber, _ topic: String) -> [String] {
        subscriber.messages.filter { $0.topic == topic && !$0.retain }.map(\.string)
    }

    func testHundredsOfRapidSetsPublishStateInOrderOncePerChange() async throws {
        let gw = try await GatewayHarness.start()
        addTeardownBlock { await gw.stop() }
        let stateTopic = "\(light)/hue/state"
        let watcher = try await MQTTTestSubscriber.start(
            broker: gw.broker, filter: "\(light)/hue/+", clientID: "order-watcher")
        addTeardownBlock { await watcher.stop() }

        let values = Array(0...360)
        try await publishLines(values.map(String.init), to: "\(light)/hue/set", broker: gw.broker)
        let resultTopic = "\(light)/hue/result"
        let results = try await watcher.waitForMessages(count: values.count, timeout: 60) { $0.topic == resultTopic }
        XCTAssertEqual(results.count, values.count)
        try await watcher.waitForMessage("the last state", timeout: 10) {
            $0.topic == stateTopic && Double($0.string) == 360
        }
        // Anything published late (an echo after a newer value) would arrive within this wait.
        try await Task.sleep(for: .milliseconds(500))

        let states = liveStates(watcher, stateTopic).compactMap { Double($0) }
        let backwards = zip(states, states.dropFirst()).filter { $1 <= $0 }.count
        print(
            "figure: \(values.count) sets as fast as mosquitto_pub -l sends them; \(states.count) states, \(backwards) steps back, last \(states.last.map { "\($0)" } ?? "none")"
        )
        XCTAssertEqual(states.last, 360, "the final state is the last value set")
        for (earlier, later) in zip(states, states.dropFirst()) where later <= earlier {
            XCTFail("state went from \(earlier) back to \(later): \(states)")
            break
        }
        // Once per change: every value set differs from the one before, so each is published once.
        XCTAssertEqual(states.count, values.count, "\(states.count) states for \(values.count) changes")
    }

    func testFourQuickSetsAreEachPublishedOnceAndNeverReplayed() async throws {
        let gw = try await GatewayHarness.start()
        addTeardownBlock { await gw.stop() }
        let stateTopic = "\(light)/brightness/state"
        let watcher = try await MQTTTestSubscriber.start(
            broker: gw.broker, filter: stateTopic, clientID: "order-watcher")
        addTeardownBlock { await watcher.stop() }

        for round in 0..<5 {
            let values = (21...24).map { $0 + round * 10 }
            try await publishLines(values.map(String.init), to: "\(light)/brightness/set", broker: gw.broker)
            try await watcher.waitForMessage("round \(round)", timeout: 10) {
                $0.topic == stateTopic && $0.string == "\(values.last!)"
            }
        }
        try await Task.sleep(for: .milliseconds(500))
        let expected = (0..<5).flatMap { round in (21...24).map { "\($0 + round * 10)" } }
        XCTAssertEqual(liveStates(watcher, stateTopic), expected)
    }
}
