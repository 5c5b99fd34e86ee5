import Foundation
import Synchronization
import HomeModel
import MQTT
import TestSupport
import XCTest

@testable import Gateway

/// What views beside the MQTT topics (Homie, the web page) get from the gateway: the published
/// home and its changes, and requests answered by the same path as MQTT messages.
final class GatewayViewsTests: RigTestCase {
    let light = "home/garage/garage-door-opener/garage-light"

    func testAnObserverGetsTheHomeThenItsChanges() async throws {
        await onEveryRig { gw in
            var changes = await gw.gateway.observe().makeAsyncIterator()
            guard case .snapshot(let snapshot)? = await changes.next() else { return XCTFail("no snapshot first") }
            let accessories = await gw.gateway.tree.accessories.count
            XCTAssertEqual(snapshot.tree.accessories.count, accessories)
            let brightness = try XCTUnwrap(snapshot.tree.characteristic(topic: light + "/brightness"))
            XCTAssertEqual(snapshot.values[brightness.address], .int(80))

            try await gw.publish(light + "/brightness/set", "35")
            var seen: CharacteristicValue?
            while seen == nil, let change = await changes.next() {
                if case .value(let node, let value) = change, node.address == brightness.address { seen = value }
            }
            XCTAssertEqual(seen.flatMap(\.doubleValue), 35)
        }
    }

    func testARequestIsAnsweredAsTheMQTTMessageItStandsFor() async throws {
        await onEveryRig { gw in
            gw.seen.clear()
            let ok = await gw.gateway.request(topic: light + "/brightness/set", payload: Array("30".utf8))
            XCTAssertEqual(ok["status"], "ok", "\(ok)")
            XCTAssertEqual(ok["value"], 30)
            // The same answer went to the result topic, as for an MQTT client.
            let published = try await gw.next(light + "/brightness/result")
            XCTAssertEqual(try JSONValue(parsing: published.payload), ok)

            let refused = await gw.gateway.request(topic: light + "/brightness/set", payload: Array("140".utf8))
            XCTAssertEqual(refused["code"], "out-of-range")
            let toggled = await gw.gateway.request(topic: light + "/$toggle", payload: [])
            XCTAssertEqual(toggled["op"], "toggle")
            let health = await gw.gateway.request(topic: "home/$gateway/request/health", payload: Array("{}".utf8))
            XCTAssertEqual(health["status"], "ok")
            // Topics that take no request are answered too, never left waiting.
            for topic in [light + "/nothing/set", light + "/brightness/state", "home/$gateway/status", "elsewhere/x"] {
                let answer = await gw.gateway.request(topic: topic, payload: Array("1".utf8))
                XCTAssertEqual(answer["code"], "unknown-topic", "\(topic): \(answer)")
            }
        }
    }
}

/// Views that go away while the gateway tells the others of changes. Cancelling a view's task
/// runs its stream's `onTermination` (which takes the observers' lock) while the task's status
/// is locked; the gateway yielding under the observers' lock took the same two locks the other
/// way round, and a `.ci/run` hung in that deadlock. Here 300 views come and go during 300 changes;
/// a deadlock stops the process with its message rather than hanging the suite.
final class GatewayViewsChurnTests: RigTestCase {
    func testViewsThatComeAndGoDuringChangesNeverStopTheGateway() async throws {
        let finished = DispatchSemaphore(value: 0)
        let watchdog = Thread {
            if finished.wait(timeout: .now() + 120) == .timedOut {
                fatalError("GatewayViewsChurnTests: not done in 120 s: the gateway and a view deadlocked")
            }
        }
        watchdog.start()
        defer { finished.signal() }
        let light = "home/garage/garage-door-opener/garage-light"
        await onEveryRig { gw in
            let gateway = gw.gateway
            let churning = ManagedFlag()
            await withTaskGroup(of: Void.self) { group in
                // Changes all the time while views come and go: four writers.
                for writer in 0..<4 {
                    group.addTask {
                        var round = writer
                        while !churning.isDone {
                            round += 1
                            let answer = await gateway.request(
                                topic: light + "/brightness/set", payload: Array("\(round % 100)".utf8))
                            XCTAssertEqual(answer["status"], "ok", "\(answer)")
                        }
                    }
                }
                group.addTask {
                    defer { churning.done() }
                    for _ in 0..<300 {
                        await withTaskGroup(of: Void.self) { view in
                            // A view that has its snapshot and takes changes, cancelled mid-stream.
                            view.addTask { for await _ in await gateway.observe() {} }
                            view.addTask { try? await Task.sleep(for: .microseconds(Int.random(in: 50...2000))) }
                            await view.next()
                            view.cancelAll()
                        }
                    }
                }
            }
            // Still serving: a view that comes now gets the home.
            var changes = await gateway.observe().makeAsyncIterator()
            guard case .snapshot? = await changes.next() else { return XCTFail("no snapshot") }
        }
    }
}

/// A flag one task sets and others read.
private final class ManagedFlag: Sendable {
    private let flag = Mutex(false)
    var isDone: Bool { flag.withLock { $0 } }
    func done() { flag.withLock { $0 = true } }
}
