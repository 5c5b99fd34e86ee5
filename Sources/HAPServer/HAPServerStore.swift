import Crypto
public import Foundation
import HAP
public import HomeModel

/// A controller paired with the accessory: its pairing id, its Ed25519 long-term public key and
/// whether it is an admin (admins manage pairings).
public struct HAPControllerPairing: Sendable, Hashable, Codable {
    public var id: String
    public var publicKey: [UInt8]
    public var isAdmin: Bool

    public init(id: String, publicKey: [UInt8], isAdmin: Bool) {
        self.id = id
        self.publicKey = publicKey
        self.isAdmin = isAdmin
    }

    enum CodingKeys: String, CodingKey { case id, publicKey = "public-key", isAdmin = "admin" }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decode(String.self, forKey: .id)
        guard let key = [UInt8](hex: try c.decode(String.self, forKey: .publicKey)), key.count == 32 else {
            throw DecodingError.dataCorruptedError(
                forKey: .publicKey, in: c, debugDescription: "not a 32-byte Ed25519 public key in hex")
        }
        publicKey = key
        isAdmin = try c.decode(Bool.self, forKey: .isAdmin)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id)
        try c.encode(publicKey.map { String(format: "%02x", $0) }.joined(), forKey: .publicKey)
        try c.encode(isAdmin, forKey: .isAdmin)
    }
}

/// What the accessory keeps across restarts, in one file of its state directory (mode 0600: it
/// holds the long-term secret key): its identity, its pairings, the configuration number and
/// the failed pair-setup attempts (so that a restart does not reset the 100-tries limit).
struct HAPServerState: Codable, Sendable, Equatable {
    /// The accessory's pairing id, `XX:XX:XX:XX:XX:XX`.
    var pairingID: String
    /// Ed25519 long-term secret key, hex.
    var longTermSecretKey: String
    var pairings: [HAPControllerPairing] = []
    /// `c#`: 1…65535, bumped when the accessory tree's shape changes.
    var configurationNumber: Int = 1
    /// A digest of the tree's shape when `c#` was last set.
    var configurationDigest: String = ""
    var failedSetupAttempts: Int = 0

    enum CodingKeys: String, CodingKey {
        case pairingID = "pairing-id", longTermSecretKey = "long-term-secret-key", pairings
        case configurationNumber = "configuration-number", configurationDigest = "configuration-digest"
        case failedSetupAttempts = "failed-setup-attempts"
    }

    /// A new identity: a random pairing id and a fresh key pair.
    static func fresh() -> HAPServerState {
        let id = HAPCrypto.randomBytes(6).map { String(format: "%02X", $0) }.joined(separator: ":")
        let key = Curve25519.Signing.PrivateKey()
        return HAPServerState(
            pairingID: id, longTermSecretKey: Array(key.rawRepresentation).map { String(format: "%02x", $0) }.joined())
    }

    var isPaired: Bool { !pairings.isEmpty }
}

/// Reads and writes `hap-accessory.json` in the state directory.
struct HAPServerStore: Sendable {
    let directory: URL
    static let fileName = "hap-accessory.json"
    var file: URL { directory.appendingPathComponent(Self.fileName) }

    /// The stored state, or a fresh identity written at once (so that the pairing id never
    /// changes between a pair-setup and the restart after it).
    func loadOrCreate() throws(HAPServerError) -> HAPServerState {
        if FileManager.default.fileExists(atPath: file.path) {
            let data: Data
            do {
                data = try Data(contentsOf: file)
            } catch {
                throw HAPServerError(.io, "cannot read \(file.path): \(error.localizedDescription)")
            }
            let state: HAPServerState
            do {
                state = try JSONDecoder().decode(HAPServerState.self, from: data)
            } catch {
                throw HAPServerError(.corruptState, "\(file.path) is not a HAP accessory state file: \(error)")
            }
            guard let secret = [UInt8](hex: state.longTermSecretKey), secret.count == 32 else {
                throw HAPServerError(.corruptState, "\(file.path): the long-term secret key is not 32 bytes of hex")
            }
            return state
        }
        let state = HAPServerState.fresh()
        try save(state)
        return state
    }

    func save(_ state: HAPServerState) throws(HAPServerError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let data: Data
        do {
            data = try encoder.encode(state)
        } catch {
            throw HAPServerError(.io, "cannot encode the accessory state: \(error)")
        }
        do {
            try AtomicFileWriter().write(data, to: file)
        } catch {
            throw HAPServerError(.io, "cannot write \(file.path): \(error)")
        }
    }
}

/// An error of the server itself (its state, its socket), not of a peer's request.
public struct HAPServerError: Error, Sendable, Hashable, CustomStringConvertible {
    public var code: ErrorCode
    public var message: String

    init(_ code: ErrorCode, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}

extension ErrorCode {
    static let corruptState = ErrorCode(rawValue: "corrupt-state")
}

enum HAPServerDigest {
    static func sha256Hex(_ bytes: [UInt8]) -> String {
        SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined()
    }
}

/// The accessory's stored identity, for its owner while no server runs on it: who it is (an
/// owner refuses to pair with itself by this id) and its factory reset.
public enum HAPAccessoryIdentity {
    /// The pairing id kept in `directory`, nil when there is none (or it cannot be read).
    public static func pairingID(in directory: URL) -> String? {
        let file = HAPServerStore(directory: directory).file
        guard let data = try? Data(contentsOf: file),
            let state = try? JSONDecoder().decode(HAPServerState.self, from: data)
        else { return nil }
        return state.pairingID
    }

    /// The pairings kept in `directory` (none when there is no state).
    public static func pairings(in directory: URL) -> [HAPControllerPairing] {
        let file = HAPServerStore(directory: directory).file
        guard let data = try? Data(contentsOf: file),
            let state = try? JSONDecoder().decode(HAPServerState.self, from: data)
        else { return [] }
        return state.pairings
    }

    /// Forgets the identity, its pairings, `c#` and the failed tries: the next server on
    /// `directory` starts as a new accessory (HAP asks for a new pairing id after a reset, so
    /// that controllers do not take it for the one they knew). Only while no server runs on it.
    public static func reset(in directory: URL) throws(HAPServerError) {
        let file = HAPServerStore(directory: directory).file
        guard FileManager.default.fileExists(atPath: file.path) else { return }
        do {
            try FileManager.default.removeItem(at: file)
        } catch {
            throw HAPServerError(.io, "cannot remove \(file.path): \(error.localizedDescription)")
        }
    }
}
