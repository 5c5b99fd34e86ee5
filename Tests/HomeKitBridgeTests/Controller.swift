import Foundation
import Gateway
import HAP
import HomeKitBridgeTestSupport
import HomeModel
import Logging
import TestSupport
import XCTest

/// The gateway's own HAP controller as a HomeKit controller of the bridge.
enum Controller {
    static var logger: Logger {
        var logger = Logger(label: "test.controller")
        logger.logLevel = .warning
        return logger
    }

    /// Pairs with the bridge (its pairing kept under `state/controller`) and opens a session.
    static func pair(_ gw: BridgedGateway, state: TemporaryDirectory, code: String = BridgedGateway.code)
        async throws -> (HAPPairing, HAPConnection)
    {
        let controller = HAPController(
            store: HAPPairingStore(directory: state.url.appendingPathComponent("controller")), logger: logger)
        let pairing = try await controller.pair(host: "127.0.0.1", port: gw.port, setupCode: code, name: "bridge")
        return (pairing, try await connect(pairing, gw))
    }

    /// Pairs with the accessory server on `port` (a standalone accessory's), its pairing kept
    /// under `state/<folder>`.
    static func pair(port: Int, code: String, state: TemporaryDirectory, folder: String) async throws
        -> (HAPPairing, HAPConnection)
    {
        let controller = HAPController(
            store: HAPPairingStore(directory: state.url.appendingPathComponent(folder)), logger: logger)
        let pairing = try await controller.pair(host: "127.0.0.1", port: port, setupCode: code, name: folder)
        return (pairing, try await connect(pairing, port: port))
    }

    /// A session with the server on `port` (which may differ from the pairing's).
    static func connect(_ pairing: HAPPairing, port: Int) async throws -> HAPConnection {
        var pairing = pairing
        pairing.port = port
        pairing.host = "127.0.0.1"
        let controller = HAPController(
            store: HAPPairingStore(directory: URL(fileURLWithPath: NSTemporaryDirectory())), logger: logger)
        return try await controller.connect(pairing)
    }

    /// A session with the bridge of `gw` (whose port may differ from the pairing's).
    static func connect(_ pairing: HAPPairing, _ gw: BridgedGateway) async throws -> HAPConnection {
        var pairing = pairing
        pairing.port = gw.port
        pairing.host = "127.0.0.1"
        let controller = HAPController(
            store: HAPPairingStore(directory: URL(fileURLWithPath: NSTemporaryDirectory())), logger: logger)
        return try await controller.connect(pairing)
    }
}

/// The bridge's `ids.json`, read as a controller cannot: which aid and iid a tree's
/// characteristic got.
struct IDsFile {
    let json: JSONValue

    init(state: TemporaryDirectory) throws {
        let root = state.url.appendingPathComponent("homekit")
        let folder = try XCTUnwrap(try FileManager.default.contentsOfDirectory(atPath: root.path).first)
        let data = try Data(contentsOf: root.appendingPathComponent(folder).appendingPathComponent("ids.json"))
        json = try JSONValue(parsing: Array(data))
    }

    func aid(_ accessoryID: String) -> Int? { json["accessories"]?[accessoryID]?["aid"]?.intValue }

    func iid(_ accessoryID: String, _ key: String) -> Int? {
        json["accessories"]?[accessoryID]?["iids"]?[key]?.intValue
    }

    /// The HAP address of the characteristic at `topic` in the gateway's tree.
    func hapID(_ gw: BridgedGateway, topic: String) async throws -> HAPCharacteristicID {
        let tree = await gw.gateway.tree
        let node = try XCTUnwrap(tree.characteristic(topic: topic), topic)
        let accessory = try XCTUnwrap(tree.accessory(id: node.address.accessoryID))
        let service = try XCTUnwrap(
            accessory.services.first { $0.characteristics.contains { $0.address == node.address } })
        let key =
            "s\(service.iid):\(service.service.type)/c\(node.address.iid):\(node.characteristic.type)"
        let aid = try XCTUnwrap(aid(node.address.accessoryID))
        let iid = try XCTUnwrap(iid(node.address.accessoryID, key), key)
        return HAPCharacteristicID(aid: UInt64(aid), iid: UInt64(iid))
    }

    /// A characteristic of the accessory's information service (`14` Identify, `23` Name).
    func informationID(_ accessoryID: String, type: String) throws -> HAPCharacteristicID {
        let aid = try XCTUnwrap(aid(accessoryID))
        let iid = try XCTUnwrap(iid(accessoryID, "information/\(type)"))
        return HAPCharacteristicID(aid: UInt64(aid), iid: UInt64(iid))
    }
}

extension Result {
    /// The error, if it failed.
    var error: Failure? {
        if case .failure(let failure) = self { failure } else { nil }
    }
}
