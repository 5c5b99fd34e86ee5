import Foundation
import Gateway
import HAPServer
import HomeKitBridge
import HomeKitBridgeTestSupport
import HomeModel
import TestSupport
import XCTest

/// The gateway's home as a HomeKit bridge against an independent controller: aiohomekit 4.0.1
/// (`aiohomekit_bridge_controller.py`, as `HAPBridgeServerTests` drives it) pairs with the
/// running gateway's bridge at 127.0.0.1 and its port, lists, reads and writes the simulated
/// home, hears MQTT's changes, opens the Kilgo garage door, and finds everything where it was
/// after a restart.
final class HomeKitBridgeAiohomekitTests: XCTestCase {
    typealias AioHomeKit = HAPBridgeServerTests.AioHomeKit
    static let light = "home/garage/garage-door-opener/garage-light"
    static let door = "home/garage/garage-door-opener/garage-door"

    func requirePeer() throws {
        if let reason = HAPPeer.unavailableReason {
            if HAPPeer.isRequired { throw ProcessError("\(reason) (CI=true: the HAP tests must run)") }
            throw XCTSkip(reason)
        }
    }

    static func id(_ address: (aid: Int, iid: Int)) -> JSONValue {
        [.int(Int64(address.aid)), .int(Int64(address.iid))]
    }
    static func key(_ address: (aid: Int, iid: Int)) -> String { "\(address.aid).\(address.iid)" }

    /// Every aid with its services' and characteristics' iids and types, as aiohomekit lists them.
    static func shape(_ accessories: [JSONValue]) -> [String] {
        accessories.flatMap { accessory in
            (accessory["services"]?.arrayValue ?? []).flatMap { service in
                (service["characteristics"]?.arrayValue ?? []).map { c in
                    "\(accessory["aid"]?.intValue ?? 0).\(service["iid"]?.intValue ?? 0).\(c["iid"]?.intValue ?? 0) \(c["type"]?.stringValue ?? "")"
                }
            }
        }.sorted()
    }

    func testAiohomekitPairsWithTheGatewayAndControlsTheHome() async throws {
        try requirePeer()
        let state = try TemporaryDirectory(prefix: "homekit-aiohomekit")
        let aio = try await AioHomeKit()
        addTeardownBlock { await aio.stop() }
        let pairingFile = state.file("aiohomekit-pairing.json")
        var shapeBefore: [String] = []
        try await BridgedGateway.run(state: state) { gw in
            // Unpaired, any controller may ask the bridge to identify itself (`POST /identify`).
            let address: [String: JSONValue] = ["host": "127.0.0.1", "port": .int(Int64(gw.port))]
            let unpaired = try await aio.ok("identify_unpaired", address)
            XCTAssertEqual(unpaired["identified"], true, "\(unpaired)")
            XCTAssertTrue(gw.logs.lines.contains { $0.contains("identify (unpaired)") }, "\(gw.logs.lines)")
            let paired = try await aio.ok(
                "pair",
                [
                    "host": "127.0.0.1", "port": .int(Int64(gw.port)), "pin": .string(BridgedGateway.code),
                    "file": .string(pairingFile),
                ])
            let status = await gw.bridge.status()
            XCTAssertEqual(paired["accessory"]?.stringValue, status.pairingID)
            XCTAssertEqual(status.isPaired, true)

            // Every accessory in scope, with the tree's types, formats, units and ranges.
            _ = try await aio.ok("open", ["name": "a", "file": .string(pairingFile)])
            let document = try await aio.ok("accessories", ["name": "a"])
            let listed = try XCTUnwrap(document["accessories"]?.arrayValue)
            let tree = await gw.gateway.tree
            let served = tree.accessories.filter { node in
                node.services.contains { $0.service.isUserInteractive && !$0.characteristics.isEmpty }
            }
            XCTAssertEqual(listed.count, served.count + 1, "the bridge and every accessory with something to control")
            shapeBefore = Self.shape(listed)
            func characteristic(_ address: (aid: Int, iid: Int)) -> JSONValue? {
                listed.first { $0["aid"]?.intValue == address.aid }?["services"]?.arrayValue?.lazy.compactMap {
                    $0["characteristics"]?.arrayValue?.first { $0["iid"]?.intValue == address.iid }
                }.first
            }
            let brightness = try await gw.address(topic: "\(Self.light)/brightness")
            let description = try XCTUnwrap(characteristic(brightness))
            XCTAssertEqual(description["type"], "00000008-0000-1000-8000-0026BB765291")
            XCTAssertEqual(description["format"], "int")
            XCTAssertEqual(description["unit"], "percentage")
            XCTAssertEqual(description["minValue"], 0)
            XCTAssertEqual(description["maxValue"], 100)
            XCTAssertEqual(description["minStep"], 1)
            let fadeRate = try await gw.address(topic: "\(Self.light)/fade-rate")
            let fade = try XCTUnwrap(characteristic(fadeRate))
            XCTAssertEqual(fade["type"], "7E536242-341C-4862-BE90-272CE15BD633")
            XCTAssertEqual(fade["format"], "float")
            XCTAssertEqual(fade["unit"], "seconds")
            XCTAssertEqual(fade["maxValue"]?.doubleValue, 10)
            XCTAssertEqual(fade["minStep"], 0.5)

            // A read, and a write that MQTT's `state` shows.
            let read = try await aio.ok("get", ["name": "a", "ids": [Self.id(brightness)]])
            XCTAssertEqual(read["values"]?[Self.key(brightness)]?["value"], 80)
            _ = try await aio.ok(
                "put", ["name": "a", "values": [[.int(Int64(brightness.aid)), .int(Int64(brightness.iid)), 40]]])
            try await gw.seen.waitFor("brightness 40 on MQTT", timeout: 10) {
                $0.topic == "\(Self.light)/brightness/state" && $0.string == "40"
            }

            // An MQTT `set` reaches aiohomekit as an event.
            let power = try await gw.address(topic: "\(Self.light)/power-state")
            _ = try await aio.ok("subscribe", ["name": "a", "ids": [Self.id(power)]])
            try await gw.publish("\(Self.light)/power-state/set", "true")
            let heard = try await aio.event("a", .init(aid: power.aid, iid: power.iid))
            XCTAssertEqual(heard["value"], true)

            // The Kilgo garage door opens: current-door-state 1 (closed) → 2 (opening) → 0 (open).
            let current = try await gw.address(topic: "\(Self.door)/current-door-state")
            let target = try await gw.address(topic: "\(Self.door)/target-door-state")
            let closed = try await aio.ok("get", ["name": "a", "ids": [Self.id(current)]])
            XCTAssertEqual(closed["values"]?[Self.key(current)]?["value"], 1)
            _ = try await aio.ok("subscribe", ["name": "a", "ids": [Self.id(current)]])
            _ = try await aio.ok(
                "put", ["name": "a", "values": [[.int(Int64(target.aid)), .int(Int64(target.iid)), 0]]])
            let opening = try await aio.event("a", .init(aid: current.aid, iid: current.iid))
            XCTAssertEqual(opening["value"], 2)
            await gw.home.advance(by: 12)
            let open = try await aio.event("a", .init(aid: current.aid, iid: current.iid))
            XCTAssertEqual(open["value"], 0)

            // Paired, `/identify` is refused (HTTP 400, -70401 in its body); a paired controller identifies the bridge
            // through its identify characteristic, and a bridged accessory through its own.
            let refused = try await aio.ok("identify_unpaired", address)
            XCTAssertEqual(refused["identified"], false, "\(refused)")
            XCTAssertTrue(refused["error"]?.stringValue?.contains("400") == true, "\(refused)")
            let bridgeIdentified = try await aio.ok("identify", ["name": "a"])
            XCTAssertEqual(bridgeIdentified["identified"], true)
            XCTAssertTrue(
                gw.logs.lines.contains { $0.contains(": identify ") && $0.contains("controller=") }, "\(gw.logs.lines)")
            let garageIdentify = try XCTUnwrap(Self.identifyIID(listed, aid: current.aid))
            let identified = try await aio.ok(
                "put", ["name": "a", "values": [[.int(Int64(current.aid)), .int(Int64(garageIdentify)), true]]])
            XCTAssertEqual(identified["statuses"], [:])
            let identifyRequests = await gw.home.identifyRequests()
            XCTAssertEqual(identifyRequests, ["sim:garage"])

            // A timed write (`/prepare`, then the write with its `pid`) reaches MQTT's `state`.
            let timed = try await aio.ok(
                "timed",
                [
                    "name": "a", "aid": .int(Int64(brightness.aid)), "iid": .int(Int64(brightness.iid)), "value": 55,
                    "pid": 7,
                ])
            XCTAssertEqual(timed["prepare"]?["status"], 0, "\(timed)")
            try await gw.seen.waitFor("the timed write's brightness on MQTT", timeout: 10) {
                $0.topic == "\(Self.light)/brightness/state" && $0.string == "55"
            }

            // An unreachable accessory: -70402.
            await gw.home.setReachable("sim:garage", false)
            try await waitUntil("the gateway to know", timeout: 10) {
                await gw.gateway.tree.accessory(id: "sim:garage")?.accessory.isReachable == false
            }
            // The bridge's view follows the gateway's by one hop (its change stream): the read is
            // -70402 once the view has the change, well within the wait.
            try await waitUntil("aiohomekit's read to answer -70402", timeout: 10) {
                let unreachable = try await aio.ok("get", ["name": "a", "ids": [Self.id(brightness)]])
                return unreachable["values"]?[Self.key(brightness)]?["status"] == -70402
            }
            await gw.home.setReachable("sim:garage", true)

            // An accessory added: c# rises, aiohomekit lists it; removed: c# rises again.
            let before = try XCTUnwrap(status.configurationNumber)
            await gw.home.add(Self.lamp)
            try await waitUntil("c# to rise", timeout: 10) {
                await gw.bridge.status().configurationNumber ?? 0 > before
            }
            let lampDocument = try await aio.ok("accessories", ["name": "a"])
            let withLamp = try XCTUnwrap(lampDocument["accessories"]?.arrayValue)
            XCTAssertEqual(withLamp.count, listed.count + 1)
            let added = await gw.bridge.status().configurationNumber ?? 0
            await gw.home.remove(accessoryID: Self.lamp.id)
            try await waitUntil("c# to rise again", timeout: 10) {
                await gw.bridge.status().configurationNumber ?? 0 > added
            }
            _ = try await aio.ok("close", ["name": "a"])
        }

        // A restart keeps the pairing, every aid and every iid.
        try await BridgedGateway.run(state: state) { gw in
            var data = try JSONValue(parsing: Array(try Data(contentsOf: URL(fileURLWithPath: pairingFile))))
            if case .object(var fields) = data {
                fields["AccessoryPort"] = .int(Int64(gw.port))
                data = .object(fields)
            }
            try Data(data.encoded().utf8).write(to: URL(fileURLWithPath: pairingFile))
            _ = try await aio.ok("open", ["name": "again", "file": .string(pairingFile)])
            let document = try await aio.ok("accessories", ["name": "again"])
            let listed = try XCTUnwrap(document["accessories"]?.arrayValue)
            XCTAssertEqual(Self.shape(listed), shapeBefore)
            let brightness = try await gw.address(topic: "\(Self.light)/brightness")
            let read = try await aio.ok("get", ["name": "again", "ids": [Self.id(brightness)]])
            XCTAssertEqual(read["values"]?[Self.key(brightness)]?["value"], 80)
            _ = try await aio.ok("close", ["name": "again"])
        }
    }

    /// The garage door opener served standalone (`homekit: standalone`): aiohomekit pairs with
    /// its own code on its own port, finds it at aid 1 with category 4 in the setup URI, and
    /// opens it: current-door-state events 1 → 2 → 0.
    func testAiohomekitPairsWithTheStandaloneGarageDoorAndOpensIt() async throws {
        try requirePeer()
        let state = try TemporaryDirectory(prefix: "homekit-aiohomekit-standalone")
        let aio = try await AioHomeKit()
        addTeardownBlock { await aio.stop() }
        let pairingFile = state.file("aiohomekit-standalone.json")
        let home = try BridgedGateway.standaloneGarageHome(in: state)
        try await BridgedGateway.run(state: state, home: home) { gw in
            let (service, port) = try await gw.standalone("sim:garage")
            let setup = try XCTUnwrap(service.setup)
            // The bridge's code is not the accessory's.
            let wrong = try await aio.send(
                "pair",
                [
                    "host": "127.0.0.1", "port": .int(Int64(port)), "pin": .string(BridgedGateway.code),
                    "file": .string(state.file("wrong.json")),
                ])
            XCTAssertEqual(wrong["ok"], false)
            let paired = try await aio.ok(
                "pair",
                [
                    "host": "127.0.0.1", "port": .int(Int64(port)), "pin": .string(setup.code),
                    "file": .string(pairingFile),
                ])
            let status = await service.status()
            XCTAssertEqual(paired["accessory"]?.stringValue, status.pairingID)
            let bridgeID = await gw.bridge.status().pairingID
            XCTAssertNotEqual(status.pairingID, bridgeID)
            _ = try await aio.ok("open", ["name": "door", "file": .string(pairingFile)])
            let document = try await aio.ok("accessories", ["name": "door"])
            let listed = try XCTUnwrap(document["accessories"]?.arrayValue)
            XCTAssertEqual(listed.compactMap { $0["aid"]?.intValue }, [1])
            func address(_ type: String) throws -> (aid: Int, iid: Int) {
                let uuid = "000000\(type)-0000-1000-8000-0026BB765291"
                let c = listed[0]["services"]?.arrayValue?.lazy.compactMap {
                    $0["characteristics"]?.arrayValue?.first { $0["type"]?.stringValue == uuid }
                }.first
                return (1, try XCTUnwrap(c?["iid"]?.intValue, type))
            }
            let current = try address("0E")
            let target = try address("32")
            let closed = try await aio.ok("get", ["name": "door", "ids": [Self.id(current)]])
            XCTAssertEqual(closed["values"]?[Self.key(current)]?["value"], 1)
            _ = try await aio.ok("subscribe", ["name": "door", "ids": [Self.id(current)]])
            _ = try await aio.ok("put", ["name": "door", "values": [[1, .int(Int64(target.iid)), 0]]])
            let opening = try await aio.event("door", .init(aid: current.aid, iid: current.iid))
            XCTAssertEqual(opening["value"], 2)
            await gw.home.advance(by: 12)
            let open = try await aio.event("door", .init(aid: current.aid, iid: current.iid))
            XCTAssertEqual(open["value"], 0)
            _ = try await aio.ok("close", ["name": "door"])
        }
    }

    /// The iid of the identify characteristic (type 14) of accessory `aid`, as aiohomekit lists it.
    static func identifyIID(_ accessories: [JSONValue], aid: Int) -> Int? {
        let identify = "00000014-0000-1000-8000-0026BB765291"
        let accessory = accessories.first { $0["aid"]?.intValue == aid }
        return (accessory?["services"]?.arrayValue ?? []).lazy.compactMap { service in
            service["characteristics"]?.arrayValue?.first { $0["type"]?.stringValue == identify }?["iid"]?.intValue
        }.first
    }

    static let lamp: Accessory = {
        let on = Catalog.characteristicType(named: "power-state")!
        return Accessory(
            id: "sim:aio-lamp", name: "Aio Lamp", manufacturer: "Test", model: "L1", serialNumber: "T1",
            firmwareRevision: "1.0",
            services: [
                AccessoryService(
                    iid: 9, type: Catalog.serviceType(named: "lightbulb")!.uuid,
                    characteristics: [
                        Characteristic(iid: 10, type: on.uuid, value: .bool(false), metadata: on.metadata)
                    ])
            ])
    }()
}
