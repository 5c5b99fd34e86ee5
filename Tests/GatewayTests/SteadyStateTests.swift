import Foundation
import MQTT
import TestSupport
import XCTest

/// A gateway that runs for years sees the same things again and again: requests answered on
/// `result` and on an MQTT 5 Response Topic, accessories going unreachable and coming back,
/// accessories removed and added again, the broker going away. None of it may leave anything
/// behind. The heap (`HeapInUse`) is read after a warm-up and again after 300 more rounds of all
/// of them; it may not grow by 4 KB a round. A gateway made to keep 4 KB at each value it took
/// failed it (4.7 KB a round); something small kept per request (~0.3 KB) would not be caught.
///
/// Why so coarse: malloc's count rises for a while before it levels, ~0.4–0.5 KB a round over
/// the first few hundred rounds (with the threads' caches of freed chunks or without them), then
/// ~40 bytes a round and falling. heaptrack's count of what was still allocated, with the gateway
/// running, after 100 and after 600 rounds differed by 29 KB, 58 bytes a round, most of it
/// libdispatch's cache of continuations (Docs/performance.md).
///
/// Memory rig only: the heap is this process's, and the memory broker adds little that grows
/// with the rounds (a line of log and a lost connection's client id per restart).
final class SteadyStateTests: RigTestCase {
    let light = "home/garage/garage-door-opener/garage-light"

    func testRoundsOfChurnLeaveTheHeapWhereItWas() async throws {
        let light = light
        guard HeapInUse.bytes() != nil else { throw XCTSkip("needs glibc's malloc_info") }
        await onEveryRig([.memory]) { gw in
            let doorID = try await gw.accessoryID(named: "Garage Door Opener")
            let lampID = try await gw.accessoryID(named: "Bedroom Lamp")
            let accessories = await gw.home.accessories()
            let lamp = try XCTUnwrap(accessories.first { $0.id == lampID })
            let replies = try await gw.subscriber("client/replies/#")

            func round(_ i: Int) async throws {
                let answer = try await gw.request(
                    "\(light)/brightness/set", "\(i % 100)", answer: "\(light)/brightness/result")
                XCTAssertEqual(answer["status"], .string("ok"), "round \(i)")

                replies.seen.clear()
                var properties = MQTTPublishProperties()
                properties.responseTopic = "client/replies/\(i % 7)"
                properties.correlationData = Array("request-\(i)".utf8)
                try await gw.publish("\(light)/brightness/get", "", properties: properties)
                let reply = try await replies.seen.waitFor("the get's reply")
                XCTAssertEqual(reply.properties.correlationData, properties.correlationData, "round \(i)")

                _ = await gw.home.setReachable(doorID, false)
                try await gw.next("home/garage/garage-door-opener/$availability") { $0 == "offline" }
                _ = await gw.home.setReachable(doorID, true)
                try await gw.next("home/garage/garage-door-opener/$availability") { $0 == "online" }

                _ = await gw.home.remove(accessoryID: lampID)
                try await gw.next("home/$gateway/event") { $0.contains("accessory-removed") }
                await gw.home.add(lamp)
                try await gw.next("home/$gateway/event") { $0.contains("accessory-added") }

                if i % 10 == 9 {
                    gw.seen.clear()
                    try await gw.restartBroker()
                    try await gw.next("home/$gateway/status") { $0 == "online" }
                }
                gw.seen.clear()
            }

            /// The heap once the gateway has put out all that a round gave (its `$state` and
            /// `$last-seen` documents go a moment later).
            func settledHeap() async throws -> Int {
                try await Task.sleep(for: .milliseconds(300))
                return try XCTUnwrap(HeapInUse.bytes())
            }

            let warmUp = 100
            let measured = 300
            for i in 0..<warmUp { try await round(i) }
            let before = try await settledHeap()
            for i in warmUp..<(warmUp + measured) { try await round(i) }
            let after = try await settledHeap()
            let perRound = Double(after - before) / Double(measured)
            print("heap \(before) → \(after) bytes over \(measured) rounds: \(Int(perRound)) bytes a round")
            XCTAssertLessThan(
                perRound, 4096,
                "the heap grew from \(before) to \(after) bytes over \(measured) rounds")

            // Still the same home: the lamp back in its place, the door online.
            let retained = try await gw.retained()
            XCTAssertEqual(retained["home/garage/garage-door-opener/$availability"], "online")
            XCTAssertNotNil(retained["home/bedroom/bedroom-lamp/bedroom-lamp/brightness/state"])
            await replies.close()
        }
    }
}
