public import Gateway
public import HomeModel

// The bridge's management operations, on the home's `$gateway/request/`: `homekit-status` and
// `homekit-reset`. Both need the running gateway (its bridge); `homemqtt homekit …` does the
// same on the state directory when the gateway is not running. Neither answers the setup code:
// it never travels over MQTT (`homemqtt homekit code` reads it from the state directory).

public enum HomeKitOperations {
    /// In the order `unknown-op` names them.
    public static let all: [any ManagementOperation.Type] = [HomeKitStatusOperation.self, HomeKitResetOperation.self]

    /// The bridge of the home the request was sent to.
    static func bridge(of gateway: some RunningGateway) throws(GatewayFailure) -> HomeKitBridgeService {
        guard let bridge = HomeKitBridges.serving(gateway.database) else {
            throw GatewayFailure(
                code: .unavailable, message: "this home has no HomeKit bridge; set homekit.enabled: true in the config")
        }
        return bridge
    }
}

/// `homekit-status`: the bridge's id, `c#`, `sf`, port, setup id and pairings (never the code).
public struct HomeKitStatusOperation: GatewayOperation {
    public static let name = "homekit-status"

    public init() {}
    public init(_ request: RequestReader) throws(GatewayFailure) {}
    public var fields: [String: JSONValue] { [:] }

    public func perform(on gateway: some RunningGateway) async throws(GatewayFailure) -> JSONValue {
        try await HomeKitOperations.bridge(of: gateway).status().json
    }
}

/// `homekit-reset`: forgets the bridge's pairings and identity; it starts anew, unpaired, as a
/// new accessory (the Home app pairs it again with the same setup code). The aids and iids stay.
public struct HomeKitResetOperation: GatewayOperation {
    public static let name = "homekit-reset"

    public init() {}
    public init(_ request: RequestReader) throws(GatewayFailure) {}
    public var fields: [String: JSONValue] { [:] }

    public func perform(on gateway: some RunningGateway) async throws(GatewayFailure) -> JSONValue {
        try await HomeKitOperations.bridge(of: gateway).reset().json
    }
}
