import Crypto
import Foundation

/// Thin wrappers over swift-crypto in the shapes HAP uses (raw byte arrays, 12-byte nonces
/// built from labels or counters), so the protocol code reads like the spec.
public enum HAPCrypto {
    /// HKDF-SHA512 with a 32-byte output unless told otherwise.
    public static func hkdfSHA512(key: [UInt8], salt: [UInt8], info: [UInt8], count: Int = 32) -> [UInt8] {
        let derived = HKDF<SHA512>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: key), salt: salt, info: info, outputByteCount: count)
        return derived.withUnsafeBytes { Array($0) }
    }

    public static func hkdfSHA512(key: [UInt8], salt: String, info: String) -> [UInt8] {
        hkdfSHA512(key: key, salt: Array(salt.utf8), info: Array(info.utf8))
    }

    /// A nonce from a label such as `PS-Msg05`: four zero bytes then the 8-byte label.
    public static func nonce(label: String) -> [UInt8] {
        let l = Array(label.utf8)
        return [UInt8](repeating: 0, count: max(0, 12 - l.count)) + l.suffix(12)
    }

    /// ChaCha20-Poly1305: ciphertext followed by the 16-byte tag.
    public static func seal(_ plaintext: [UInt8], key: [UInt8], nonce: [UInt8], aad: [UInt8] = []) throws(HAPError)
        -> [UInt8]
    {
        do {
            let box = try ChaChaPoly.seal(
                plaintext, using: SymmetricKey(data: key), nonce: ChaChaPoly.Nonce(data: nonce), authenticating: aad)
            return Array(box.ciphertext) + Array(box.tag)
        } catch {
            throw HAPError(code: .protocolError, message: "encryption failed: \(error)")
        }
    }

    /// Opens ciphertext+tag; a wrong key, nonce, AAD or tampered data is `bad-frame`.
    public static func open(_ sealed: [UInt8], key: [UInt8], nonce: [UInt8], aad: [UInt8] = []) throws(HAPError)
        -> [UInt8]
    {
        guard sealed.count >= 16 else { throw .badFrame("encrypted data shorter than its 16-byte tag") }
        do {
            let box = try ChaChaPoly.SealedBox(
                nonce: ChaChaPoly.Nonce(data: nonce), ciphertext: sealed.dropLast(16), tag: sealed.suffix(16))
            return Array(try ChaChaPoly.open(box, using: SymmetricKey(data: key), authenticating: aad))
        } catch {
            throw .badFrame("encrypted data failed authentication (wrong key or tampered data)")
        }
    }

    public static func sha512(_ data: [UInt8]) -> [UInt8] { Array(SHA512.hash(data: data)) }

    public static func randomBytes(_ count: Int) -> [UInt8] {
        var g = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: 0...255, using: &g) }
    }

    /// Ed25519 signature check against a raw 32-byte public key.
    public static func verifyEd25519(signature: [UInt8], message: [UInt8], publicKey: [UInt8]) -> Bool {
        guard let key = try? Curve25519.Signing.PublicKey(rawRepresentation: publicKey) else { return false }
        return key.isValidSignature(signature, for: message)
    }

    public static func signEd25519(_ message: [UInt8], privateKey: [UInt8]) throws(HAPError) -> [UInt8] {
        do {
            let key = try Curve25519.Signing.PrivateKey(rawRepresentation: privateKey)
            return Array(try key.signature(for: message))
        } catch {
            throw HAPError(code: .protocolError, message: "signing failed: \(error)")
        }
    }

    public static func ed25519PublicKey(privateKey: [UInt8]) throws(HAPError) -> [UInt8] {
        do {
            return Array(try Curve25519.Signing.PrivateKey(rawRepresentation: privateKey).publicKey.rawRepresentation)
        } catch {
            throw HAPError(code: .badPairingFile, message: "not a valid Ed25519 private key")
        }
    }

    /// X25519 shared secret from our private key and the peer's raw public key.
    public static func x25519(privateKey: [UInt8], peerPublicKey: [UInt8]) throws(HAPError) -> [UInt8] {
        do {
            let priv = try Curve25519.KeyAgreement.PrivateKey(rawRepresentation: privateKey)
            let pub = try Curve25519.KeyAgreement.PublicKey(rawRepresentation: peerPublicKey)
            return try priv.sharedSecretFromKeyAgreement(with: pub).withUnsafeBytes { Array($0) }
        } catch {
            throw HAPError(
                code: .protocolError, message: "the accessory's session public key is not a valid X25519 key")
        }
    }

    public static func x25519PublicKey(privateKey: [UInt8]) throws(HAPError) -> [UInt8] {
        do {
            return Array(
                try Curve25519.KeyAgreement.PrivateKey(rawRepresentation: privateKey).publicKey.rawRepresentation)
        } catch {
            throw HAPError(code: .protocolError, message: "not a valid X25519 private key")
        }
    }
}

extension Array where Element == UInt8 {
    /// Bytes from hex digits (either case); nil for anything else or an odd count.
    public init?(hex: String) {
        let chars = Array(hex.utf8)
        guard chars.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(chars.count / 2)
        var i = 0
        while i < chars.count {
            guard let hi = Self.nibble(chars[i]), let lo = Self.nibble(chars[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        self = out
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case 48...57: c - 48
        case 65...70: c - 55
        case 97...102: c - 87
        default: nil
        }
    }

    var hexString: String { map { String(format: "%02x", $0) }.joined() }
}
