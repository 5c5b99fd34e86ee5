import Gateway
import HomeModel

// HAP's own management operations, which the gateway answers after its core ones: `pair`,
// `pairings`, `unpair` and `discover`. They reach the HAP source through the running gateway's
// pairing manager; a gateway without a HAP source answers them with `no-pairing-source`.

enum HAPPairingOperations {
    /// In the order `unknown-op` names them, after the core operations.
    static let all: [any ManagementOperation.Type] = [
        HAPPair.self, HAPPairings.self, HAPUnpair.self, HAPDiscover.self,
    ]

    /// The running gateway's HAP pairing manager.
    static func manager(_ gateway: some RunningGateway, for op: String) throws(GatewayFailure) -> HAPPairingManager {
        guard let manager = gateway.pairing as? HAPPairingManager else {
            throw GatewayFailure(
                code: .noPairingSource,
                message: "\(op) needs the hap source; add `- type: hap` under sources in the config")
        }
        return manager
    }
}

/// `pair`: pairs with an accessory at an explicit address; its accessories join the home.
struct HAPPair: GatewayOperation {
    static let name = "pair"
    var host: String
    var port: Int
    /// The setup code printed on the accessory, XXX-XX-XXX.
    var code: String
    /// A name for the pairing (default: the accessory's own name).
    var name: String?

    init(_ request: RequestReader) throws(GatewayFailure) {
        host = try request.text("host")
        port = try request.int("port", in: 1...65535)
        code = try request.text("code")
        name = try request.optionalText("name")
    }

    var fields: [String: JSONValue] {
        [
            "host": .string(host), "port": .int(Int64(port)), "code": .string(code),
            "name": name.map(JSONValue.string) ?? .null,
        ]
    }

    func perform(on gateway: some RunningGateway) async throws(GatewayFailure) -> JSONValue {
        let manager = try HAPPairingOperations.manager(gateway, for: Self.name)
        let paired = try await manager.pair(host: host, port: port, setupCode: code, name: name)
        await gateway.paired(
            accessoryIDs: (paired["accessories"]?.arrayValue ?? []).compactMap { $0["id"]?.stringValue })
        return paired
    }
}

/// `pairings`: the pairings kept, never their keys.
struct HAPPairings: GatewayOperation {
    static let name = "pairings"

    init(_ request: RequestReader) throws(GatewayFailure) {}
    var fields: [String: JSONValue] { [:] }

    func perform(on gateway: some RunningGateway) async throws(GatewayFailure) -> JSONValue {
        let manager = try HAPPairingOperations.manager(gateway, for: Self.name)
        return .object(["pairings": try await manager.pairings()])
    }
}

/// `unpair`: removes a pairing, on the accessory and locally; its accessories leave the home.
struct HAPUnpair: GatewayOperation {
    static let name = "unpair"
    /// A pairing id, or the id of one of its accessories.
    var pairing: String

    init(_ request: RequestReader) throws(GatewayFailure) {
        pairing = try request.text("pairing")
    }

    var fields: [String: JSONValue] { ["pairing": .string(pairing)] }

    func perform(on gateway: some RunningGateway) async throws(GatewayFailure) -> JSONValue {
        let manager = try HAPPairingOperations.manager(gateway, for: Self.name)
        try await manager.unpair(id: pairing)
        return .object(["pairing": .string(pairing)])
    }
}

/// `discover`: HAP accessories announcing themselves on the local network.
struct HAPDiscover: GatewayOperation {
    static let name = "discover"
    /// Seconds to listen, 0.5…30 (3 when left out).
    var timeout: Double?

    init(_ request: RequestReader) throws(GatewayFailure) {
        timeout = try request.optionalDouble("timeout", in: 0.5...30)
    }

    var fields: [String: JSONValue] { timeout.map { ["timeout": .double($0)] } ?? [:] }

    func perform(on gateway: some RunningGateway) async throws(GatewayFailure) -> JSONValue {
        let manager = try HAPPairingOperations.manager(gateway, for: Self.name)
        return try await manager.discover(timeout: timeout ?? 3)
    }
}
