// The encryption of a HAP-over-CoAP session (issue 42): after pair-verify, every request
// payload, every response and every event is sealed with ChaCha20-Poly1305, no AAD, nonce
// 4 zero bytes + the direction's 64-bit little-endian counter. Keys come from the
// pair-verify shared secret by HKDF-SHA512 (aiohomekit's `connection.py`, `do_pair_verify`).
//
// Thread is lossy and CoAP retransmits, so a response can be for a counter a little off the
// one expected. Opening tries the expected counter, then up to five back, up to five ahead,
// and zero (an accessory that restarted its session), as aiohomekit does; none opening is a
// `counterFailure`, told apart from framing errors.

/// The three keys of a session.
public struct CoAPSessionKeys: Sendable, Hashable {
    /// Accessory → controller responses (`Control-Salt`, `Control-Read-Encryption-Key`).
    public var controlRead: [UInt8]
    /// Controller → accessory requests (`Control-Salt`, `Control-Write-Encryption-Key`).
    public var controlWrite: [UInt8]
    /// Accessory → controller events (`Event-Salt`, `Event-Read-Encryption-Key`).
    public var eventRead: [UInt8]

    public init(sharedSecret: [UInt8]) {
        controlRead = HAPCrypto.hkdfSHA512(key: sharedSecret, salt: "Control-Salt", info: "Control-Read-Encryption-Key")
        controlWrite = HAPCrypto.hkdfSHA512(
            key: sharedSecret, salt: "Control-Salt", info: "Control-Write-Encryption-Key")
        eventRead = HAPCrypto.hkdfSHA512(key: sharedSecret, salt: "Event-Salt", info: "Event-Read-Encryption-Key")
    }
}

/// One direction: a key and its counter.
public struct CoAPCipherDirection: Sendable {
    public let key: [UInt8]
    /// The counter the next message uses.
    public private(set) var counter: UInt64 = 0
    /// How far back and ahead `open` looks (aiohomekit: 5).
    public static let window: UInt64 = 5

    public init(key: [UInt8], counter: UInt64 = 0) {
        self.key = key
        self.counter = counter
    }

    public static func nonce(_ counter: UInt64) -> [UInt8] {
        [0, 0, 0, 0] + HAPBLEValue.bytesLE(counter, width: 8)
    }

    public mutating func seal(_ plaintext: [UInt8]) -> [UInt8] {
        // A 32-byte key and 12-byte nonce: swift-crypto's seal cannot fail on them.
        let sealed = (try? HAPCrypto.seal(plaintext, key: key, nonce: Self.nonce(counter))) ?? []
        counter &+= 1
        return sealed
    }

    /// The counters `open` tries, in order, for the expected one.
    public static func candidates(expected: UInt64) -> [UInt64] {
        var list = [expected]
        list += (1...window).compactMap { expected >= $0 ? expected - $0 : nil }
        list += (1...window).map { expected &+ $0 }
        if !list.contains(0) { list.append(0) }
        return list
    }

    /// Opens `sealed`; the counter moves past the one that opened it, which is returned.
    public mutating func open(_ sealed: [UInt8]) throws(CoAPCodecError) -> (plaintext: [UInt8], counter: UInt64) {
        guard sealed.count >= 16 else { throw .sealedTooShort(length: sealed.count) }
        let tried = Self.candidates(expected: counter)
        for n in tried {
            if let plain = try? HAPCrypto.open(sealed, key: key, nonce: Self.nonce(n)) {
                counter = n &+ 1
                return (plain, n)
            }
        }
        throw .counterFailure(expected: counter, tried: tried)
    }
}

/// A session's cipher state on one side.
public struct CoAPSessionCipher: Sendable {
    public enum Role: Sendable { case controller, accessory }

    public let role: Role
    /// What this side sends: requests (controller) or responses (accessory).
    public var outgoing: CoAPCipherDirection
    /// What this side receives: responses (controller) or requests (accessory).
    public var incoming: CoAPCipherDirection
    /// Events, received by a controller and sent by an accessory.
    public var events: CoAPCipherDirection

    public init(keys: CoAPSessionKeys, role: Role) {
        self.role = role
        switch role {
        case .controller:
            outgoing = CoAPCipherDirection(key: keys.controlWrite)
            incoming = CoAPCipherDirection(key: keys.controlRead)
        case .accessory:
            outgoing = CoAPCipherDirection(key: keys.controlRead)
            incoming = CoAPCipherDirection(key: keys.controlWrite)
        }
        events = CoAPCipherDirection(key: keys.eventRead)
    }

    public mutating func seal(_ plaintext: [UInt8]) -> [UInt8] { outgoing.seal(plaintext) }

    /// Opens a received payload. When it opened at counter 0 though another was expected, the
    /// peer started over, and so does the outgoing counter (aiohomekit's last resort).
    public mutating func open(_ sealed: [UInt8]) throws(CoAPCodecError) -> [UInt8] {
        let expected = incoming.counter
        let (plain, n) = try incoming.open(sealed)
        if n == 0, expected > CoAPCipherDirection.window { outgoing = CoAPCipherDirection(key: outgoing.key) }
        return plain
    }

    public mutating func sealEvent(_ plaintext: [UInt8]) -> [UInt8] { events.seal(plaintext) }
    public mutating func openEvent(_ sealed: [UInt8]) throws(CoAPCodecError) -> [UInt8] {
        try events.open(sealed).plaintext
    }
}
