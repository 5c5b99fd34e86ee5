import Foundation
import Gateway
import HomeModel
import TestSupport
import XCTest

@testable import homemqtt

/// An operation's declared access is enforced where it is declared: every operation that
/// declares the list of homes is refused on a home other than the one on the gateway's base
/// topic, by the dispatcher, before it changes anything.
final class OperationAccessTests: XCTestCase {
    func testEveryHomesListOperationIsRefusedWhereTheListOfHomesIsNotManaged() async throws {
        let state = try TemporaryDirectory(prefix: "homemqtt-access")
        let config = GatewayConfig(file: "test.yml", directory: state.path)
        let database = try HomeDatabase(directory: state.url)
        let home = await database.home
        let offline = OfflineHome(
            config: config, database: database, home: home,
            tree: TopicTree(
                base: config.baseTopic, accessories: [], home: home,
                scope: try ScopeFilter(config.scope, file: config.file)),
            scopeStore: ScopeStore(directory: state.url), scope: config.scope)
        let fields: [String: [String: JSONValue]] = [
            "home/add": ["name": "Cabin"], "home/rename": ["home": "Cabin", "name": "Hut"],
            "home/remove": ["home": "Cabin"], "home/primary": ["home": "Cabin"],
            "home/base-topic": ["home": "Cabin", "base-topic": "hut"],
            "accessory/home": ["accessory": "Lamp", "home": "Cabin"],
            "source/home": ["prefix": "sim:lamp.json", "home": "Cabin"],
        ]
        let declared = ManagementOperations.core.filter { $0.access == .homeList }.map { $0.name }
        XCTAssertEqual(Set(declared), Set(fields.keys))
        let elsewhere = AnotherHome(base: offline)
        for name in declared {
            do {
                _ = try await ManagementOperations.perform(
                    name, fields: fields[name] ?? [:], among: ManagementOperations.core, on: elsewhere)
                XCTFail("\(name) was performed on another home")
            } catch {
                XCTAssertEqual(error.code, .insufficientPrivileges, "\(name): \(error.message)")
                XCTAssertEqual(
                    error.message, "\(name) changes the list of homes: send it to home/$gateway/request/\(name)")
            }
        }
        let homes = await database.homes
        XCTAssertEqual(homes.count, 1, "nothing was added")
        // The same request on the base home's editor is performed.
        let added = try await ManagementOperations.perform(
            "home/add", fields: ["name": "Cabin"], among: ManagementOperations.core, on: offline)
        XCTAssertEqual(added["name"], "Cabin")
    }
}

/// The editor of a home other than the one on the gateway's base topic: all as `base`, but the
/// list of homes is not managed here.
struct AnotherHome: HomeEditor {
    let base: OfflineHome

    var database: HomeDatabase { base.database }
    var gatewayBase: String { base.gatewayBase }
    var reservedTopics: [String] { base.reservedTopics }
    var managesHomes: Bool { false }
    var running: (any RunningGateway)? { nil }
    var pairings: [any PairingManager] { [] }
    var scope: ScopeConfig { base.scope }

    func room(named key: String) throws(GatewayFailure) -> Room { try base.room(named: key) }
    func accessory(named key: String) throws(GatewayFailure) -> NamedAccessory { try base.accessory(named: key) }
    func sourceAccessories() -> [Accessory] { base.sourceAccessories() }
    func homeChanged() {}
    func changeRefused(_ error: ModelError) {}
    func remove(_ accessory: TopicTree.AccessoryNode) async throws(GatewayFailure) { try await base.remove(accessory) }
    func replaceScope(_ scope: ScopeConfig, filter: ScopeFilter) throws(GatewayFailure) {
        try base.replaceScope(scope, filter: filter)
    }
}
