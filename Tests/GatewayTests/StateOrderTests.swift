import Foundation
import HomeModel
import MQTT
import TestSupport
import XCTest

/// `state` follows the accessory's values in the order it took them, once per change, however
/// fast sets arrive: a flow triggered on `state` never sees an older value come back. On every
/// enabled rig (`Rig.enabled`).
final class StateOrderTests: RigTestCase {
    let light = "home/garage/garage-door-opener/garage-light"

    /// Sets as fast as a client publishes them, one message per line: on mosquitto from the real
    /// `mosquitto_pub -l`; in memory from another client, back to back.
    private func publishLines(_ lines: [String], to topic: String, on gw: RiggedGateway) async throws {
        switch gw.broker {
        case .mosquitto(let broker):
            let child = try ChildProcess(
                "mosquitto_pub",
                ["-h", "127.0.0.1", "-p", "\(broker.port)", "-q", "1", "-l", "-t", topic], standardInput: true)
            try child.write(lines.joined(separator: "\n") + "\n")
            child.closeInput()
            let status = try await child.waitForExit(timeout: 30)
            XCTAssertEqual(status, 0, child.standardError)
        case .memory, .mqttools:
            let client = try await gw.broker.client("order-publisher")
            for line in lines { try await client.publish(topic, payload: Array(line.utf8), qos: .atLeastOnce) }
            await gw.broker.disconnect(client)
        }
    }

    /// The live (not retained) `state` values published on `topic` so far.
    private func liveStates(_ seen: MessageCollector, _ topic: String) -> [String] {
        seen.elements.filter { $0.topic == topic && !$0.retain }.map(\.string)
    }

    func testHundredsOfRapidSetsPublishStateInOrderOncePerChange() async throws {
        await onEveryRig { gw in
            let stateTopic = "\(light)/hue/state"
            let watcher = try await gw.subscriber("\(light)/hue/+")

            let values = Array(0...360)
            try await publishLines(values.map(String.init), to: "\(light)/hue/set", on: gw)
            let resultTopic = "\(light)/hue/result"
            let results = try await watcher.seen.waitFor(count: values.count, "results", timeout: 60) {
                $0.topic == resultTopic
            }
            XCTAssertEqual(results.count, values.count)
            try await watcher.seen.waitFor("the last state", timeout: 10) {
                $0.topic == stateTopic && Double($0.string) == 360
            }
            // Anything published late (an echo after a newer value) would arrive within this wait.
            try await Task.sleep(for: .milliseconds(500))

            let states = liveStates(watcher.seen, stateTopic).compactMap { Double($0) }
            await watcher.close()
            let backwards = zip(states, states.dropFirst()).filter { $1 <= $0 }.count
            print(
                "figure: \(values.count) sets as fast as a client sends them (\(gw.rig) rig); \(states.count) states, \(backwards) steps back, last \(states.last.map { "\($0)" } ?? "none")"
            )
            XCTAssertEqual(states.last, 360, "the final state is the last value set")
            for (earlier, later) in zip(states, states.dropFirst()) where later <= earlier {
                XCTFail("state went from \(earlier) back to \(later): \(states)")
                break
            }
            // Once per change: every value set differs from the one before, so each is published once.
            XCTAssertEqual(states.count, values.count, "\(states.count) states for \(values.count) changes")
        }
    }

    func testFourQuickSetsAreEachPublishedOnceAndNeverReplayed() async throws {
        await onEveryRig { gw in
            let stateTopic = "\(light)/brightness/state"
            let watcher = try await gw.subscriber(stateTopic)

            for round in 0..<5 {
                let values = (21...24).map { $0 + round * 10 }
                try await publishLines(values.map(String.init), to: "\(light)/brightness/set", on: gw)
                try await watcher.seen.waitFor("round \(round)", timeout: 10) {
                    $0.topic == stateTopic && $0.string == "\(values.last!)"
                }
            }
            try await Task.sleep(for: .milliseconds(500))
            let expected = (0..<5).flatMap { round in (21...24).map { "\($0 + round * 10)" } }
            XCTAssertEqual(liveStates(watcher.seen, stateTopic), expected)
            await watcher.close()
        }
    }
}
