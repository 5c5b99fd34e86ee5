import Foundation
import Gateway
import HAP
import HomeModel
import Logging

/// The gateway's `pair`, `pairings`, `unpair` and `discover` requests over the HAP controller. The running
/// HAP source follows every change, so a new pairing's accessories get their topics at once
/// and an unpaired accessory's topics are cleared.
struct HAPPairingManager: PairingManager {
    let controller: HAPController
    let source: HAPSource

    init(source: HAPSource, logger: Logger) {
        self.source = source
        controller = HAPController(store: source.store, logger: logger)
    }

    func pair(host: String, port: Int, setupCode: String, name: String?) async throws(GatewayFailure) -> JSONValue {
        let pairing: HAPPairing
        do {
            pairing = try await controller.pair(host: host, port: port, setupCode: setupCode, name: name)
        } catch {
            throw Self.failure(error)
        }
        let accessories = await source.add(pairing: pairing)
        var data = Self.describe(pairing)
        data["accessories"] = .array(accessories.map { .object(["id": .string($0.id), "name": .string($0.name)]) })
        data["connected"] = .bool(await source.isConnected(pairingID: pairing.accessoryPairingID))
        return .object(data)
    }

    func pairings() async throws(GatewayFailure) -> JSONValue {
        do {
            return .array(try source.store.all().map { .object(Self.describe($0)) })
        } catch {
            throw GatewayFailure(code: .io, message: "cannot read the pairings: \(error)")
        }
    }

    /// `id` is a pairing id, or the id of one of its accessories (`hap:<pairing id>:<aid>`).
    func unpair(id: String) async throws(GatewayFailure) {
        let pairingID = HAPSource.pairingID(forAccessoryID: id) ?? id
        do {
            try await controller.unpair(id: pairingID)
        } catch  where error.isTransient {
            throw GatewayFailure(
                code: error.code,
                message:
                    "\(error.message); to forget the pairing without telling the accessory, run `homemqtt unpair \(pairingID) --force`"
            )
        } catch {
            throw Self.failure(error)
        }
        await source.remove(pairingID: pairingID)
    }

    func discover(timeout: Double) async throws(GatewayFailure) -> JSONValue {
        do {
            return .array(
                try await HAPDiscovery.browse(timeout: timeout, interfaces: source.mdnsInterfaces).map(Self.describe))
        } catch {
            throw Self.failure(error)
        }
    }

    func pairingID(forAccessory accessoryID: String) -> String? {
        HAPSource.pairingID(forAccessoryID: accessoryID)
    }

    static func failure(_ error: HAPError) -> GatewayFailure {
        GatewayFailure(code: error.code, message: error.message)
    }

    /// What a pairing may show: never its keys.
    static func describe(_ pairing: HAPPairing) -> [String: JSONValue] {
        [
            "pairing": .string(pairing.accessoryPairingID),
            "name": pairing.name.map(JSONValue.string) ?? .null,
            "host": .string(pairing.host),
            "port": .int(Int64(pairing.port)),
        ]
    }

    static func describe(_ found: HAPDiscoveredAccessory) -> JSONValue {
        .object([
            "id": .string(found.id),
            "name": .string(found.name),
            "model": .string(found.model),
            "category": .int(Int64(found.category)),
            "category-name": .string(Catalog.categories[found.category] ?? "other"),
            "paired": .bool(found.isPaired),
            "configuration-number": .int(Int64(found.configurationNumber)),
            "host": .string(found.host),
            "port": .int(Int64(found.port)),
            "addresses": .array(found.addresses.map(JSONValue.string)),
        ])
    }
}
