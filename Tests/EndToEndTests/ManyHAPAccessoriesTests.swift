import Foundation
import HAP
import HomeModel
import MQTT
import TestSupport
import XCTest

/// A home of 50 HAP accessories, each its own HAP-python accessory server on this machine, all
/// paired: the gateway (`homemqtt run` in process, on the memory broker) brings every one online
/// (set-ups at most 8 at a time, see `SetupSlots`), and a set reaches the last of them. It
/// prints the time from the start to all online and the resident memory then (the test's
/// process, the gateway in it), the figures issue 29 asks for.
final class ManyHAPAccessoriesTests: XCTestCase {
    static let count = 50

    func testFiftyHAPPythonAccessoriesAllComeOnline() async throws {
        if let reason = HAPPeer.unavailableReason {
            if HAPPeer.isRequired { throw ProcessError("\(reason) (CI=true: the HAP tests must run)") }
            throw XCTSkip(reason)
        }
        let directory = try TemporaryDirectory(prefix: "homemqtt-many-hap")
        var peers: [HAPPeer] = []
        // Started 10 at a time: each is a Python process importing HAP-python.
        for batch in stride(from: 0, to: Self.count, by: 10) {
            let started = try await withThrowingTaskGroup(of: HAPPeer.self) { group in
                for index in batch..<min(batch + 10, Self.count) {
                    group.addTask {
                        try await HAPPeer.start(state: directory.file("peer-\(index).json"), bridge: false)
                    }
                }
                return try await group.reduce(into: [HAPPeer]()) { $0.append($1) }
            }
            addTeardownBlock {
                await withTaskGroup(of: Void.self) { group in
                    for peer in started { group.addTask { await peer.stop() } }
                }
            }
            peers += started
        }
        let store = HAPPairingStore(directory: URL(fileURLWithPath: directory.file("state/pairings")))
        let controller = HAPController(store: store)
        for (index, peer) in peers.enumerated() {
            _ = try await HAPPeer.pair(controller, port: peer.port, name: "Lamp \(index)")
        }
        XCTAssertEqual(try store.all().count, Self.count)

        let config = try InProcessRun.writeConfig(in: directory, extra: "homeassistant:\n  enabled: false")
        let started = ContinuousClock.now
        try await InProcessRun.run(file: config) { run in
            let online: @Sendable (MQTTMessage) -> Bool = {
                $0.topic.hasSuffix("/$availability") && $0.string == "online"
            }
            do {
                try await waitUntil("\(Self.count) accessories online", timeout: 120, pollInterval: 0.02) {
                    Set(run.seen.elements.filter(online).map(\.topic)).count >= Self.count
                }
            } catch {
                let seen = Set(run.seen.elements.filter(online).map(\.topic)).count
                XCTFail("\(seen) of \(Self.count) online; gateway log: \(run.logs.lines.suffix(20))")
                throw error
            }
            let elapsed = ContinuousClock.now - started
            let topics = Set(run.seen.elements.filter(online).map(\.topic))
            XCTAssertEqual(topics.count, Self.count, "\(topics.sorted())")
            // The test's process, the gateway in it (the peers are processes of their own).
            let rss =
                (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8))?
                .split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? "VmRSS: ?"
            print("ManyHAPAccessoriesTests: \(Self.count) accessories online \(elapsed) after start; process \(rss)")

            // Every one is controlled: a set to each lamp's brightness is answered ok.
            let isBrightness: @Sendable (MQTTMessage) -> Bool = { $0.topic.hasSuffix("/brightness/state") }
            try await waitUntil("every lamp's brightness", timeout: 30, pollInterval: 0.02) {
                Set(run.seen.elements.filter(isBrightness).map(\.topic)).count >= Self.count
            }
            let brightness = Set(run.seen.elements.filter(isBrightness).map(\.topic))
            XCTAssertEqual(brightness.count, Self.count)
            for state in brightness.sorted().suffix(3) {
                let topic = String(state.dropLast("/state".count))
                try await run.publish("\(topic)/set", "21")
                let answer = try await run.seen.waitFor("\(topic)/result", timeout: 20) {
                    $0.topic == "\(topic)/result"
                }
                XCTAssertTrue(answer.string.contains("\"status\":\"ok\""), answer.string)
            }
        }
    }
}
