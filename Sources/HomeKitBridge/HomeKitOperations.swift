public import Gateway
public import HomeModel

// The bridge's management operations, on the home's `$gateway/request/`: `homekit-status` and
// `homekit-reset`. Both need the running gateway (its bridge); `homemqtt homekit …` does the
// same on the state directory when the gateway is not running. Neither answers the setup code:
// it never travels over MQTT (`homemqtt homekit code` reads it from the state directory).

public enum HomeKitOperations {
    /// In the order `unknown-op` names them.
    public static let all: [any ManagementOperation.Type] = [HomeKitStatusOperation.self, HomeKitResetOperation.self]

    /// The bridge of the home the request was sent to, or the server of its accessory
    /// `accessory` served alone (`homekit: standalone`).
    static func bridge(of gateway: some RunningGateway, accessory: String? = nil) throws(GatewayFailure)
        -> HomeKitBridgeService
    {
        guard let bridge = HomeKitBridges.serving(gateway.database) else {
            throw GatewayFailure(
                code: .unavailable, message: "this home has no HomeKit bridge; set homekit.enabled: true in the config")
        }
        guard let accessory else { return bridge }
        guard let alone = HomeKitBridges.serving(gateway.database, accessory: accessory) else {
            throw GatewayFailure(
                code: .doesNotExist,
                message:
                    "no accessory '\(accessory)' is served standalone to HomeKit in this home (homekit: standalone in its accessory file)"
            )
        }
        return alone
    }
}

/// `homekit-status`: the bridge's id, `c#`, `sf`, port, setup id and pairings (never the code),
/// and the accessories it leaves to serve alone; with `accessory`, that accessory's server's.
public struct HomeKitStatusOperation: GatewayOperation {
    public static let name = "homekit-status"

    /// The accessory served alone to act on (its id); nil: the home's bridge.
    public var accessory: String?

    public init(accessory: String? = nil) { self.accessory = accessory }
    public init(_ request: RequestReader) throws(GatewayFailure) { accessory = try request.optionalText("accessory") }
    public var fields: [String: JSONValue] { accessory.map { ["accessory": .string($0)] } ?? [:] }

    public func perform(on gateway: some RunningGateway) async throws(GatewayFailure) -> JSONValue {
        try await HomeKitOperations.bridge(of: gateway, accessory: accessory).status().json
    }
}

/// `homekit-reset`: forgets the bridge's pairings and identity; it starts anew, unpaired, as a
/// new accessory (the Home app pairs it again with the same setup code). The aids and iids stay.
/// With `accessory`: that accessory served alone, and only it.
public struct HomeKitResetOperation: GatewayOperation {
    public static let name = "homekit-reset"

    /// The accessory served alone to act on (its id); nil: the home's bridge.
    public var accessory: String?

    public init(accessory: String? = nil) { self.accessory = accessory }
    public init(_ request: RequestReader) throws(GatewayFailure) { accessory = try request.optionalText("accessory") }
    public var fields: [String: JSONValue] { accessory.map { ["accessory": .string($0)] } ?? [:] }

    public func perform(on gateway: some RunningGateway) async throws(GatewayFailure) -> JSONValue {
        try await HomeKitOperations.bridge(of: gateway, accessory: accessory).reset().json
    }
}
