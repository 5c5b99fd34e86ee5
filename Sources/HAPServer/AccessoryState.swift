import Crypto
import Foundation
import HAP
import Synchronization

/// What a discovery announcement and the owner need to know of the server: the pairing id
/// (`id`), the configuration number (`c#`) and the status flag (`sf`: 1 while unpaired).
public struct HAPServerStatus: Sendable, Hashable {
    public var pairingID: String
    public var configurationNumber: Int
    public var isPaired: Bool
    public var pairingCount: Int
    /// `sf` of the `_hap._tcp` TXT record.
    public var statusFlags: Int { isPaired ? 0 : 1 }
}

/// The TLV error codes an accessory answers pairing requests with (HAP spec table 5-5).
enum TLVErrorCode: UInt8, Sendable {
    case unknown = 1, authentication = 2, backoff = 3, maxPeers = 4, maxTries = 5, unavailable = 6, busy = 7
}

/// The accessory's identity and pairings, shared by every connection: one lock around the
/// persisted state and the one pair-setup that may be under way.
///
/// Every change is written to the state file before it is taken in memory, so a pairing that
/// was confirmed to a controller survives a restart, and one that could not be saved was never
/// confirmed.
final class AccessoryState: Sendable {
    static let maxFailedSetupAttempts = 100
    /// HAP's limit of pairings an accessory keeps.
    static let maxPairings = 16

    let setupCode: HAPSetupCode
    let pairingID: String
    let signingKey: SigningKey
    private let store: HAPServerStore
    private let onStatusChange: @Sendable (HAPServerStatus) -> Void

    private struct Mutable {
        var persisted: HAPServerState
        /// The connection whose pair-setup is under way.
        var setupOwner: UInt64?
    }

    private let mutable: Mutex<Mutable>

    init(
        store: HAPServerStore, setupCode: HAPSetupCode,
        onStatusChange: @escaping @Sendable (HAPServerStatus) -> Void = { _ in }
    ) throws(HAPServerError) {
        let state = try store.loadOrCreate()
        guard let secret = [UInt8](hex: state.longTermSecretKey),
            let key = try? Curve25519.Signing.PrivateKey(rawRepresentation: secret)
        else { throw HAPServerError(.corruptState, "the stored long-term key is not an Ed25519 key") }
        self.store = store
        self.setupCode = setupCode
        self.pairingID = state.pairingID
        self.signingKey = SigningKey(key: key)
        self.onStatusChange = onStatusChange
        mutable = Mutex(Mutable(persisted: state))
    }

    var status: HAPServerStatus { mutable.withLock { Self.status(of: $0.persisted) } }
    var isPaired: Bool { mutable.withLock { $0.persisted.isPaired } }
    var pairings: [HAPControllerPairing] { mutable.withLock { $0.persisted.pairings } }
    var failedSetupAttempts: Int { mutable.withLock { $0.persisted.failedSetupAttempts } }

    func pairing(id: String) -> HAPControllerPairing? {
        mutable.withLock { $0.persisted.pairings.first { $0.id == id } }
    }

    private static func status(of state: HAPServerState) -> HAPServerStatus {
        HAPServerStatus(
            pairingID: state.pairingID, configurationNumber: state.configurationNumber, isPaired: state.isPaired,
            pairingCount: state.pairings.count)
    }

    // MARK: Pair-setup

    /// Takes the pair-setup for `connection`, or says why not: paired already (Unavailable),
    /// too many failures (MaxTries), another connection's under way (Busy). The same connection
    /// may start again.
    func claimPairSetup(connection: UInt64) -> TLVErrorCode? {
        mutable.withLock { m in
            if m.persisted.isPaired { return .unavailable }
            if m.persisted.failedSetupAttempts >= Self.maxFailedSetupAttempts { return .maxTries }
            if let owner = m.setupOwner, owner != connection { return .busy }
            m.setupOwner = connection
            return nil
        }
    }

    func releasePairSetup(connection: UInt64) {
        mutable.withLock { m in
            if m.setupOwner == connection { m.setupOwner = nil }
        }
    }

    /// Counts a wrong setup code, kept across restarts.
    func recordFailedSetup() {
        mutable.withLock { m in
            var next = m.persisted
            next.failedSetupAttempts += 1
            // Counted in memory even when the file cannot be written: the limit must hold.
            try? store.save(next)
            m.persisted = next
        }
    }

    // MARK: Pairings

    /// Adds (or, for a known id with the same key, updates the permission of) a pairing.
    /// `firstAdmin` is pair-setup's: refused if another controller paired in the meantime.
    func addPairing(_ pairing: HAPControllerPairing, firstAdmin: Bool = false) -> TLVErrorCode? {
        let result: (TLVErrorCode?, HAPServerStatus?) = mutable.withLock { m in
            var next = m.persisted
            if firstAdmin && next.isPaired { return (.unavailable, nil) }
            if let index = next.pairings.firstIndex(where: { $0.id == pairing.id }) {
                guard next.pairings[index].publicKey == pairing.publicKey else { return (.unknown, nil) }
                next.pairings[index].isAdmin = pairing.isAdmin
            } else {
                guard next.pairings.count < Self.maxPairings else { return (.maxPeers, nil) }
                next.pairings.append(pairing)
            }
            if firstAdmin { next.failedSetupAttempts = 0 }
            do { try store.save(next) } catch { return (.unknown, nil) }
            let wasPaired = m.persisted.isPaired
            m.persisted = next
            return (nil, wasPaired ? nil : Self.status(of: next))
        }
        if let changed = result.1 { onStatusChange(changed) }
        return result.0
    }

    enum Removal: Equatable {
        /// The pairing is gone (or never was): close its sessions.
        case removed
        /// It was the last admin: every pairing is gone, close every session.
        case removedAll
        case failed
    }

    /// Removes a pairing; removing the last admin removes them all (HAP spec 5.11.2).
    func removePairing(id: String) -> Removal {
        let result: (Removal, HAPServerStatus?) = mutable.withLock { m in
            var next = m.persisted
            next.pairings.removeAll { $0.id == id }
            let removedAll = !next.pairings.contains(where: \.isAdmin)
            if removedAll { next.pairings = [] }
            if next == m.persisted { return (.removed, nil) }
            do { try store.save(next) } catch { return (.failed, nil) }
            let wasPaired = m.persisted.isPaired
            m.persisted = next
            return (removedAll ? .removedAll : .removed, wasPaired && !next.isPaired ? Self.status(of: next) : nil)
        }
        if let changed = result.1 { onStatusChange(changed) }
        return result.0
    }

    // MARK: Configuration number

    /// Bumps `c#` when the tree's shape (`digest`) differs from the one it was last set for;
    /// the new status when `c#` changed.
    func updateConfiguration(digest: String) throws(HAPServerError) -> HAPServerStatus? {
        let result: Result<HAPServerStatus?, HAPServerError> = mutable.withLock { m in
            guard m.persisted.configurationDigest != digest else { return .success(nil) }
            var next = m.persisted
            // The first digest of a fresh state keeps c# 1.
            if !next.configurationDigest.isEmpty {
                next.configurationNumber = next.configurationNumber >= 65535 ? 1 : next.configurationNumber + 1
            }
            next.configurationDigest = digest
            do throws(HAPServerError) { try store.save(next) } catch { return .failure(error) }
            let changed = next.configurationNumber != m.persisted.configurationNumber
            m.persisted = next
            return .success(changed ? Self.status(of: next) : nil)
        }
        let changed = try result.get()
        if let changed { onStatusChange(changed) }
        return changed
    }
}

/// The accessory's Ed25519 long-term key. swift-crypto's key is an immutable value this version
/// does not mark `Sendable`.
struct SigningKey: @unchecked Sendable {
    let key: Curve25519.Signing.PrivateKey
    var publicKey: [UInt8] { Array(key.publicKey.rawRepresentation) }

    func sign(_ message: [UInt8]) -> [UInt8] {
        // Signing with a valid Ed25519 key only fails if the system's randomness does.
        (try? Array(key.signature(for: message))) ?? []
    }
}
