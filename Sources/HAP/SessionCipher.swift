/// The encrypted framing after pair-verify: each frame is a 2-byte little-endian length
/// (also the AAD), at most 1024 bytes of ChaCha20-Poly1305 ciphertext and a 16-byte tag, with a
/// 64-bit nonce counter per direction.
public struct HAPSessionCipher: Sendable {
    public static let maxFrameLength = 1024

    let writeKey: [UInt8]
    let readKey: [UInt8]
    var writeCounter: UInt64 = 0
    var readCounter: UInt64 = 0
    private var inbound: [UInt8] = []

    /// Keys from the pair-verify shared secret; `isController` picks which key is ours to write.
    public init(sharedSecret: [UInt8], isController: Bool = true) {
        let c2a = HAPCrypto.hkdfSHA512(key: sharedSecret, salt: "Control-Salt", info: "Control-Write-Encryption-Key")
        let a2c = HAPCrypto.hkdfSHA512(key: sharedSecret, salt: "Control-Salt", info: "Control-Read-Encryption-Key")
        writeKey = isController ? c2a : a2c
        readKey = isController ? a2c : c2a
    }

    public mutating func encrypt(_ plaintext: [UInt8]) throws(HAPError) -> [UInt8] {
        var out: [UInt8] = []
        var offset = 0
        repeat {
            let n = min(Self.maxFrameLength, plaintext.count - offset)
            let aad: [UInt8] = [UInt8(n & 0xFF), UInt8(n >> 8)]
            out += aad
            out += try HAPCrypto.seal(
                Array(plaintext[offset..<offset + n]), key: writeKey, nonce: HAPCrypto.nonce(counter: writeCounter),
                aad: aad)
            writeCounter += 1
            offset += n
        } while offset < plaintext.count
        return out
    }

    /// Feeds received bytes; returns the plaintext of every complete frame.
    public mutating func decrypt(_ bytes: [UInt8]) throws(HAPError) -> [UInt8] {
        inbound.append(contentsOf: bytes)
        var out: [UInt8] = []
        var consumed = 0
        while inbound.count - consumed >= 2 {
            let length = Int(inbound[consumed]) | Int(inbound[consumed + 1]) << 8
            guard length <= Self.maxFrameLength else {
                throw HAPError(
                    code: .oversizedFrame,
                    message: "the accessory sent a frame of \(length) bytes; at most \(Self.maxFrameLength) are allowed"
                )
            }
            let total = 2 + length + 16
            guard inbound.count - consumed >= total else { break }
            let aad = Array(inbound[consumed..<consumed + 2])
            let sealed = Array(inbound[consumed + 2..<consumed + total])
            do {
                out += try HAPCrypto.open(sealed, key: readKey, nonce: HAPCrypto.nonce(counter: readCounter), aad: aad)
            } catch {
                throw .badFrame("frame \(readCounter) from the accessory failed authentication")
            }
            readCounter += 1
            consumed += total
        }
        inbound.removeFirst(consumed)
        return out
    }
}
