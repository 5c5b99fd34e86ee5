public import HomeModel

/// What pairs accessories with one kind of source (HAP), as the gateway's own operations need
/// it: a paired accessory leaves the home by losing its pairing (`accessory/remove`). What else
/// pairing offers over the request API the source brings as its own operations
/// (`SourceOperation`), which find their manager among `HomeEditor.pairings` by its type.
/// Several kinds may pair side by side: each answers only for its own accessories.
public protocol PairingManager: Sendable {
    /// The `type` of the `sources:` entry that brings it, for the message that it is missing.
    static var sourceType: String { get }
    /// Removes a pairing, on the accessory and locally.
    func unpair(id: String) async throws(GatewayFailure)
    /// The pairing id behind a source accessory id, if that accessory is paired this way.
    func pairingID(forAccessory accessoryID: String) -> String?
}

/// An operation a kind of source brings (HAP's `pair`): performed on that kind's own pairing
/// manager, which the editor holds when a source of the kind is configured.
public protocol SourceOperation: ManagementOperation {
    associatedtype Pairing: PairingManager
    func perform(with pairing: Pairing, on editor: some HomeEditor) async throws(GatewayFailure) -> JSONValue
}

extension SourceOperation {
    public func perform(on editor: some HomeEditor) async throws(GatewayFailure) -> JSONValue {
        guard let pairing = editor.pairing(Pairing.self) else {
            let type = Pairing.sourceType
            throw GatewayFailure(
                code: .noPairingSource,
                message: "\(Self.name) needs the \(type) source; add `- type: \(type)` under sources in the config")
        }
        return try await perform(with: pairing, on: editor)
    }
}

extension HomeEditor {
    /// The pairing manager of one kind, if a source of that kind pairs here. The one place
    /// a manager is told apart by type: an operation names the type it needs, not a slot.
    public func pairing<Pairing: PairingManager>(_ kind: Pairing.Type) -> Pairing? {
        for pairing in pairings {
            if let match = pairing as? Pairing { return match }
        }
        return nil
    }

    /// The manager that paired `accessoryID`, and its pairing id, if any did.
    public func pairing(forAccessory accessoryID: String) -> (any PairingManager, String)? {
        for pairing in pairings {
            if let id = pairing.pairingID(forAccessory: accessoryID) { return (pairing, id) }
        }
        return nil
    }
}
