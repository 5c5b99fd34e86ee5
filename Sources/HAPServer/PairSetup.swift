import BigInt
import Crypto
import Foundation
import HAP

/// The accessory's side of SRP-6a for one pair-setup: a fresh salt and secret `b` per attempt,
/// the verifier from the setup code, `B` padded to 384 bytes (so `u` is the same however the
/// controller pads it).
struct SRPServerSession: Sendable {
    let salt: [UInt8]
    let verifier: BigUInt
    let b: BigUInt
    let B: [UInt8]

    init(setupCode: String, salt: [UInt8] = HAPCrypto.randomBytes(16), b: BigUInt? = nil) {
        self.salt = salt
        verifier = SRP.verifier(salt: salt, password: setupCode)
        self.b = b ?? BigUInt(Data(HAPCrypto.randomBytes(32)))
        B = SRP.pad(SRP.serverB(b: self.b, verifier: verifier))
    }

    /// K and the accessory's proof (HAMK) if the controller's proof `M` matches; nil if the
    /// controller used another setup code (or sent an invalid A).
    func verify(A: [UInt8], M: [UInt8]) -> (K: [UInt8], HAMK: [UInt8])? {
        guard !A.isEmpty, A.count <= SRP.length, BigUInt(Data(A)) % SRP.N != 0 else { return nil }
        let S = SRP.serverS(A: A, B: B, b: b, verifier: verifier)
        let K = SRP.K(S: S)
        let expected = SRP.M(salt: salt, A: A, B: B, K: K)
        guard expected.count == M.count, zip(expected, M).reduce(0, { $0 | ($1.0 ^ $1.1) }) == 0 else { return nil }
        return (K, SRP.HAMK(A: A, M: M, K: K))
    }
}

/// Pair-setup M1–M6 as the accessory, for one connection. Each request TLV gives one response
/// TLV; the shared `AccessoryState` decides whether a pair-setup may start (paired already,
/// 100 failures, another connection's under way) and keeps the pairing it ends with.
struct PairSetupMachine: Sendable {
    enum Phase: Sendable {
        case idle
        case awaitingM3(SRPServerSession)
        case awaitingM5(K: [UInt8])
    }

    private(set) var phase: Phase = .idle
    let connection: UInt64

    init(connection: UInt64) { self.connection = connection }

    /// A response to one request of pair-setup, and whether it made a pairing.
    struct Step {
        var response: TLV8
        var paired: HAPControllerPairing?
    }

    mutating func handle(_ request: TLV8, state: AccessoryState) -> Step {
        let step = request[TLVType.state]?.first
        switch step {
        case 1: return m1(request, state: state)
        case 3: return m3(request, state: state)
        case 5: return m5(request, state: state)
        default:
            // A state out of nowhere: the attempt is over; the controller starts again with M1.
            abandon(state)
            return Step(response: Self.error(.unknown, state: (step ?? 0) &+ 1))
        }
    }

    /// Forgets the attempt under way (the connection closed, or the exchange failed).
    mutating func abandon(_ state: AccessoryState) {
        phase = .idle
        state.releasePairSetup(connection: connection)
    }

    static func error(_ code: TLVErrorCode, state: UInt8) -> TLV8 {
        var tlv = TLV8()
        tlv.append(TLVType.state, byte: state)
        tlv.append(TLVType.error, byte: code.rawValue)
        return tlv
    }

    private mutating func m1(_ request: TLV8, state: AccessoryState) -> Step {
        // Method 0 (PairSetup) or 1 (PairSetupWithAuth): without an MFi chip both are plain SRP.
        let method = request[TLVType.method]?.first ?? 0
        guard method == 0 || method == 1 else {
            abandon(state)
            return Step(response: Self.error(.unknown, state: 2))
        }
        if let refusal = state.claimPairSetup(connection: connection) {
            phase = .idle
            return Step(response: Self.error(refusal, state: 2))
        }
        let srp = SRPServerSession(setupCode: state.setupCode.revealed)
        phase = .awaitingM3(srp)
        var tlv = TLV8()
        tlv.append(TLVType.state, byte: 2)
        tlv.append(TLVType.salt, srp.salt)
        tlv.append(TLVType.publicKey, srp.B)
        return Step(response: tlv)
    }

    private mutating func m3(_ request: TLV8, state: AccessoryState) -> Step {
        guard case .awaitingM3(let srp) = phase else {
            abandon(state)
            return Step(response: Self.error(.unknown, state: 4))
        }
        guard let A = request[TLVType.publicKey], let M = request[TLVType.proof] else {
            abandon(state)
            return Step(response: Self.error(.unknown, state: 4))
        }
        guard let proof = srp.verify(A: A, M: M) else {
            state.recordFailedSetup()
            abandon(state)
            return Step(response: Self.error(.authentication, state: 4))
        }
        phase = .awaitingM5(K: proof.K)
        var tlv = TLV8()
        tlv.append(TLVType.state, byte: 4)
        tlv.append(TLVType.proof, proof.HAMK)
        return Step(response: tlv)
    }

    private mutating func m5(_ request: TLV8, state: AccessoryState) -> Step {
        guard case .awaitingM5(let K) = phase else {
            abandon(state)
            return Step(response: Self.error(.unknown, state: 6))
        }
        defer { abandon(state) }
        let encryptKey = HAPCrypto.hkdfSHA512(key: K, salt: "Pair-Setup-Encrypt-Salt", info: "Pair-Setup-Encrypt-Info")
        guard let sealed = request[TLVType.encryptedData],
            let plain = try? HAPCrypto.open(sealed, key: encryptKey, nonce: HAPCrypto.nonce(label: "PS-Msg05")),
            let inner = try? TLV8.decode(plain),
            let controllerID = inner[TLVType.identifier], !controllerID.isEmpty,
            let id = String(bytes: controllerID, encoding: .utf8),
            let controllerLTPK = inner[TLVType.publicKey], controllerLTPK.count == 32,
            let signature = inner[TLVType.signature], signature.count == 64
        else { return Step(response: Self.error(.authentication, state: 6)) }
        let controllerX = HAPCrypto.hkdfSHA512(
            key: K, salt: "Pair-Setup-Controller-Sign-Salt", info: "Pair-Setup-Controller-Sign-Info")
        guard
            HAPCrypto.verifyEd25519(
                signature: signature, message: controllerX + controllerID + controllerLTPK, publicKey: controllerLTPK)
        else { return Step(response: Self.error(.authentication, state: 6)) }

        let pairing = HAPControllerPairing(id: id, publicKey: controllerLTPK, isAdmin: true)
        if let refusal = state.addPairing(pairing, firstAdmin: true) {
            return Step(response: Self.error(refusal, state: 6))
        }
        let accessoryX = HAPCrypto.hkdfSHA512(
            key: K, salt: "Pair-Setup-Accessory-Sign-Salt", info: "Pair-Setup-Accessory-Sign-Info")
        let accessoryID = Array(state.pairingID.utf8)
        let accessoryLTPK = state.signingKey.publicKey
        var sub = TLV8()
        sub.append(TLVType.identifier, accessoryID)
        sub.append(TLVType.publicKey, accessoryLTPK)
        sub.append(TLVType.signature, state.signingKey.sign(accessoryX + accessoryID + accessoryLTPK))
        guard
            let sealedReply = try? HAPCrypto.seal(
                sub.encoded(), key: encryptKey, nonce: HAPCrypto.nonce(label: "PS-Msg06"))
        else { return Step(response: Self.error(.unknown, state: 6)) }
        var tlv = TLV8()
        tlv.append(TLVType.state, byte: 6)
        tlv.append(TLVType.encryptedData, sealedReply)
        return Step(response: tlv, paired: pairing)
    }
}
