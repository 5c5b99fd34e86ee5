import Foundation
import HAP
import HomeKitBridge
import HomeKitBridgeTestSupport
import HomeModel
import TestSupport
import XCTest

@testable import Gateway

/// A controller's read of a value the gateway keeps current (a reachable accessory's
/// characteristic that notifies every change) is answered at once from the bridge's view, without
/// asking the accessory; a write's value is read back at once; what cannot notify, and every
/// characteristic of an unreachable accessory, is still read through the gateway.
final class BridgeReadCacheTests: XCTestCase {
    static let garage = "sim:garage"
    static let light = "home/garage/garage-door-opener/garage-light"

    /// The `get`s the gateway has dispatched to accessories.
    private func gets(_ gw: BridgedGateway) -> Int { gw.gateway.activity.requestCounts.gets }

    func testReadsOfCurrentValuesDoNotAskTheAccessory() async throws {
        let state = try TemporaryDirectory(prefix: "homekit-cache")
        try await BridgedGateway.run(state: state) { gw in
            let (_, connection) = try await Controller.pair(gw, state: state)
            let ids = try IDsFile(state: state)
            let brightness = try await ids.hapID(gw, topic: "\(Self.light)/brightness")
            let name = try ids.informationID(Self.garage, type: "23")

            let before = gets(gw)
            for _ in 0..<20 {
                let read = try await connection.readCharacteristics([brightness, name])
                XCTAssertEqual(try read[brightness]?.get(), 80)
                XCTAssertEqual(try read[name]?.get(), "Garage Door Opener")
            }
            XCTAssertEqual(gets(gw), before, "20 reads of a notifying characteristic asked the accessory")

            // A change from MQTT: the next reads say it once its event reached the bridge.
            try await gw.publish("\(Self.light)/brightness/set", "33")
            try await waitUntil("a read says 33", timeout: 5) {
                (try? await connection.readCharacteristics([brightness])[brightness]?.get()) == 33
            }
            // A write: read back at once, on this session and from no other source.
            _ = try await connection.writeCharacteristics([brightness: ["value": 47]])
            let written = try await connection.readCharacteristics([brightness])
            XCTAssertEqual(try written[brightness]?.get(), 47)
            XCTAssertEqual(gets(gw), before)

            // A characteristic that cannot notify is read from its accessory, through the gateway.
            let tree = await gw.gateway.tree
            let polled = tree.accessories.lazy.filter(\.accessory.isReachable).flatMap(\.services)
                .flatMap(\.characteristics).first {
                    let permissions = $0.characteristic.metadata.permissions
                    return permissions.contains(.read) && !permissions.contains(.notify) && !$0.isEvent
                }
            let node = try XCTUnwrap(polled, "the simulated home has a readable characteristic that cannot notify")
            let polledID = try await ids.hapID(gw, topic: node.topic)
            _ = try await connection.readCharacteristics([polledID])
            XCTAssertEqual(gets(gw), before + 1, "\(node.topic) was not read from its accessory")

            // Unreachable: reads go to the gateway, which answers -70402.
            await gw.home.setReachable(Self.garage, false)
            try await waitUntil("a read answers -70402", timeout: 5) {
                let read = try? await connection.readCharacteristics([brightness])
                return read?[brightness]?.error?.status == .communicationFailure
            }
            await gw.home.setReachable(Self.garage, true)
            try await waitUntil("a read says 47 again", timeout: 5) {
                (try? await connection.readCharacteristics([brightness])[brightness]?.get()) == 47
            }
            await connection.close()
        }
    }
}
