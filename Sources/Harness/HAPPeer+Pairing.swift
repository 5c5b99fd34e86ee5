// Pairing with the HAP-python peer as its tests and the bench do.
public import HAP

extension HAPPeer {
    /// Pairs `controller` with the peer on `port`. HAP-python drops leading zeros in SRP and
    /// refuses a correct proof about once in 80 pairings, so a refusal is retried (three more
    /// times); a wrong code fails every time, and any other error at once.
    public static func pair(
        _ controller: HAPController, port: Int, setupCode: String = defaultSetupCode, name: String? = nil
    ) async throws -> HAPPairing {
        var last: HAPError?
        for _ in 0..<4 {
            do {
                return try await controller.pair(host: "127.0.0.1", port: port, setupCode: setupCode, name: name)
            } catch {
                last = error
                guard error.code == .wrongSetupCode || error.code == .badSignature else { throw error }
            }
        }
        throw last ?? HAPError(code: .protocolError, message: "pairing failed")
    }
}
