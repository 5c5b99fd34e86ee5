/// A source that pairs (HAP), as the gateway's own operations need it: a paired accessory leaves
/// the home by losing its pairing (`accessory/remove`). What else pairing offers over the request
/// API the source brings as its own operations (`Gateway(operations:)`), which reach it through
/// `RunningGateway.pairing`.
public protocol PairingManager: Sendable {
    /// Removes a pairing, on the accessory and locally.
    func unpair(id: String) async throws(GatewayFailure)
    /// The pairing id behind a source accessory id, if that accessory is paired this way.
    func pairingID(forAccessory accessoryID: String) -> String?
}
