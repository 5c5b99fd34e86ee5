/// The TLVs of `/pairings` (list, add, remove), as the controller sends them: over IP to the
/// `/pairings` resource, over CoAP as a write of the Pairings characteristic. One place for the
/// requests and the reading of a list, whichever transport carries them.
public enum PairingsRequest {
    public static func list() -> TLV8 { request(method: 5) }

    /// Adds another controller's pairing, or changes its permission.
    public static func add(controllerPairingID: String, publicKey: [UInt8], admin: Bool) -> TLV8 {
        var t = request(method: 3)
        t.append(TLVType.identifier, Array(controllerPairingID.utf8))
        t.append(TLVType.publicKey, publicKey)
        t.append(TLVType.permissions, byte: admin ? 1 : 0)
        return t
    }

    public static func remove(controllerPairingID: String) -> TLV8 {
        var t = request(method: 4)
        t.append(TLVType.identifier, Array(controllerPairingID.utf8))
        return t
    }

    /// The entries of a list's answer (M2); a record without an identifier is skipped.
    public static func entries(_ m2: TLV8) -> [HAPPairingEntry] {
        m2.records().compactMap { record in
            guard let id = record[TLVType.identifier] else { return nil }
            return HAPPairingEntry(
                controllerPairingID: String(decoding: id, as: UTF8.self),
                publicKey: (record[TLVType.publicKey] ?? []).hexString,
                isAdmin: (record[TLVType.permissions]?.first ?? 0) & 1 == 1)
        }
    }

    private static func request(method: UInt8) -> TLV8 {
        var t = TLV8()
        t.append(TLVType.state, byte: 1)
        t.append(TLVType.method, byte: method)
        return t
    }
}
