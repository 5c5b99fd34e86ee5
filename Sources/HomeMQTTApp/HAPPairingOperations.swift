public import Gateway
public import HAP
public import HomeModel

// HAP's own management operations, which the gateway answers after its core ones: `pair`,
// `pairings`, `unpair` and `discover`. Each is performed on HAP's pairing manager, which the
// editor holds (`SourceOperation`): the running HAP source's, or, without the gateway, one over
// the state directory's pairings. A gateway without a HAP source answers `no-pairing-source`.
// `homemqtt hap …` sends these same operations.

enum HAPPairingOperations {
    /// In the order `unknown-op` names them, after the core operations.
    static let all: [any ManagementOperation.Type] = [
        HAPPair.self, HAPPairings.self, HAPUnpair.self, HAPDiscover.self,
    ]
}

/// `pair`: pairs with an accessory at an explicit address; its accessories join the home.
public struct HAPPair: SourceOperation {
    public static let name = "pair"
    var host: String
    var port: Int
    /// The setup code printed on the accessory, XXX-XX-XXX.
    var code: String
    /// A name for the pairing (default: the accessory's own name).
    var name: String?
    /// `thread`: a Thread accessory, paired over HAP over CoAP; `ip`: over HTTP. nil: `thread`
    /// when the running gateway heard the address announced as `_hap._udp`, else `ip`.
    var transport: HAPTransport?

    public init(host: String, port: Int, code: String, name: String?, transport: HAPTransport? = nil) {
        self.host = host
        self.port = port
        self.code = code
        self.name = name
        self.transport = transport
    }

    public init(_ request: RequestReader) throws(GatewayFailure) {
        host = try request.text("host")
        port = try request.int("port", in: 1...65535)
        code = try request.text("code")
        name = try request.optionalText("name")
        transport = try request.optionalText("transport").map { (text: String) throws(GatewayFailure) in
            guard let known = HAPTransport(rawValue: text) else {
                throw GatewayFailure(code: .invalidField, message: "transport: must be ip or thread, got '\(text)'")
            }
            return known
        }
    }

    // `transport` only when given: the request without it is the one clients always sent.
    public var fields: [String: JSONValue] {
        var fields: [String: JSONValue] = [
            "host": .string(host), "port": .int(Int64(port)), "code": .string(code),
            "name": name.map(JSONValue.string) ?? .null,
        ]
        if let transport { fields["transport"] = .string(transport.rawValue) }
        return fields
    }

    public func perform(with manager: HAPPairingManager, on editor: some HomeEditor) async throws(GatewayFailure)
        -> JSONValue
    {
        let paired = try await manager.pair(
            host: host, port: port, setupCode: code, name: name, transport: transport)
        await editor.running?.paired(
            accessoryIDs: (paired["accessories"]?.arrayValue ?? []).compactMap { $0["id"]?.stringValue })
        return paired
    }
}

/// `pairings`: the pairings kept, never their keys.
public struct HAPPairings: SourceOperation {
    public static let name = "pairings"

    public init() {}

    public init(_ request: RequestReader) throws(GatewayFailure) {}
    public var fields: [String: JSONValue] { [:] }

    public func perform(with manager: HAPPairingManager, on editor: some HomeEditor) async throws(GatewayFailure)
        -> JSONValue
    {
        .object(["pairings": try await manager.pairings()])
    }
}

/// `unpair`: removes a pairing, on the accessory and locally; its accessories leave the home.
public struct HAPUnpair: SourceOperation {
    public static let name = "unpair"
    /// A pairing id, or the id of one of its accessories.
    var pairing: String
    /// Forget the pairing even when the accessory cannot be told (`hap unpair --force`).
    var force: Bool

    public init(pairing: String, force: Bool = false) {
        self.pairing = pairing
        self.force = force
    }

    public init(_ request: RequestReader) throws(GatewayFailure) {
        pairing = try request.text("pairing")
        force = try request.bool("force") ?? false
    }

    // `force` only when set: the request without it is the one clients always sent.
    public var fields: [String: JSONValue] {
        force ? ["pairing": .string(pairing), "force": .bool(true)] : ["pairing": .string(pairing)]
    }

    public func perform(with manager: HAPPairingManager, on editor: some HomeEditor) async throws(GatewayFailure)
        -> JSONValue
    {
        try await manager.unpair(id: pairing, force: force)
        return .object(["pairing": .string(pairing)])
    }
}

/// `discover`: HAP accessories announcing themselves on the local network.
public struct HAPDiscover: SourceOperation {
    public static let name = "discover"
    /// Seconds to listen, 0.5…60 (3 when left out).
    var timeout: Double?

    /// What `hap discover --timeout` and a request accept alike.
    public static let timeouts = 0.5...60.0

    public init(timeout: Double?) {
        self.timeout = timeout
    }

    public init(_ request: RequestReader) throws(GatewayFailure) {
        timeout = try request.optionalDouble("timeout", in: Self.timeouts)
    }

    public var fields: [String: JSONValue] { timeout.map { ["timeout": .double($0)] } ?? [:] }

    public func perform(with manager: HAPPairingManager, on editor: some HomeEditor) async throws(GatewayFailure)
        -> JSONValue
    {
        try await manager.discover(timeout: timeout ?? 3)
    }
}
