import Foundation
import HomeModel
import MQTT
import TestSupport
import XCTest

/// A button's press is an event: each press comes on `state` once, not retained, and two
/// presses of the same kind are two messages.
final class ButtonEventTests: RigTestCase {
    func testEachPressIsOneMessageNeverRetained() async throws {
        await onEveryRig { gw in
            let press = try XCTUnwrap(Catalog.characteristicType(named: "input-event"))
            let switchType = try XCTUnwrap(Catalog.serviceType(named: "stateless-programmable-switch"))
            let button = Accessory(
                id: "sim:hue-dimmer", name: "Hue Dimmer", manufacturer: "Signify", model: "RWL021", serialNumber: "D1",
                firmwareRevision: "1.0",
                services: [
                    AccessoryService(
                        iid: 9, type: switchType.uuid, name: "On button",
                        characteristics: [
                            Characteristic(iid: 10, type: press.uuid, value: nil, metadata: press.metadata)
                        ])
                ],
                suggestedRoom: "Hallway")
            await gw.home.add(button)
            let topic = "home/hallway/hue-dimmer/on-button/input-event/state"
            try await gw.next("home/hallway/hue-dimmer/on-button/input-event/meta", timeout: 10)
            let address = CharacteristicAddress(accessoryID: button.id, iid: 10)
            try await waitUntil("notifications on for the button") {
                await gw.home.notificationsEnabled().contains(address)
            }

            gw.seen.clear()
            for value: Int64 in [0, 0, 2] {
                try await gw.home.setValue(address, .int(value))
            }
            try await waitUntil("three presses on \(topic)") {
                gw.seen.elements.filter { $0.topic == topic }.count >= 3
            }
            try await Task.sleep(for: .milliseconds(300))
            let presses = gw.seen.elements.filter { $0.topic == topic }
            print(
                "figure: 3 presses (single, single, long) gave \(presses.count) messages on \(topic): \(presses.map(\.string))"
            )
            XCTAssertEqual(presses.map(\.string), ["0", "0", "2"], "one message per press, the same press twice too")
            XCTAssertTrue(presses.allSatisfy { !$0.retain }, "a press is not retained")
            let retained = try await gw.retained("home/hallway/hue-dimmer/#")
            XCTAssertNil(retained[topic], "a later subscriber sees no old press")
            XCTAssertNotNil(retained["home/hallway/hue-dimmer/on-button/input-event/meta"])

            // The accessory described again (renamed) carries its last press: that is no new press.
            gw.seen.clear()
            _ = await gw.home.rename(accessoryID: button.id, to: "Hall Dimmer")
            try await gw.next("home/hallway/hall-dimmer/on-button/input-event/meta", timeout: 10)
            try await Task.sleep(for: .milliseconds(300))
            let phantom = gw.seen.elements.filter { $0.topic.hasSuffix("/input-event/state") && !$0.payload.isEmpty }
            XCTAssertEqual(phantom.map(\.topic), [], "a press published without a press")
        }
    }
}
