import Crypto
import Foundation

/// Pair-setup (M1–M6) and pair-verify (M1–M4) over a fresh, unencrypted connection.
enum PairingProtocol {
    static let tlvContentType = "application/pairing+tlv8"

    /// `031-45-154` (or the same eight digits without dashes) → `031-45-154`.
    static func normalizeSetupCode(_ code: String) throws(HAPError) -> String {
        let digits = code.filter(\.isNumber)
        let shapeOK = code.allSatisfy { $0.isNumber || $0 == "-" }
        guard shapeOK, digits.count == 8, digits.allSatisfy({ $0.isASCII }) else {
            throw HAPError(code: .badSetupCode, message: "a setup code is eight digits as XXX-XX-XXX (e.g. 031-45-154)")
        }
        let d = Array(digits)
        return String(d[0..<3]) + "-" + String(d[3..<5]) + "-" + String(d[5..<8])
    }

    /// One request of pair-setup or pair-verify over `channel`, its answer checked: a TLV
    /// error becomes the `HAPError` the user can act on, a wrong state a `bad-tlv`.
    static func exchange(
        _ channel: some PairingChannel, path: String, _ tlv: TLV8, step: String, expectState: UInt8
    ) async throws(HAPError) -> TLV8 {
        let body = try await channel.post(path, tlv.encoded(), step: step)
        let reply = try TLV8.decode(body)
        if let err = reply[TLVType.error], let code = err.first {
            throw (PairingTLVError(rawValue: code) ?? .unknown).hapError(during: step)
        }
        guard reply[TLVType.state] == [expectState] else {
            throw HAPError.badTLV(
                "the accessory's answer to \(step) has state \(reply[TLVType.state]?.first.map(String.init) ?? "none"), expected \(expectState)"
            )
        }
        return reply
    }

    static func exchange(_ connection: HAPConnection, path: String, _ tlv: TLV8, step: String, expectState: UInt8)
        async throws(HAPError) -> TLV8
    {
        try await exchange(
            HTTPPairingChannel(connection: connection), path: path, tlv, step: step, expectState: expectState)
    }

    static func require(_ tlv: TLV8, _ type: UInt8, _ what: String, step: String, count: Int? = nil) throws(HAPError)
        -> [UInt8]
    {
        guard let v = tlv[type] else { throw HAPError.badTLV("the accessory's \(step) has no \(what)") }
        if let count, v.count != count {
            throw HAPError.badTLV("the accessory's \(what) in \(step) is \(v.count) bytes, expected \(count)")
        }
        return v
    }

    /// Runs pair-setup with the setup code; returns the new pairing (not yet saved).
    static func pairSetup(_ connection: some PairingChannel, setupCode: String, featureFlags: Int)
        async throws(HAPError) -> HAPPairing
    {
        let password = try normalizeSetupCode(setupCode)
        // ff bit 0: the accessory has an Apple authentication coprocessor and wants method 1.
        let method: UInt8 = featureFlags & 1 != 0 ? 1 : 0
        var m1 = TLV8()
        m1.append(TLVType.state, byte: 1)
        m1.append(TLVType.method, byte: method)
        let m2 = try await exchange(connection, path: connection.setupPath, m1, step: "pair-setup M2", expectState: 2)
        let salt = try require(m2, TLVType.salt, "salt", step: "pair-setup M2", count: 16)
        let B = try require(m2, TLVType.publicKey, "SRP public key", step: "pair-setup M2")

        let srp = SRP.Client()
        let proof = try srp.proof(salt: salt, B: B, password: password)
        var m3 = TLV8()
        m3.append(TLVType.state, byte: 3)
        m3.append(TLVType.publicKey, srp.A)
        m3.append(TLVType.proof, proof.M)
        let m4 = try await exchange(connection, path: connection.setupPath, m3, step: "pair-setup M4", expectState: 4)
        let hamk = try require(m4, TLVType.proof, "SRP proof", step: "pair-setup M4")
        guard hamk == proof.expectedHAMK else {
            throw HAPError.badSignature(
                "the accessory's SRP proof is wrong: it does not know the setup code, or it is not the accessory we think"
            )
        }

        let K = proof.K
        let encKey = HAPCrypto.hkdfSHA512(key: K, salt: "Pair-Setup-Encrypt-Salt", info: "Pair-Setup-Encrypt-Info")
        let controllerX = HAPCrypto.hkdfSHA512(
            key: K, salt: "Pair-Setup-Controller-Sign-Salt", info: "Pair-Setup-Controller-Sign-Info")
        let signingKey = Curve25519.Signing.PrivateKey()
        let ltsk = Array(signingKey.rawRepresentation)
        let ltpk = Array(signingKey.publicKey.rawRepresentation)
        let controllerID = UUID().uuidString
        let signature = try HAPCrypto.signEd25519(controllerX + Array(controllerID.utf8) + ltpk, privateKey: ltsk)
        var sub = TLV8()
        sub.append(TLVType.identifier, Array(controllerID.utf8))
        sub.append(TLVType.publicKey, ltpk)
        sub.append(TLVType.signature, signature)
        var m5 = TLV8()
        m5.append(TLVType.state, byte: 5)
        m5.append(
            TLVType.encryptedData,
            try HAPCrypto.seal(sub.encoded(), key: encKey, nonce: HAPCrypto.nonce(label: "PS-Msg05")))
        let m6 = try await exchange(connection, path: connection.setupPath, m5, step: "pair-setup M6", expectState: 6)
        let sealed = try require(m6, TLVType.encryptedData, "encrypted data", step: "pair-setup M6")
        let plain = try HAPCrypto.open(sealed, key: encKey, nonce: HAPCrypto.nonce(label: "PS-Msg06"))
        let inner = try TLV8.decode(plain)
        let accessoryID = try require(inner, TLVType.identifier, "pairing id", step: "pair-setup M6")
        let accessoryLTPK = try require(
            inner, TLVType.publicKey, "long-term public key", step: "pair-setup M6", count: 32)
        let accessorySig = try require(inner, TLVType.signature, "signature", step: "pair-setup M6", count: 64)
        let accessoryX = HAPCrypto.hkdfSHA512(
            key: K, salt: "Pair-Setup-Accessory-Sign-Salt", info: "Pair-Setup-Accessory-Sign-Info")
        guard
            HAPCrypto.verifyEd25519(
                signature: accessorySig, message: accessoryX + accessoryID + accessoryLTPK, publicKey: accessoryLTPK)
        else {
            throw HAPError.badSignature("the accessory's pair-setup signature (M6) is invalid")
        }
        guard let idString = String(bytes: accessoryID, encoding: .utf8), !idString.isEmpty else {
            throw HAPError.badTLV("the accessory's pairing id is not UTF-8 text")
        }
        return HAPPairing(
            accessoryPairingID: idString, accessoryLTPK: accessoryLTPK.hexString, controllerPairingID: controllerID,
            controllerLTSK: ltsk.hexString, controllerLTPK: ltpk.hexString,
            host: connection.host, port: connection.port)
    }

    /// Runs pair-verify, pinning the accessory's long-term key, and switches the connection to
    /// the encrypted session.
    static func pairVerify(_ connection: HAPConnection, pairing: HAPPairing) async throws(HAPError) {
        let shared = try await pairVerify(HTTPPairingChannel(connection: connection), pairing: pairing)
        await connection.enableEncryption(sharedSecret: shared)
    }

    /// Runs pair-verify over `connection`, pinning the accessory's long-term key; returns the
    /// shared secret the session's keys come from.
    static func pairVerify(_ connection: some PairingChannel, pairing: HAPPairing) async throws(HAPError) -> [UInt8] {
        let keys = try pairing.keys()
        let ephemeral = Curve25519.KeyAgreement.PrivateKey()
        let ourPublic = Array(ephemeral.publicKey.rawRepresentation)
        var m1 = TLV8()
        m1.append(TLVType.state, byte: 1)
        m1.append(TLVType.publicKey, ourPublic)
        let m2 = try await exchange(connection, path: connection.verifyPath, m1, step: "pair-verify M2", expectState: 2)
        let theirPublic = try require(m2, TLVType.publicKey, "session public key", step: "pair-verify M2", count: 32)
        let sealed = try require(m2, TLVType.encryptedData, "encrypted data", step: "pair-verify M2")
        let shared = try HAPCrypto.x25519(privateKey: Array(ephemeral.rawRepresentation), peerPublicKey: theirPublic)
        let sessionKey = HAPCrypto.hkdfSHA512(
            key: shared, salt: "Pair-Verify-Encrypt-Salt", info: "Pair-Verify-Encrypt-Info")
        let inner = try TLV8.decode(
            try HAPCrypto.open(sealed, key: sessionKey, nonce: HAPCrypto.nonce(label: "PV-Msg02")))
        let accessoryID = try require(inner, TLVType.identifier, "pairing id", step: "pair-verify M2")
        let signature = try require(inner, TLVType.signature, "signature", step: "pair-verify M2", count: 64)
        guard accessoryID == Array(pairing.accessoryPairingID.utf8) else {
            throw HAPError(
                code: .unknownPairing,
                message:
                    "the accessory at \(connection.host):\(connection.port) is \(String(decoding: accessoryID, as: UTF8.self)), not the paired \(pairing.accessoryPairingID)"
            )
        }
        guard
            HAPCrypto.verifyEd25519(
                signature: signature, message: theirPublic + accessoryID + ourPublic, publicKey: keys.accessoryLTPK)
        else {
            throw HAPError.badSignature(
                "the accessory \(pairing.accessoryPairingID) did not prove the long-term key stored at pairing (a different key is refused; if the accessory was reset, pair again)"
            )
        }
        let controllerID = Array(pairing.controllerPairingID.utf8)
        let ourSignature = try HAPCrypto.signEd25519(ourPublic + controllerID + theirPublic, privateKey: keys.ltsk)
        var sub = TLV8()
        sub.append(TLVType.identifier, controllerID)
        sub.append(TLVType.signature, ourSignature)
        var m3 = TLV8()
        m3.append(TLVType.state, byte: 3)
        m3.append(
            TLVType.encryptedData,
            try HAPCrypto.seal(sub.encoded(), key: sessionKey, nonce: HAPCrypto.nonce(label: "PV-Msg03")))
        do {
            _ = try await exchange(connection, path: connection.verifyPath, m3, step: "pair-verify M4", expectState: 4)
        } catch  where error.code == .authentication {
            throw HAPError(
                code: .unknownPairing,
                message:
                    "the accessory \(pairing.accessoryPairingID) no longer knows this controller (pairing removed on the accessory?); pair again"
            )
        }
        return shared
    }
}

/// What carries pairing's TLVs: HTTP (`/pair-setup`, `/pair-verify`) or CoAP (`/1`, `/2`).
/// `post` returns the body of a successful answer; a refusal is a `HAPError`.
protocol PairingChannel: Sendable {
    var setupPath: String { get }
    var verifyPath: String { get }
    var host: String { get }
    var port: Int { get }
    func post(_ path: String, _ body: [UInt8], step: String) async throws(HAPError) -> [UInt8]
}

struct HTTPPairingChannel: PairingChannel {
    let connection: HAPConnection
    var setupPath: String { "/pair-setup" }
    var verifyPath: String { "/pair-verify" }
    var host: String { connection.host }
    var port: Int { connection.port }

    func post(_ path: String, _ body: [UInt8], step: String) async throws(HAPError) -> [UInt8] {
        let response = try await connection.request(
            "POST", path, body: body, contentType: PairingProtocol.tlvContentType)
        guard response.status == 200 else {
            if response.status == 470 || response.status == 401 {
                throw HAPError(
                    code: .authentication, message: "the accessory refused \(step) (HTTP \(response.status))")
            }
            throw HAPError.proto("the accessory answered \(step) with HTTP \(response.status)")
        }
        return response.body
    }
}
