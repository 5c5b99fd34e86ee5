import Crypto
import Foundation
import NIOCore

/// The encrypted framing after pair-verify: each frame is a 2-byte little-endian length
/// (also the AAD), at most 1024 bytes of ChaCha20-Poly1305 ciphertext and a 16-byte tag, with a
/// 64-bit nonce counter per direction.
///
/// The connection seals and opens through the buffer-based methods, once per request each way:
/// the keys are made once, a frame is sealed straight into the outgoing `ByteBuffer` and opened
/// into the parser's bytes, and the only arrays are the ones swift-crypto itself returns.
public struct HAPSessionCipher: Sendable {
    public static let maxFrameLength = 1024
    /// ChaCha20-Poly1305's nonce and tag sizes (swift-crypto keeps its own constants internal).
    static let nonceLength = 12
    static let tagLength = 16

    let writeKey: SessionKey
    let readKey: SessionKey
    var writeCounter: UInt64 = 0
    var readCounter: UInt64 = 0
    /// Received bytes not yet a whole frame; keeps its capacity between reads.
    private var inbound: [UInt8] = []

    /// Keys from the pair-verify shared secret; `isController` picks which key is ours to write.
    public init(sharedSecret: [UInt8], isController: Bool = true) {
        let c2a = HAPCrypto.hkdfSHA512(key: sharedSecret, salt: "Control-Salt", info: "Control-Write-Encryption-Key")
        let a2c = HAPCrypto.hkdfSHA512(key: sharedSecret, salt: "Control-Salt", info: "Control-Read-Encryption-Key")
        writeKey = SessionKey(SymmetricKey(data: isController ? c2a : a2c))
        readKey = SessionKey(SymmetricKey(data: isController ? a2c : c2a))
    }

    public mutating func encrypt(_ plaintext: [UInt8]) throws(HAPError) -> [UInt8] {
        var out = ByteBuffer()
        // Array's closure rethrows untyped errors; a Result carries the typed one out.
        try plaintext.withUnsafeBytes { raw in Result { () throws(HAPError) in try encrypt(raw, into: &out) } }.get()
        return Array(out.readableBytesView)
    }

    /// Feeds received bytes; returns the plaintext of every complete frame.
    public mutating func decrypt(_ bytes: [UInt8]) throws(HAPError) -> [UInt8] {
        var out: [UInt8] = []
        try bytes.withUnsafeBytes { raw in Result { () throws(HAPError) in try decrypt(raw, appendingTo: &out) } }.get()
        return out
    }

    /// Seals `plaintext` as frames of at most 1024 bytes, written to `out`.
    mutating func encrypt(_ plaintext: UnsafeRawBufferPointer, into out: inout ByteBuffer) throws(HAPError) {
        var offset = 0
        repeat {
            let n = min(Self.maxFrameLength, plaintext.count - offset)
            var aad = UInt16(n).littleEndian
            let sealed: ChaChaPoly.SealedBox
            do {
                sealed = try withUnsafeBytes(of: &aad) { aadBytes in
                    try ChaChaPoly.seal(
                        UnsafeRawBufferPointer(rebasing: plaintext[offset..<offset + n]), using: writeKey.key,
                        nonce: Self.nonce(writeCounter), authenticating: aadBytes)
                }
            } catch {
                throw HAPError(code: .protocolError, message: "encryption failed: \(error)")
            }
            out.writeInteger(UInt16(n), endianness: .little)
            // `combined` is nonce, ciphertext, tag: the frame is all but the nonce.
            sealed.combined.withUnsafeBytes {
                out.writeBytes(UnsafeRawBufferPointer(rebasing: $0[Self.nonceLength...]))
            }
            writeCounter += 1
            offset += n
        } while offset < plaintext.count
    }

    /// Takes received bytes and appends the plaintext of every frame now complete to `plain`;
    /// the rest of a frame waits for the next bytes.
    mutating func decrypt(_ bytes: UnsafeRawBufferPointer, appendingTo plain: inout [UInt8]) throws(HAPError) {
        inbound.append(contentsOf: bytes)
        var consumed = 0
        defer {
            if consumed == inbound.count {
                inbound.removeAll(keepingCapacity: true)
            } else if consumed > 0 {
                inbound.removeFirst(consumed)
            }
        }
        while inbound.count - consumed >= 2 {
            let length = Int(inbound[consumed]) | Int(inbound[consumed + 1]) << 8
            guard length <= Self.maxFrameLength else {
                throw HAPError(
                    code: .oversizedFrame,
                    message: "the accessory sent a frame of \(length) bytes; at most \(Self.maxFrameLength) are allowed"
                )
            }
            let total = 2 + length + Self.tagLength
            guard inbound.count - consumed >= total else { break }
            try open(frameAt: consumed, length: length, appendingTo: &plain)
            readCounter += 1
            consumed += total
        }
    }

    /// Opens the frame whose length prefix is at `start` of `inbound`.
    private func open(frameAt start: Int, length: Int, appendingTo plain: inout [UInt8]) throws(HAPError) {
        // swift-crypto opens a sealed box made of nonce, ciphertext and tag in one `Data`; building
        // it whole (rather than from the three parts) is one copy and no generic slow path.
        var combined = Data(count: Self.nonceLength + length + Self.tagLength)
        let counter = readCounter
        combined.withUnsafeMutableBytes { dst in
            withUnsafeBytes(of: Self.nonceBytes(counter)) { dst.copyMemory(from: $0) }
            inbound.withUnsafeBytes { src in
                let frame = UnsafeRawBufferPointer(rebasing: src[start + 2..<start + 2 + length + Self.tagLength])
                UnsafeMutableRawBufferPointer(rebasing: dst[Self.nonceLength...]).copyMemory(from: frame)
            }
        }
        var aad = UInt16(length).littleEndian
        do {
            let opened = try withUnsafeBytes(of: &aad) { aadBytes in
                try ChaChaPoly.open(
                    ChaChaPoly.SealedBox(combined: combined), using: readKey.key, authenticating: aadBytes)
            }
            opened.withUnsafeBytes { plain.append(contentsOf: $0) }
        } catch {
            throw .badFrame("frame \(counter) from the accessory failed authentication")
        }
    }

    /// HAP's nonce for frame `counter`: four zero bytes, then the counter little-endian (12
    /// bytes: three 32-bit words, so no padding).
    static func nonceBytes(_ counter: UInt64) -> (UInt32, UInt32, UInt32) {
        (0, UInt32(truncatingIfNeeded: counter).littleEndian, UInt32(truncatingIfNeeded: counter >> 32).littleEndian)
    }

    static func nonce(_ counter: UInt64) throws -> ChaChaPoly.Nonce {
        try withUnsafeBytes(of: nonceBytes(counter)) { try ChaChaPoly.Nonce(data: $0) }
    }
}

/// A session key made once per connection and direction. swift-crypto's `SymmetricKey` is an
/// immutable value (its bytes are never changed after `init`) that this version does not mark
/// `Sendable`; the cipher, which is, holds it through this.
struct SessionKey: @unchecked Sendable {
    let key: SymmetricKey
    init(_ key: SymmetricKey) { self.key = key }
}
