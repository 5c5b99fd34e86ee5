public import HomeModel

/// Pairing operations of a source that pairs (HAP), offered through the request API
/// (`pair`, `pairings`, `unpair`, `discover`). The gateway does not know which source provides
/// them.
public protocol PairingManager: Sendable {
    /// Pairs with an accessory at an explicit address; returns a description of the pairing.
    func pair(host: String, port: Int, setupCode: String, name: String?) async throws(GatewayFailure) -> JSONValue
    /// The pairings kept, as `[{pairing, name, host, port}]`: never their keys.
    func pairings() async throws(GatewayFailure) -> JSONValue
    /// Removes a pairing, on the accessory and locally.
    func unpair(id: String) async throws(GatewayFailure)
    /// Accessories announcing themselves on the local network.
    func discover(timeout: Double) async throws(GatewayFailure) -> JSONValue
    /// The pairing id behind a source accessory id, if that accessory is paired this way.
    func pairingID(forAccessory accessoryID: String) -> String?
}
