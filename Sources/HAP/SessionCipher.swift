import CSodium
import Foundation
public import NIOCore

/// The encrypted framing after pair-verify: each frame is a 2-byte little-endian length
/// (also the AAD), at most 1024 bytes of ChaCha20-Poly1305 ciphertext and a 16-byte tag, with a
/// 64-bit nonce counter per direction.
///
/// The connection seals and opens through the buffer-based methods, once per request each way:
/// the keys are made once, a frame is sealed in place in the outgoing `ByteBuffer` and opened in
/// place at the end of the parser's bytes, by libsodium: no allocation per frame.
public struct HAPSessionCipher: Sendable {
    public static let maxFrameLength = 1024
    /// ChaCha20-Poly1305's tag.
    static let tagLength = Int(crypto_aead_chacha20poly1305_ietf_ABYTES)

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
        writeKey = SessionKey(isController ? c2a : a2c)
        readKey = SessionKey(isController ? a2c : c2a)
    }

    public mutating func encrypt(_ plaintext: [UInt8]) throws(HAPError) -> [UInt8] {
        var out = ByteBuffer()
        try encrypt(plaintext, into: &out)
        return Array(out.readableBytesView)
    }

    /// Seals `plaintext` as frames written to the end of `out` (a connection's outgoing buffer).
    public mutating func encrypt(_ plaintext: [UInt8], into out: inout ByteBuffer) throws(HAPError) {
        // Array's closure rethrows untyped errors; a Result carries the typed one out.
        try plaintext.withUnsafeBytes { raw in Result { () throws(HAPError) in try encrypt(raw, into: &out) } }.get()
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
            let counter = writeCounter
            out.writeInteger(UInt16(n), endianness: .little)
            // The frame after its length: ciphertext, then tag, sealed where it will be sent.
            let sealed = out.writeWithUnsafeMutableBytes(minimumWritableBytes: n + Self.tagLength) { frame in
                let result = Self.withAADAndNonce(length: n, counter: counter) { aad, nonce in
                    writeKey.withBytes { key in
                        crypto_aead_chacha20poly1305_ietf_encrypt_detached(
                            frame.baseAddress!.assumingMemoryBound(to: UInt8.self),
                            frame.baseAddress!.assumingMemoryBound(to: UInt8.self) + n, nil,
                            plaintext.baseAddress.map { $0.assumingMemoryBound(to: UInt8.self) + offset }, UInt64(n),
                            aad, 2, nil, nonce, key)
                    }
                }
                return result == 0 ? n + Self.tagLength : 0
            }
            guard sealed == n + Self.tagLength else {
                throw HAPError(code: .protocolError, message: "encryption failed")
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

    /// Opens the frame whose length prefix is at `start` of `inbound`, appending its plaintext to
    /// `plain`; `plain` is as it was when the frame fails.
    private func open(frameAt start: Int, length: Int, appendingTo plain: inout [UInt8]) throws(HAPError) {
        let counter = readCounter
        let before = plain.count
        plain.append(contentsOf: repeatElement(0, count: length))
        let result = Self.withAADAndNonce(length: length, counter: counter) { aad, nonce in
            plain.withUnsafeMutableBufferPointer { out in
                inbound.withUnsafeBufferPointer { src in
                    readKey.withBytes { key in
                        crypto_aead_chacha20poly1305_ietf_decrypt_detached(
                            out.baseAddress! + before, nil, src.baseAddress! + start + 2, UInt64(length),
                            src.baseAddress! + start + 2 + length, aad, 2, nonce, key)
                    }
                }
            }
        }
        guard result == 0 else {
            plain.removeLast(length)
            throw .badFrame("frame \(counter) from the accessory failed authentication")
        }
    }

    /// A frame's AAD (its length, 2 bytes little-endian) and nonce as the C call takes them, valid
    /// for `body` only.
    static func withAADAndNonce<R>(
        length: Int, counter: UInt64, _ body: (UnsafePointer<UInt8>, UnsafePointer<UInt8>) -> R
    ) -> R {
        withUnsafeBytes(of: UInt16(length).littleEndian) { aad in
            withUnsafeBytes(of: nonceBytes(counter)) { nonce in
                body(aad.bindMemory(to: UInt8.self).baseAddress!, nonce.bindMemory(to: UInt8.self).baseAddress!)
            }
        }
    }

    /// HAP's nonce for frame `counter`: four zero bytes, then the counter little-endian (12
    /// bytes: three 32-bit words, so no padding).
    static func nonceBytes(_ counter: UInt64) -> (UInt32, UInt32, UInt32) {
        (0, UInt32(truncatingIfNeeded: counter).littleEndian, UInt32(truncatingIfNeeded: counter >> 32).littleEndian)
    }

}

/// A session key, made once per connection and direction: 32 bytes of its own, wiped when the
/// session ends. Immutable after `init`, so it can be shared (`Sendable`).
final class SessionKey: @unchecked Sendable {
    private let storage: UnsafeMutableRawBufferPointer

    init(_ bytes: [UInt8]) {
        precondition(bytes.count == Int(crypto_aead_chacha20poly1305_ietf_KEYBYTES), "a session key is 32 bytes")
        Sodium.ready()
        storage = .allocate(byteCount: bytes.count, alignment: 16)
        storage.copyBytes(from: bytes)
    }

    deinit {
        sodium_memzero(storage.baseAddress, storage.count)
        storage.deallocate()
    }

    func withBytes<R>(_ body: (UnsafePointer<UInt8>) -> R) -> R {
        body(UnsafePointer(storage.baseAddress!.assumingMemoryBound(to: UInt8.self)))
    }
}

/// libsodium picks its fastest implementations for this CPU in `sodium_init`, once per process
/// (it may be called again; it is safe from any thread).
enum Sodium {
    private static let initialised: Bool = sodium_init() >= 0
    static func ready() { precondition(initialised, "libsodium could not be initialised") }
}
