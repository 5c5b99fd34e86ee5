public import BigInt
import Foundation

/// SRP-6a as HAP uses it: RFC 5054's 3072-bit group, generator 5, SHA-512, username
/// `Pair-Setup`. Every number that goes into a hash is padded to the group size (384 bytes)
/// except where the spec hashes the bytes as sent (A in M and HAMK), and K is the full 64-byte
/// digest; accessories that drop leading zeros fail about one pairing in 80, which is their bug.
public enum SRP {
    public static let N = BigUInt(
        "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DD"
            + "EF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED"
            + "EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF0598DA48361C55D39A69163FA8FD24CF5F"
            + "83655D23DCA3AD961C62F356208552BB9ED529077096966D670C354E4ABC9804F1746C08CA18217C32905E462E36CE3B"
            + "E39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF6955817183995497CEA956AE515D2261898FA0510"
            + "15728E5A8AAAC42DAD33170D04507A33A85521ABDF1CBA64ECFB850458DBEF0A8AEA71575D060C7DB3970F85A6E1E4C7"
            + "ABF5AE8CDB0933D71E8C94E04A25619DCEE3D2261AD2EE6BF12FFA06D98A0864D87602733EC86A64521F2B18177B200C"
            + "BBE117577A615D6C770988C0BAD946E208E24FA074E5AB3143DB5BFCE0FD108E4B82D120A93AD2CAFFFFFFFFFFFFFFFF",
        radix: 16)!
    public static let g = BigUInt(5)
    static let montgomery = MontgomeryModulus(N)

    /// base^exponent mod N.
    public static func powMod(_ base: BigUInt, _ exponent: BigUInt) -> BigUInt { montgomery.power(base, exponent) }
    public static let length = 384
    public static let username = Array("Pair-Setup".utf8)

    /// Big-endian bytes left-padded with zeros to `length`.
    public static func pad(_ n: BigUInt, to length: Int = SRP.length) -> [UInt8] {
        let raw = Array(n.serialize())
        return raw.count >= length ? raw : [UInt8](repeating: 0, count: length - raw.count) + raw
    }

    public static func pad(_ raw: [UInt8], to length: Int = SRP.length) -> [UInt8] {
        raw.count >= length ? raw : [UInt8](repeating: 0, count: length - raw.count) + raw
    }

    static func H(_ parts: [UInt8]...) -> [UInt8] { HAPCrypto.sha512(parts.flatMap { $0 }) }
    static func int(_ bytes: [UInt8]) -> BigUInt { BigUInt(Data(bytes)) }

    /// k = H(N | PAD(g))
    public static var k: BigUInt { int(H(pad(N), pad(g))) }

    /// x = H(s | H(I | ":" | p))
    public static func x(salt: [UInt8], password: String) -> BigUInt {
        int(H(salt, H(username, Array(":".utf8), Array(password.utf8))))
    }

    public static func verifier(salt: [UInt8], password: String) -> BigUInt {
        powMod(g, x(salt: salt, password: password))
    }

    /// u = H(PAD(A) | PAD(B))
    public static func u(A: [UInt8], B: [UInt8]) -> BigUInt { int(H(pad(A), pad(B))) }

    /// K = H(PAD(S)): always the 64-byte digest.
    public static func K(S: BigUInt) -> [UInt8] { H(pad(S)) }

    /// M = H(H(N) xor H(g) | H(I) | s | A | PAD(B) | K), A as sent on the wire.
    public static func M(salt: [UInt8], A: [UInt8], B: [UInt8], K: [UInt8]) -> [UInt8] {
        let hN = H(Array(N.serialize()))
        let hg = H(Array(g.serialize()))
        let group = zip(hN, hg).map { $0 ^ $1 }
        return H(group, H(username), salt, A, pad(B), K)
    }

    /// HAMK = H(A | M | K), A as sent.
    public static func HAMK(A: [UInt8], M: [UInt8], K: [UInt8]) -> [UInt8] { H(A, M, K) }

    /// Server side, for tests and the known-answer vector: B = k·v + g^b.
    public static func serverB(b: BigUInt, verifier v: BigUInt) -> BigUInt {
        (k * v + powMod(g, b)) % N
    }

    /// Server side premaster secret S = (A · v^u)^b.
    public static func serverS(A: [UInt8], B: [UInt8], b: BigUInt, verifier v: BigUInt) -> BigUInt {
        let uu = u(A: A, B: B)
        return powMod((int(A) * powMod(v, uu)) % N, b)
    }

    /// The client's side of one exchange.
    public struct Client: Sendable {
        public let a: BigUInt
        /// A as we send it: always 384 bytes.
        public let A: [UInt8]

        public init(a: BigUInt? = nil) {
            // 256 bits of secret exponent is what RFC 5054 and HAP's reference use.
            let secret = a ?? SRP.int(HAPCrypto.randomBytes(32))
            self.a = secret
            self.A = SRP.pad(SRP.powMod(SRP.g, secret))
        }

        public struct Proof: Sendable {
            public var M: [UInt8]
            public var K: [UInt8]
            public var expectedHAMK: [UInt8]
        }

        /// Computes the session key and our proof from the accessory's salt and B.
        public func proof(salt: [UInt8], B: [UInt8], password: String) throws(HAPError) -> Proof {
            let bInt = SRP.int(B)
            guard B.count <= SRP.length, bInt % SRP.N != 0 else {
                throw .proto("the accessory's SRP public key B is invalid")
            }
            let uu = SRP.u(A: A, B: B)
            guard uu != 0 else { throw .proto("SRP scrambling parameter u is zero") }
            let xx = SRP.x(salt: salt, password: password)
            let kgx = (SRP.k * SRP.powMod(SRP.g, xx)) % SRP.N
            let base = (bInt % SRP.N + SRP.N - kgx) % SRP.N
            let S = SRP.powMod(base, a + uu * xx)
            let K = SRP.K(S: S)
            let M = SRP.M(salt: salt, A: A, B: B, K: K)
            return Proof(M: M, K: K, expectedHAMK: SRP.HAMK(A: A, M: M, K: K))
        }
    }
}
