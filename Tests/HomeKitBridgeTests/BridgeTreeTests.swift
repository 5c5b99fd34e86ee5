import Foundation
import Gateway
@testable import HomeKitBridge
import HomeMQTTApp
import HomeModel
import HAPServer
import XCTest

/// The bridge's tree as a function of the gateway's: HAP's limit, the front end's scope, the
/// gateway's own bridges left out, ids never reused; and the `homekit:` section.
final class BridgeTreeTests: XCTestCase {
    static let identity = BridgeTree.Identity(name: "HomeMQTT Test", serialNumber: "1", firmware: "1.0.0")

    static func lamps(_ count: Int, prefix: String = "sim:lamp-") -> [Accessory] {
        (0..<count).map { n in
            let on = Catalog.characteristicType(named: "power-state")!
            return Accessory(
                id: "\(prefix)\(n)", name: "Lamp \(n)", manufacturer: n % 2 == 0 ? "Even" : "Odd",
                services: [
                    AccessoryService(
                        iid: 9, type: Catalog.serviceType(named: "lightbulb")!.uuid,
                        characteristics: [
                            Characteristic(iid: 10, type: on.uuid, value: .bool(false), metadata: on.metadata)
                        ])
                ])
        }
    }

    static func tree(_ accessories: [Accessory]) throws -> TopicTree {
        TopicTree(
            base: "home", accessories: accessories, home: Home(name: "Test"), scope: try ScopeFilter(ScopeConfig()))
    }

    func testMoreAccessoriesThanALimitLeavesOutTheNewest() throws {
        var ids = BridgeIDs()
        let all = try Self.tree(Self.lamps(160))
        let bridge = BridgeTree(
            tree: all, filter: try ScopeFilter(ScopeConfig()), ownPrefixes: [], identity: Self.identity, ids: &ids)
        XCTAssertEqual(bridge.accessories.count, HomeKitConfig.maxAccessories)
        XCTAssertEqual(bridge.leftOut.count, 160 - 149)
        // Every accessory got an aid all the same, once.
        XCTAssertEqual(Set(ids.accessories.values.map(\.aid)).count, 160)
    }

    func testScopeOwnBridgesAndIdsNeverReused() throws {
        var scope = ScopeConfig()
        scope.manufacturers = ScopeList(deny: ["odd"])
        let filter = try ScopeFilter(scope, key: "homekit.scope")
        var ids = BridgeIDs()
        let own = Self.lamps(2, prefix: "hap:AA:BB:CC:DD:EE:FF:")
        var bridge = BridgeTree(
            tree: try Self.tree(Self.lamps(4) + own), filter: filter, ownPrefixes: ["hap:AA:BB:CC:DD:EE:FF:"],
            identity: Self.identity, ids: &ids)
        XCTAssertEqual(bridge.accessories.map(\.aid), [1, 2, 3], "the bridge, lamps 0 and 2")
        let lamp2 = try XCTUnwrap(ids.accessories["sim:lamp-2"])
        // Lamp 0 leaves, a new lamp comes: it takes a new aid, and lamp 0 keeps its own.
        bridge = BridgeTree(
            tree: try Self.tree(Array(Self.lamps(6).dropFirst())), filter: filter, ownPrefixes: [],
            identity: Self.identity, ids: &ids)
        XCTAssertEqual(ids.accessories["sim:lamp-2"], lamp2)
        XCTAssertEqual(ids.accessories["sim:lamp-4"]?.aid, 4)
        XCTAssertEqual(bridge.accessories.map(\.aid), [1, 3, 4])
        // Each bridged accessory: information at iid 1, the lamp's service and characteristic after.
        let served = try XCTUnwrap(bridge.accessories.first { $0.aid == 3 })
        XCTAssertEqual(served.services.map(\.iid), [1, 8])
        XCTAssertEqual(served.services.map(\.type), ["3E", "43"])
        XCTAssertEqual(served.services[1].characteristics.map(\.iid), [9])
        XCTAssertEqual(served.services[1].characteristics.first?.permissions, [.read, .write, .events])
    }

    /// Each accessory served carries its route (`GatewayRoute`): the one it came with, this
    /// gateway's id added, in one hidden read-only string; one whose route names this gateway
    /// already is left out.
    func testEachAccessoryCarriesItsRouteAndOneThatCameBackIsLeftOut() throws {
        let lamps = Self.lamps(3)
        var cameFromB = lamps[1]
        var cameBack = lamps[2]
        func routed(_ accessory: inout Accessory, _ route: String) {
            accessory.services.append(
                AccessoryService(
                    iid: 20, type: GatewayRoute.serviceType, isHidden: true,
                    characteristics: [
                        Characteristic(
                            iid: 21, type: GatewayRoute.characteristicType, value: .string(route),
                            metadata: CharacteristicMetadata(format: .string, permissions: [.read]))
                    ]))
        }
        routed(&cameFromB, "00000000000000bb")
        routed(&cameBack, "00000000000000aa,00000000000000bb")
        var ids = BridgeIDs()
        let bridge = BridgeTree(
            tree: try Self.tree([lamps[0], cameFromB, cameBack]), filter: try ScopeFilter(ScopeConfig()),
            ownPrefixes: [], identity: Self.identity, ids: &ids, gatewayID: "00000000000000aa")
        XCTAssertEqual(bridge.accessories.map(\.aid), [1, 2, 3], "the bridge and lamps 0 and 1, not lamp 2")
        func route(_ aid: Int) -> HAPService? {
            bridge.accessories.first { $0.aid == aid }?.services.first { $0.type == GatewayRoute.serviceType }
        }
        XCTAssertEqual(route(2)?.characteristics.first?.value, "00000000000000aa")
        XCTAssertEqual(route(3)?.characteristics.first?.value, "00000000000000bb,00000000000000aa")
        let served = try XCTUnwrap(route(3))
        XCTAssertTrue(served.isHidden)
        XCTAssertEqual(served.characteristics.first?.permissions, HAPPermissions.read)
        XCTAssertEqual(served.characteristics.first?.format, .string)
        XCTAssertEqual(served.characteristics.first?.type, GatewayRoute.characteristicType)
        let types = bridge.accessories.first { $0.aid == 3 }?.services.map(\.type) ?? []
        XCTAssertEqual(types.filter { $0 == GatewayRoute.serviceType }.count, 1, "the route it came with is replaced")
        // Without a gateway id (no identity), nothing is added.
        var plain = BridgeIDs()
        let none = BridgeTree(
            tree: try Self.tree([lamps[0]]), filter: try ScopeFilter(ScopeConfig()), ownPrefixes: [],
            identity: Self.identity, ids: &plain)
        XCTAssertNil(none.accessories.last?.services.first { $0.type == GatewayRoute.serviceType })
    }

    func testAnAccessoryWithNothingInScopeIsNotServed() throws {
        var scope = ScopeConfig()
        scope.serviceTypes = ScopeList(deny: ["lightbulb"])
        var ids = BridgeIDs()
        let bridge = BridgeTree(
            tree: try Self.tree(Self.lamps(2)), filter: try ScopeFilter(scope), ownPrefixes: [],
            identity: Self.identity, ids: &ids)
        XCTAssertEqual(bridge.accessories.map(\.aid), [1])
        XCTAssertTrue(bridge.targets.keys.allSatisfy { $0.aid == 1 })
        XCTAssertEqual(ids.accessories.count, 2, "their aids are kept all the same")
    }

    func testTheHomeKitSection() throws {
        func parse(_ text: String) throws -> GatewayConfig {
            try HomeMQTTApp.parseConfig(text, file: "test.yml")
        }
        let on = try parse("homekit:\n  enabled: true\n  port: 51900\n  setup-code: 031-45-154\n")[HomeKitConfig.self]
        XCTAssertEqual(on.enabled, true)
        XCTAssertEqual(on.port, 51900)
        XCTAssertEqual(on.setupCode?.revealed, "031-45-154")
        XCTAssertFalse("\(on)".contains("031"), "the code in a description")
        XCTAssertEqual(try parse("broker:\n  url: mqtt://127.0.0.1\n")[HomeKitConfig.self].enabled, false)
        // The code given is not repeated in the message.
        XCTAssertThrowsError(try parse("homekit:\n  setup-code: 031-45-15\n")) { error in
            XCTAssertTrue("\(error)".contains("homekit.setup-code"), "\(error)")
            XCTAssertFalse("\(error)".contains("031-45-15"), "\(error)")
        }
        XCTAssertThrowsError(try parse("homekit:\n  setup-code: 111-11-111\n"))
        XCTAssertThrowsError(try parse("homekit:\n  scope:\n    service-types: { allow: [toaster] }\n")) { error in
            XCTAssertTrue("\(error)".contains("homekit.scope.service-types.allow"), "\(error)")
        }
        XCTAssertThrowsError(try parse("homekit:\n  prot: 1\n")) { error in
            XCTAssertTrue("\(error)".contains("homekit.prot"), "\(error)")
        }
        let demo = try HomeMQTTApp.parseConfig(
            "homekit:\n  enabled: false\n", file: "test.yml", environment: ["HOMEMQTT_HOMEKIT_ENABLED": "true"])
        XCTAssertEqual(demo[HomeKitConfig.self].enabled, true)
    }
}
