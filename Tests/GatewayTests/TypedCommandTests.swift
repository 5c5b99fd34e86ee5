import Foundation
import Gateway
import HomeModel
import TestSupport
import XCTest

/// The core's typed API, as Homie, the web view and the coming HomeKit bridge call it: commands
/// by address with typed values, typed answers or a failure with its HAP status, and what a
/// client of the broker sees of each (the `state` a write leaves). On the memory rig.
final class TypedCommandTests: XCTestCase {
    let light = "home/garage/garage-door-opener/garage-light"

    func node(_ gw: InProcessGateway, _ topic: String) async throws -> TopicTree.CharacteristicNode {
        let tree = await gw.gateway.tree
        return try XCTUnwrap(tree.characteristic(topic: topic), topic)
    }

    func testAWriteIsAnsweredWithItsValueAndItsStateIsPublished() async throws {
        try await InProcessGateway.run { gw in
            let brightness = try await node(gw, "\(light)/brightness")
            gw.seen.clear()
            let outcome = await gw.gateway.perform(.write(brightness.address, .int(40)))
            XCTAssertEqual(try outcome.get(), .value(.int(40)))
            let state = try await gw.next("\(light)/brightness/state", timeout: 5)
            XCTAssertEqual(state.string, "40")
            let read = await gw.gateway.perform(.read(brightness.address))
            XCTAssertEqual(try read.get(), .value(.int(40)))
            // No `result` is published for a typed caller: the answer is its own.
            XCTAssertFalse(gw.seen.elements.contains { $0.topic.hasSuffix("/result") })
        }
    }

    func testRefusalsAreTypedFailuresWithTheirCodes() async throws {
        try await InProcessGateway.run { gw in
            let brightness = try await node(gw, "\(light)/brightness")
            let tooBright = await gw.gateway.perform(.write(brightness.address, .int(1_000)))
            XCTAssertEqual(tooBright.failure?.code, .outOfRange, "\(tooBright)")
            let nowhere = CharacteristicAddress(accessoryID: "no-such-accessory", iid: 9)
            let gone = await gw.gateway.perform(.write(nowhere, .bool(true)))
            XCTAssertEqual(gone.failure?.code, .unknownTopic, "\(gone)")
            let name = try await node(gw, "\(light)/name")
            let readOnly = await gw.gateway.perform(.write(name.address, .string("x")))
            XCTAssertEqual(readOnly.failure?.code, .readOnly, "\(readOnly)")
        }
    }

    func testAToggleFlipsThePrimaryControl() async throws {
        try await InProcessGateway.run { gw in
            let power = try await node(gw, "\(light)/power-state")
            let before = await gw.gateway.value(of: power.address)
            let tree = await gw.gateway.tree
            let service = try XCTUnwrap(tree.service(topic: light))
            let outcome = await gw.gateway.perform(
                .toggle(accessoryID: service.0.id, serviceIID: service.1.service.iid))
            let flipped: CharacteristicValue = before == .bool(true) ? .bool(false) : .bool(true)
            XCTAssertEqual(try outcome.get(), .value(flipped))
        }
    }

    /// Each part of a `writeMany` has its own answer; a bad part fails alone.
    func testAWriteOfSeveralAnswersEachPart() async throws {
        try await InProcessGateway.run { gw in
            let brightness = try await node(gw, "\(light)/brightness")
            let hue = try await node(gw, "\(light)/hue")
            let outcome = await gw.gateway.perform(
                .writeMany(
                    accessoryID: brightness.address.accessoryID,
                    [
                        .init(
                            service: "garage-light", characteristic: "brightness", address: brightness.address,
                            value: .success(.int(30))),
                        .init(
                            service: "garage-light", characteristic: "hue", address: hue.address,
                            value: .success(.float(400))),
                    ]))
            guard case .parts(let parts) = try outcome.get() else { return XCTFail("\(outcome)") }
            XCTAssertEqual(parts.map(\.characteristic), ["brightness", "hue"])
            XCTAssertEqual(try parts[0].outcome.get(), .int(30))
            XCTAssertEqual(parts[1].outcome.failure?.code, .outOfRange, "\(parts[1])")
        }
    }

    func testAnOperationAnswersItsData() async throws {
        try await InProcessGateway.run { gw in
            let outcome = await gw.gateway.perform(.manage(Health()))
            guard case .data(let data) = try outcome.get() else { return XCTFail("\(outcome)") }
            XCTAssertNotNil(data["counts"], "\(data)")
            let refused = await gw.gateway.perform(.manage(RoomRename(room: "No Such Room", name: "x")))
            XCTAssertEqual(refused.failure?.code, .unknownRoom, "\(refused)")
        }
    }

    /// An accessory that does not answer: `timeout` with HAP's status, from the one watchdog.
    func testASlowAccessoryTimesOutWithItsHAPStatus() async throws {
        try await InProcessGateway.run { gw in
            let power = try await node(gw, "\(light)/power-state")
            await gw.home.setWriteDelay(.seconds(5))
            let outcome = await gw.gateway.perform(.write(power.address, .bool(true)))
            XCTAssertEqual(outcome.failure?.code, .timeout, "\(outcome)")
            XCTAssertEqual(outcome.failure?.hapStatus, AccessoryError.Status.timedOut.rawValue)
            await gw.home.setWriteDelay(.zero)
        }
    }
}
