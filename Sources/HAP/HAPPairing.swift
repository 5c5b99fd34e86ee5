public import Foundation
import HomeModel

// Pairings: what is kept about each paired accessory, and their store in the state directory.

/// What we keep about one paired accessory. Keys are hex. The controller's private key is a
/// secret: `description` leaves it out so it never reaches a log.
public struct HAPPairing: Sendable, Codable, Hashable, CustomStringConvertible {
    /// The accessory's pairing id (its mDNS `id`, e.g. `AA:BB:CC:DD:EE:FF`).
    public var accessoryPairingID: String
    /// The accessory's Ed25519 long-term public key, pinned at pairing.
    public var accessoryLTPK: String
    /// Our controller identity on this accessory (an upper-case UUID string).
    public var controllerPairingID: String
    public var controllerLTSK: String
    public var controllerLTPK: String
    public var host: String
    public var port: Int
    public var name: String?
    public var category: Int?
    public var configurationNumber: Int?
    /// How the accessory is reached: nil in files written before HAP over Thread, which are IP's.
    public var transport: HAPTransport?

    public init(
        accessoryPairingID: String, accessoryLTPK: String, controllerPairingID: String, controllerLTSK: String,
        controllerLTPK: String, host: String, port: Int, name: String? = nil, category: Int? = nil,
        configurationNumber: Int? = nil, transport: HAPTransport? = nil
    ) {
        self.accessoryPairingID = accessoryPairingID
        self.accessoryLTPK = accessoryLTPK
        self.controllerPairingID = controllerPairingID
        self.controllerLTSK = controllerLTSK
        self.controllerLTPK = controllerLTPK
        self.host = host
        self.port = port
        self.name = name
        self.category = category
        self.configurationNumber = configurationNumber
        self.transport = transport
    }

    /// Whether the accessory speaks HAP over CoAP (Thread) rather than HTTP over TCP.
    public var isThread: Bool { transport == .thread }

    public var description: String {
        let thread = isThread ? " (thread)" : ""
        return "HAPPairing(\(accessoryPairingID) at \(host):\(port)\(thread), controller \(controllerPairingID)"
            + "\(name.map { ", \"\($0)\"" } ?? ""))"
    }

    /// The prefix of this accessory's model ids: `hap:<accessory pairing id>`.
    public var idPrefix: String { "hap:\(accessoryPairingID)" }

    func keys() throws(HAPError) -> (accessoryLTPK: [UInt8], ltsk: [UInt8], ltpk: [UInt8]) {
        guard let a = [UInt8](hex: accessoryLTPK), a.count == 32,
            let s = [UInt8](hex: controllerLTSK), s.count == 32,
            let p = [UInt8](hex: controllerLTPK), p.count == 32
        else {
            throw HAPError(
                code: .badPairingFile,
                message: "the pairing for \(accessoryPairingID) has malformed keys (expected 32-byte hex); pair again")
        }
        return (a, s, p)
    }
}

/// How a paired accessory is reached: HAP over IP (HTTP over TCP, `_hap._tcp`) or HAP over
/// Thread (CoAP over UDP/IPv6, `_hap._udp`). Written into the pairing file as `"ip"`/`"thread"`.
public enum HAPTransport: String, Sendable, Codable, Hashable {
    case ip
    case thread
}

/// Pairings in a state directory: one JSON file per accessory, mode 0600 in a 0700 directory,
/// replaced atomically by `AtomicFileWriter` so a crash never leaves half a pairing.
public struct HAPPairingStore: Sendable {
    public let directory: URL

    public init(directory: URL) { self.directory = directory }

    static let prefix = "hap-pairing-"
    /// Whether a file name in the pairing directory is a pairing's.
    public static func isPairingFile(_ name: String) -> Bool {
        name.hasPrefix(prefix) && name.hasSuffix(".json")
    }

    /// The `version` each pairing file carries; files without one are version 1.
    public static let fileVersion = 1

    func fileURL(for accessoryPairingID: String) -> URL {
        let safe = String(accessoryPairingID.map { $0.isLetter || $0.isNumber ? $0 : "-" })
        return directory.appendingPathComponent("\(Self.prefix)\(safe).json")
    }

    public func all() throws(HAPError) -> [HAPPairing] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        } catch {
            if !FileManager.default.fileExists(atPath: directory.path) { return [] }
            throw HAPError(
                code: .io, message: "cannot list the pairings in \(directory.path): \(error.localizedDescription)")
        }
        var result: [HAPPairing] = []
        for name in names.sorted() where Self.isPairingFile(name) {
            result.append(try load(url: directory.appendingPathComponent(name)))
        }
        return result
    }

    public func pairing(id accessoryPairingID: String) throws(HAPError) -> HAPPairing? {
        let url = fileURL(for: accessoryPairingID)
        guard FileManager.default.fileExists(atPath: url.path) else { return nil }
        return try load(url: url)
    }

    func load(url: URL) throws(HAPError) -> HAPPairing {
        do {
            let data = try Data(contentsOf: url)
            do throws(ModelError) {
                try FileVersion.check(Array(data), supported: Self.fileVersion, file: "the pairing file")
            } catch {
                throw HAPError(code: .badPairingFile, message: error.message)
            }
            let pairing = try JSONDecoder().decode(HAPPairing.self, from: data)
            _ = try pairing.keys()
            return pairing
        } catch let e as HAPError {
            throw HAPError(code: .badPairingFile, message: "\(url.path): \(e.message)")
        } catch {
            throw HAPError(code: .badPairingFile, message: "\(url.path) is not a readable pairing file: \(error)")
        }
    }

    public func save(_ pairing: HAPPairing) throws(HAPError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let data: Data
        do { data = try encoder.encode(pairing) } catch {
            throw HAPError(code: .io, message: "cannot encode the pairing: \(error)")
        }
        let target = fileURL(for: pairing.accessoryPairingID)
        do throws(ModelError) {
            try AtomicFileWriter().write(try FileVersion.stamped(Array(data), version: Self.fileVersion), to: target)
        } catch {
            throw HAPError(code: .io, message: "cannot write the pairing file \(target.path): \(error.message)")
        }
    }

    /// Removes the pairing file; removing one that does not exist is not an error.
    public func remove(id accessoryPairingID: String) throws(HAPError) {
        let url = fileURL(for: accessoryPairingID)
        if unlink(url.path) != 0 && errno != ENOENT {
            throw HAPError(code: .io, message: "cannot remove \(url.path): \(String(cString: strerror(errno)))")
        }
    }
}
