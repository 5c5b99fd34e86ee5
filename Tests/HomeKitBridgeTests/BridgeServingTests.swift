import Foundation
import Gateway
import HAP
import HomeKitBridge
import HomeKitBridgeTestSupport
import HomeMQTTApp
import HomeModel
import Logging
import TestSupport
import XCTest

/// The gateway's home as a HomeKit bridge, paired and driven by the gateway's own HAP
/// controller (`Sources/HAP`) over loopback, on the memory broker: the tree, reads, writes, events
/// both ways, -70402, identify, the writer's echo, the garage door. aiohomekit does the same in
/// `EndToEndTests/HomeKitBridgeAiohomekitTests`.
final class BridgeServingTests: XCTestCase {
    static let garage = "sim:garage"
    static let light = "home/garage/garage-door-opener/garage-light"
    static let door = "home/garage/garage-door-opener/garage-door"

    func testTheBridgeServesEveryAccessoryOfTheTreeAsTheTreeHasIt() async throws {
        let state = try TemporaryDirectory(prefix: "homekit-tree")
        try await BridgedGateway.run(state: state) { gw in
            let (_, connection) = try await Controller.pair(gw, state: state)
            let document = try await connection.accessoriesJSON()
            let accessories = try XCTUnwrap(document["accessories"]?.arrayValue)
            let tree = await gw.gateway.tree
            // Every accessory with something to control (a bridge of the simulated home, with
            // nothing in scope beside its information, is not one).
            let served = tree.accessories.filter { node in
                node.services.contains { $0.service.isUserInteractive && !$0.characteristics.isEmpty }
            }
            XCTAssertEqual(served.count, tree.accessories.count - 1)
            XCTAssertEqual(accessories.count, served.count + 1, "the bridge and every accessory")
            // The bridge: Accessory Information and Protocol Information.
            let bridge = try XCTUnwrap(accessories.first { $0["aid"] == 1 })
            XCTAssertEqual(bridge["services"]?.arrayValue?.compactMap { $0["type"]?.stringValue }, ["3E", "A2"])

            let ids = try IDsFile(state: state)
            var compared = 0
            for node in served {
                let aid = try XCTUnwrap(ids.aid(node.id), node.id)
                let hap = try XCTUnwrap(accessories.first { $0["aid"]?.intValue == aid }, node.id)
                let services = hap["services"]?.arrayValue ?? []
                // iid 1: the information service, named as the home names the accessory.
                let info = try XCTUnwrap(services.first { $0["iid"] == 1 })
                XCTAssertEqual(info["type"], "3E")
                let name = info["characteristics"]?.arrayValue?.first { $0["type"] == "23" }
                XCTAssertEqual(name?["value"]?.stringValue, node.displayName)
                for service in node.services where service.service.isUserInteractive {
                    let serviceKey = "s\(service.iid):\(service.service.type)"
                    let siid = try XCTUnwrap(ids.iid(node.id, serviceKey), serviceKey)
                    let hapService = try XCTUnwrap(services.first { $0["iid"]?.intValue == siid })
                    XCTAssertEqual(
                        hapService["type"]?.stringValue,
                        StandardUUID.shortForm(service.service.type) ?? service.service.type)
                    for c in service.characteristics {
                        let key = "\(serviceKey)/c\(c.address.iid):\(c.characteristic.type)"
                        let iid = try XCTUnwrap(ids.iid(node.id, key), key)
                        let hapC = try XCTUnwrap(
                            hapService["characteristics"]?.arrayValue?.first { $0["iid"]?.intValue == iid }, key)
                        let m = c.characteristic.metadata
                        XCTAssertEqual(hapC["format"]?.stringValue, m.format.rawValue, key)
                        XCTAssertEqual(hapC["unit"]?.stringValue, m.unit, key)
                        XCTAssertEqual(hapC["minValue"]?.doubleValue, m.minValue, key)
                        XCTAssertEqual(hapC["maxValue"]?.doubleValue, m.maxValue, key)
                        XCTAssertEqual(hapC["minStep"]?.doubleValue, m.minStep, key)
                        XCTAssertEqual(
                            Set(hapC["perms"]?.arrayValue?.compactMap(\.stringValue) ?? []),
                            Set(m.permissions.codeList.map { $0 == "ev" ? "ev" : $0 }), key)
                        compared += 1
                    }
                }
            }
            XCTAssertGreaterThan(compared, 30)
            await connection.close()
        }
    }

    func testReadsWritesAndEventsGoThroughTheGateway() async throws {
        let state = try TemporaryDirectory(prefix: "homekit-rw")
        try await BridgedGateway.run(state: state) { gw in
            let (pairing, writer) = try await Controller.pair(gw, state: state)
            let ids = try IDsFile(state: state)
            let brightness = try await ids.hapID(gw, topic: "\(Self.light)/brightness")
            let power = try await ids.hapID(gw, topic: "\(Self.light)/power-state")

            // A read is the accessory's value.
            let read = try await writer.readCharacteristics([brightness])
            XCTAssertEqual(try read[brightness]?.get(), 80)

            // A write reaches MQTT's `state`.
            let failures = try await writer.writeCharacteristics([brightness: ["value": 40]])
            XCTAssertEqual(failures.count, 0)
            try await gw.seen.waitFor("brightness 40 on MQTT", timeout: 5) {
                $0.topic == "\(Self.light)/brightness/state" && $0.string == "40"
            }

            // An MQTT `set` reaches a subscribed controller as an event.
            let listener = try await Controller.connect(pairing, gw)
            let heard = StreamCollector(listener.events)
            _ = try await listener.writeCharacteristics([power: ["ev": true], brightness: ["ev": true]])
            _ = try await writer.writeCharacteristics([brightness: ["ev": true]])
            let writerHeard = StreamCollector(writer.events)
            try await gw.publish("\(Self.light)/power-state/set", "true")
            try await heard.waitFor("the power-state event", timeout: 5) { message in
                HAPConnection.eventValues(message).contains { $0.0 == power && $0.1 == true }
            }

            // The writer's own write is not sent back to it; the other session hears it.
            _ = try await writer.writeCharacteristics([brightness: ["value": 55]])
            try await heard.waitFor("the other session hears 55", timeout: 5) { message in
                HAPConnection.eventValues(message).contains { $0.0 == brightness && $0.1 == 55 }
            }
            // A round trip on the writer's session: an event sent to it would have come first.
            _ = try await writer.readCharacteristics([brightness])
            XCTAssertFalse(
                writerHeard.elements.contains { HAPConnection.eventValues($0).contains { $0.0 == brightness } },
                "the writer heard its own write")
            // A change from elsewhere reaches the writer too.
            try await gw.publish("\(Self.light)/brightness/set", "25")
            try await writerHeard.waitFor("the writer hears 25", timeout: 5) { message in
                HAPConnection.eventValues(message).contains { $0.0 == brightness && $0.1 == 25 }
            }

            // A value out of range is HAP's invalid value.
            let invalid = try await writer.writeCharacteristics([brightness: ["value": 101]])
            XCTAssertEqual(invalid[brightness]?.status, .invalidValue)

            // Unreachable: -70402 for a read and a write.
            await gw.home.setReachable(Self.garage, false)
            // The bridge knows once the gateway's view tells it (its reads of current values are
            // answered from that view: `BridgeReadCacheTests`).
            try await waitUntil("a read answers -70402", timeout: 5) {
                let read = try? await writer.readCharacteristics([brightness])
                return read?[brightness]?.error?.status == .communicationFailure
            }
            let known = await gw.gateway.tree.accessory(id: Self.garage)?.accessory.isReachable
            XCTAssertEqual(known, false, "the bridge answered -70402 before the gateway knew")
            let unwritable = try await writer.writeCharacteristics([brightness: ["value": 30]])
            XCTAssertEqual(unwritable[brightness]?.status, .communicationFailure)
            await gw.home.setReachable(Self.garage, true)

            // Identify: the accessory's own.
            let identify = try ids.informationID(Self.garage, type: "14")
            try await waitUntil("reachable again", timeout: 5) {
                await gw.gateway.tree.accessory(id: Self.garage)?.accessory.isReachable == true
            }
            let identified = try await writer.writeCharacteristics([identify: ["value": true]])
            XCTAssertEqual(identified.count, 0)
            let requests = await gw.home.identifyRequests()
            XCTAssertEqual(requests, [Self.garage])
            await writer.close()
            await listener.close()
        }
    }

    /// The Kilgo garage door opens: `current-door-state` goes closed (1) → opening (2) → open (0)
    /// as simulated time passes.
    func testTheGarageDoorOpensWithEvents() async throws {
        let state = try TemporaryDirectory(prefix: "homekit-door")
        try await BridgedGateway.run(state: state) { gw in
            let (_, connection) = try await Controller.pair(gw, state: state)
            let ids = try IDsFile(state: state)
            let current = try await ids.hapID(gw, topic: "\(Self.door)/current-door-state")
            let target = try await ids.hapID(gw, topic: "\(Self.door)/target-door-state")
            let closed = try await connection.readCharacteristics([current])
            XCTAssertEqual(try closed[current]?.get(), 1)
            let events = StreamCollector(connection.events)
            _ = try await connection.writeCharacteristics([current: ["ev": true]])
            _ = try await connection.writeCharacteristics([target: ["value": 0]])
            try await events.waitFor("opening", timeout: 5) {
                HAPConnection.eventValues($0).contains { $0.0 == current }
            }
            await gw.home.advance(by: 12)
            try await events.waitFor(count: 2, "two door events", timeout: 5) {
                HAPConnection.eventValues($0).contains { $0.0 == current }
            }
            let seen = events.elements.flatMap(HAPConnection.eventValues).filter { $0.0 == current }.map(\.1)
            XCTAssertEqual(seen, [2, 0])
            await connection.close()
        }
    }
}
