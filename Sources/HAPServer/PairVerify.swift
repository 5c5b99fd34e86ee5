import Crypto
import HAP

/// Pair-verify M1–M4 as the accessory, for one connection: an X25519 exchange, each side signing
/// both ephemeral keys with its Ed25519 long-term key. On M4 the connection switches to the
/// encrypted session keyed by the shared secret.
struct PairVerifyMachine: Sendable {
    enum Phase: Sendable {
        case idle
        case awaitingM3(controllerPublic: [UInt8], accessoryPublic: [UInt8], shared: [UInt8], sessionKey: [UInt8])
    }

    private(set) var phase: Phase = .idle

    /// A response, and once verified, who the controller is and the session's shared secret.
    struct Step {
        var response: TLV8
        var verified: (pairing: HAPControllerPairing, sharedSecret: [UInt8])?
    }

    mutating func handle(_ request: TLV8, state: AccessoryState) -> Step {
        switch request[TLVType.state]?.first {
        case 1: return m1(request, state: state)
        case 3: return m3(request, state: state)
        case let other:
            phase = .idle
            return Step(response: PairSetupMachine.error(.unknown, state: (other ?? 0) &+ 1))
        }
    }

    private mutating func m1(_ request: TLV8, state: AccessoryState) -> Step {
        phase = .idle
        // An unpaired accessory has nobody to verify (HAP-python answers the same).
        guard state.isPaired else { return Step(response: PairSetupMachine.error(.authentication, state: 2)) }
        // A resume request (method 6) carries the same public key; without resumable sessions
        // it gets a full M2, which controllers take as "resume refused".
        guard let controllerPublic = request[TLVType.publicKey], controllerPublic.count == 32,
            let peer = try? Curve25519.KeyAgreement.PublicKey(rawRepresentation: controllerPublic)
        else { return Step(response: PairSetupMachine.error(.unknown, state: 2)) }
        let ephemeral = Curve25519.KeyAgreement.PrivateKey()
        let accessoryPublic = Array(ephemeral.publicKey.rawRepresentation)
        guard let secret = try? ephemeral.sharedSecretFromKeyAgreement(with: peer) else {
            return Step(response: PairSetupMachine.error(.unknown, state: 2))
        }
        let shared = secret.withUnsafeBytes { Array($0) }
        let sessionKey = HAPCrypto.hkdfSHA512(
            key: shared, salt: "Pair-Verify-Encrypt-Salt", info: "Pair-Verify-Encrypt-Info")
        let accessoryID = Array(state.pairingID.utf8)
        var sub = TLV8()
        sub.append(TLVType.identifier, accessoryID)
        sub.append(TLVType.signature, state.signingKey.sign(accessoryPublic + accessoryID + controllerPublic))
        guard
            let sealed = try? HAPCrypto.seal(sub.encoded(), key: sessionKey, nonce: HAPCrypto.nonce(label: "PV-Msg02"))
        else { return Step(response: PairSetupMachine.error(.unknown, state: 2)) }
        phase = .awaitingM3(
            controllerPublic: controllerPublic, accessoryPublic: accessoryPublic, shared: shared,
            sessionKey: sessionKey)
        var tlv = TLV8()
        tlv.append(TLVType.state, byte: 2)
        tlv.append(TLVType.publicKey, accessoryPublic)
        tlv.append(TLVType.encryptedData, sealed)
        return Step(response: tlv)
    }

    private mutating func m3(_ request: TLV8, state: AccessoryState) -> Step {
        guard case .awaitingM3(let controllerPublic, let accessoryPublic, let shared, let sessionKey) = phase else {
            return Step(response: PairSetupMachine.error(.unknown, state: 4))
        }
        phase = .idle
        guard let sealed = request[TLVType.encryptedData],
            let plain = try? HAPCrypto.open(sealed, key: sessionKey, nonce: HAPCrypto.nonce(label: "PV-Msg03")),
            let inner = try? TLV8.decode(plain),
            let controllerID = inner[TLVType.identifier],
            let signature = inner[TLVType.signature],
            let id = String(bytes: controllerID, encoding: .utf8),
            let pairing = state.pairing(id: id),
            HAPCrypto.verifyEd25519(
                signature: signature, message: controllerPublic + controllerID + accessoryPublic,
                publicKey: pairing.publicKey)
        else { return Step(response: PairSetupMachine.error(.authentication, state: 4)) }
        var tlv = TLV8()
        tlv.append(TLVType.state, byte: 4)
        return Step(response: tlv, verified: (pairing, shared))
    }
}
