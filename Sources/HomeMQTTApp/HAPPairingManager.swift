import Foundation
public import Gateway
import HAP
import HomeKitBridge
import HomeModel
import Logging
import MDNS

/// The gateway's `pair`, `pairings`, `unpair` and `discover` requests over the HAP controller. The running
/// HAP source follows every change, so a new pairing's accessories get their topics at once
/// and an unpaired accessory's topics are cleared. Without the gateway (`homemqtt hap …` while
/// it is stopped) there is no source: the pairings in the state directory are all there is.
public struct HAPPairingManager: PairingManager {
    public static let sourceType = HAPFactory.type
    let controller: HAPController
    /// The running source; nil without the gateway.
    let source: HAPSource?
    let store: HAPPairingStore
    let mdnsInterfaces: MDNSInterfaces

    init(source: HAPSource, threadLinks: HAPThreadLinkMaker?, logger: Logger) {
        self.source = source
        store = source.store
        mdnsInterfaces = source.mdnsInterfaces
        controller = HAPController(store: source.store, logger: logger, threadLinks: threadLinks)
    }

    init(store: HAPPairingStore, mdnsInterfaces: MDNSInterfaces, threadLinks: HAPThreadLinkMaker?, logger: Logger) {
        source = nil
        self.store = store
        self.mdnsInterfaces = mdnsInterfaces
        controller = HAPController(store: store, logger: logger, threadLinks: threadLinks)
    }

    /// `transport` `.thread`: pair-setup over CoAP with a Thread accessory. nil: over CoAP when the
    /// running source heard the address announced as `_hap._udp`, else over IP.
    func pair(host: String, port: Int, setupCode: String, name: String?, transport: HAPTransport? = nil)
        async throws(GatewayFailure) -> JSONValue
    {
        var transport = transport ?? .ip
        if transport == .ip, await source?.isAnnouncedAsThread(host: host, port: port) == true { transport = .thread }
        // The gateway's own HomeKit bridge would serve its own accessories back to it, again and
        // again: refused before pairing when the address is one of its bridges'…
        let stateDirectory = store.directory.deletingLastPathComponent().path
        if transport == .ip, let bridge = HomeKitBridges.reached(host: host, port: port, stateDirectory: stateDirectory)
        {
            throw Self.ownBridge(bridge.homeName)
        }
        let pairing: HAPPairing
        do {
            pairing = try await controller.pair(
                host: host, port: port, setupCode: setupCode, name: name, transport: transport)
        } catch {
            throw Self.failure(error)
        }
        // … and after it by the accessory's pairing id, whatever address reached it: the pairing
        // is taken back at once, before any source serves it.
        if BridgeFiles.ownPairingIDs(stateDirectory: stateDirectory).contains(pairing.accessoryPairingID) {
            try? await controller.unpair(id: pairing.accessoryPairingID, force: true)
            throw Self.ownBridge(nil, servedAlone: true)
        }
        var data = Self.describe(pairing)
        let accessories: [Accessory]?
        let cameBack: [Accessory]
        if let source {
            accessories = await source.add(pairing: pairing)
            cameBack = await source.cameBack(pairingID: pairing.accessoryPairingID)
            data["connected"] = .bool(await source.isConnected(pairingID: pairing.accessoryPairingID))
        } else {
            // No gateway to serve them yet: a look at them, once. The pairing stands even when
            // the look fails (then no `accessories`); the gateway reads them when it starts.
            let gatewayID = try? GatewayIdentity.load(stateDirectory: stateDirectory)
            let all = try? await controller.accessories(of: pairing)
            let parts = all.map { GatewayRoute.partition($0, gatewayID: gatewayID) }
            accessories = parts?.kept
            cameBack = parts?.cameBack ?? []
            data["connected"] = .bool(false)
        }
        // Another gateway's bridge that serves nothing but what passed through this gateway
        // (most often its own accessories, bridged back): refused like its own bridge, and the
        // pairing taken back before anything of it is served.
        if GatewayRoute.onlyCameBack(kept: accessories ?? [], cameBack: cameBack) {
            await source?.remove(pairingID: pairing.accessoryPairingID)
            try? await controller.unpair(id: pairing.accessoryPairingID, force: true)
            throw Self.onlyCameBack(cameBack.count)
        }
        if let accessories {
            data["accessories"] = .array(accessories.map { .object(["id": .string($0.id), "name": .string($0.name)]) })
        }
        if !cameBack.isEmpty { data["left-out"] = Self.describe(cameBack: cameBack) }
        return .object(data)
    }

    /// The accessories left out because they came back, with the reason (`left-out`).
    static func describe(cameBack: [Accessory]) -> JSONValue {
        .array(
            cameBack.map {
                .object([
                    "id": .string($0.id), "name": .string($0.name),
                    "reason": "it came through this gateway already (its route holds this gateway's id)",
                    "route": .array(GatewayRoute.route(of: $0).map(JSONValue.string)),
                ])
            })
    }

    /// The refusal to pair with a bridge that serves only what came from this gateway.
    static func onlyCameBack(_ count: Int) -> GatewayFailure {
        GatewayFailure(
            code: .invalidField,
            message:
                "that bridge only serves this gateway's own accessories (\(count) came through this gateway "
                + "already): a gateway does not bridge its accessories back to itself"
        )
    }

    func pairings() async throws(GatewayFailure) -> JSONValue {
        do {
            var listed: [JSONValue] = []
            for pairing in try store.all() {
                var data = Self.describe(pairing)
                let back = await source?.cameBack(pairingID: pairing.accessoryPairingID) ?? []
                if !back.isEmpty { data["left-out"] = Self.describe(cameBack: back) }
                listed.append(.object(data))
            }
            return .array(listed)
        } catch {
            throw GatewayFailure(code: .io, message: "cannot read the pairings: \(error)")
        }
    }

    /// `id` is a pairing id, or the id of one of its accessories (`hap:<pairing id>:<aid>`).
    public func unpair(id: String) async throws(GatewayFailure) {
        try await unpair(id: id, force: false)
    }

    /// `force`: forget the pairing even when the accessory cannot be told.
    func unpair(id: String, force: Bool) async throws(GatewayFailure) {
        let pairingID = HAPSource.pairingID(forAccessoryID: id) ?? id
        do {
            try await controller.unpair(id: pairingID, force: force)
        } catch  where error.isTransient && !force {
            throw GatewayFailure(
                code: error.code,
                message:
                    "\(error.message); to forget the pairing without telling the accessory, run `homemqtt hap unpair \(pairingID) --force`"
            )
        } catch {
            throw Self.failure(error)
        }
        await source?.remove(pairingID: pairingID)
    }

    func discover(timeout: Double) async throws(GatewayFailure) -> JSONValue {
        do {
            return .array(
                try await HAPDiscovery.browseAll(timeout: timeout, interfaces: mdnsInterfaces).map(Self.describe))
        } catch {
            throw Self.failure(error)
        }
    }

    public func pairingID(forAccessory accessoryID: String) -> String? {
        HAPSource.pairingID(forAccessoryID: accessoryID)
    }

    /// The refusal to pair with the gateway's own bridge.
    /// `servedAlone`: known by its pairing id, so it may be one of the accessories the gateway
    /// serves on their own (`homekit: standalone` or `thread`) rather than a bridge.
    static func ownBridge(_ home: String?, servedAlone: Bool = false) -> GatewayFailure {
        let what =
            servedAlone
            ? "this gateway's own HomeKit bridge or an accessory it serves alone (homekit: standalone or thread)"
            : "this gateway's own HomeKit bridge\(home.map { " (home '\($0)')" } ?? "")"
        return GatewayFailure(
            code: .invalidField,
            message: "that is \(what): a gateway does not pair with its own bridge, which serves its own accessories")
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
            "transport": .string((pairing.transport ?? .ip).rawValue),
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
            "transport": .string(found.isThread ? "thread" : "ip"),
        ])
    }
}
