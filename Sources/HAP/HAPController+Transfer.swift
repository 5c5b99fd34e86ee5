import Crypto
import Foundation
import HomeModel

// Pairings moved, not reset: HomeMQTT added to an accessory another controller administers
// (importPairing), and the accessory's list of controllers managed through HomeMQTT's own admin
// pairing (addPairing, removePairing; the list is accessoryPairings).

extension HAPController {
    /// Adds HomeMQTT as an admin controller of the accessory `foreign` is paired with, using
    /// that pairing once (pair-verify as the other controller, then `/pairings` add pairing), and
    /// saves HomeMQTT's own pairing after checking that it verifies. The other controller keeps
    /// its pairing and its keys; none of them is saved. `foreign` must be an admin pairing.
    public func importPairing(_ foreign: ForeignPairing, name: String? = nil) async throws(HAPError) -> HAPPairing {
        if let existing = try pairings().first(where: { Self.sameID($0.accessoryPairingID, foreign.accessoryPairingID) }
        ) {
            throw HAPError(
                code: .alreadyPaired,
                message:
                    "HomeMQTT already has a pairing with accessory \(existing.accessoryPairingID); unpair it first to import another"
            )
        }
        logger.info(
            "adding HomeMQTT's pairing to accessory \(foreign.accessoryPairingID) through \(foreign.controllerPairingID)"
        )
        let signingKey = Curve25519.Signing.PrivateKey()
        let ours = HAPPairing(
            accessoryPairingID: foreign.accessoryPairingID, accessoryLTPK: foreign.accessoryLTPK,
            controllerPairingID: UUID().uuidString, controllerLTSK: Array(signingKey.rawRepresentation).hexString,
            controllerLTPK: Array(signingKey.publicKey.rawRepresentation).hexString, host: foreign.host,
            port: foreign.port, name: name ?? foreign.name)
        let connection = try await connect(foreign.asPairing)
        do throws(HAPError) {
            let controllers = try await connection.listPairings()
            guard
                controllers.contains(where: {
                    Self.sameID($0.controllerPairingID, foreign.controllerPairingID) && $0.isAdmin
                })
            else {
                throw HAPError(
                    code: .insufficientPrivileges,
                    message:
                        "the imported pairing (controller \(foreign.controllerPairingID)) is not an admin of accessory \(foreign.accessoryPairingID); import the admin controller's pairing"
                )
            }
            try await connection.addPairing(
                controllerPairingID: ours.controllerPairingID,
                publicKey: Array(signingKey.publicKey.rawRepresentation), admin: true)
        } catch {
            await connection.close()
            throw error
        }
        await connection.close()
        // Our own keys must work, and be saved, before the pairing counts as made; otherwise it
        // is taken off the accessory again, so that no admin pairing is left without its key.
        do throws(HAPError) {
            let check = try await connect(ours)
            await check.close()
            try store.save(ours)
        } catch {
            let undone = await removeAgain(ours.controllerPairingID, through: foreign)
            throw HAPError(
                code: error.code,
                message:
                    "HomeMQTT's pairing was added to accessory \(ours.accessoryPairingID) but \(error.message); \(undone ? "it was removed again, so importing again is safe" : "removing it again failed too: remove controller \(ours.controllerPairingID) from the accessory (homemqtt hap remove-pairing, from a controller that has it) or reset the accessory")"
            )
        }
        logger.info("paired with accessory \(ours.accessoryPairingID) as controller \(ours.controllerPairingID)")
        return ours
    }

    /// Removes `controllerPairingID` through the other controller's pairing; whether it worked.
    private func removeAgain(_ controllerPairingID: String, through foreign: ForeignPairing) async -> Bool {
        do throws(HAPError) {
            let connection = try await connect(foreign.asPairing)
            do throws(HAPError) {
                try await connection.removePairing(controllerPairingID: controllerPairingID)
            } catch {
                await connection.close()
                throw error
            }
            await connection.close()
            return true
        } catch {
            logger.warning("could not remove HomeMQTT's new pairing again: \(error.message)")
            return false
        }
    }

    /// Pairing ids compared as HAP-python and aiohomekit write them, in either case.
    static func sameID(_ a: String, _ b: String) -> Bool { a.caseInsensitiveCompare(b) == .orderedSame }

    /// Adds another controller to the accessory (admin or not), through HomeMQTT's pairing, which
    /// the accessory only allows an admin to do.
    public func addPairing(id: String, controllerPairingID: String, publicKey: [UInt8], admin: Bool)
        async throws(HAPError)
    {
        guard publicKey.count == 32 else {
            throw HAPError(code: .invalidValue, message: "a controller's public key is 32 bytes (64 hex digits)")
        }
        guard !controllerPairingID.isEmpty, controllerPairingID.utf8.count <= 64 else {
            throw HAPError(code: .invalidValue, message: "a controller's pairing id is 1 to 64 bytes")
        }
        try await withConnection(id) { connection throws(HAPError) in
            try await connection.addPairing(
                controllerPairingID: controllerPairingID, publicKey: publicKey, admin: admin)
        }
    }

    /// Removes another controller's pairing from the accessory. HomeMQTT's own is removed with
    /// `unpair`, which also forgets it here.
    public func removePairing(id: String, controllerPairingID: String) async throws(HAPError) {
        let pairing = try pairing(id: id)
        guard !Self.sameID(controllerPairingID, pairing.controllerPairingID) else {
            throw HAPError(
                code: .invalidValue,
                message: "\(controllerPairingID) is HomeMQTT's own pairing: use unpair to remove it")
        }
        try await withConnection(id) { connection throws(HAPError) in
            try await connection.removePairing(controllerPairingID: controllerPairingID)
        }
    }

    private func withConnection(
        _ id: String, _ body: (HAPConnection) async throws(HAPError) -> Void
    ) async throws(HAPError) {
        let connection = try await connect(try pairing(id: id))
        do throws(HAPError) {
            try await body(connection)
        } catch {
            await connection.close()
            throw error
        }
        await connection.close()
    }
}
