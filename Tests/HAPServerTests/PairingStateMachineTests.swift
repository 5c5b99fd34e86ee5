import Crypto
import Foundation
import HAP
import TestSupport
import XCTest

@testable import HAPServer

/// Pair-setup and pair-verify as the accessory, driven step by step without a socket: the
/// controller's side is HAP's own SRP client and crypto.
final class PairingStateMachineTests: XCTestCase {
    static let code = HAPSetupCode("314-15-926")!

    func makeState() throws -> (AccessoryState, TemporaryDirectory) {
        let directory = try TemporaryDirectory(prefix: "hap-server-state")
        let state = try AccessoryState(
            store: HAPServerStore(directory: URL(fileURLWithPath: directory.path)), setupCode: Self.code)
        return (state, directory)
    }

    func tlv(_ items: [(UInt8, [UInt8])]) -> TLV8 {
        var t = TLV8()
        for (type, value) in items { t.append(type, value) }
        return t
    }

    func error(_ response: TLV8) -> TLVErrorCode? { response[TLVType.error]?.first.flatMap(TLVErrorCode.init) }

    /// M1–M4 with `password`; returns the machine awaiting M5 (or failed) and the SRP proof.
    func runToM4(_ machine: inout PairSetupMachine, state: AccessoryState, password: String) throws -> (
        TLV8, SRP.Client.Proof
    ) {
        let m2 = machine.handle(tlv([(TLVType.state, [1]), (TLVType.method, [0])]), state: state).response
        XCTAssertNil(error(m2))
        XCTAssertEqual(m2[TLVType.state], [2])
        let salt = try XCTUnwrap(m2[TLVType.salt])
        let B = try XCTUnwrap(m2[TLVType.publicKey])
        XCTAssertEqual(salt.count, 16)
        XCTAssertEqual(B.count, 384)
        let srp = SRP.Client()
        let proof = try srp.proof(salt: salt, B: B, password: password)
        let m4 = machine.handle(
            tlv([(TLVType.state, [3]), (TLVType.publicKey, srp.A), (TLVType.proof, proof.M)]), state: state
        )
        .response
        return (m4, proof)
    }

    func m5(_ proof: SRP.Client.Proof, id: String, key: Curve25519.Signing.PrivateKey) throws -> TLV8 {
        let ltpk = Array(key.publicKey.rawRepresentation)
        let encKey = HAPCrypto.hkdfSHA512(
            key: proof.K, salt: "Pair-Setup-Encrypt-Salt", info: "Pair-Setup-Encrypt-Info")
        let x = HAPCrypto.hkdfSHA512(
            key: proof.K, salt: "Pair-Setup-Controller-Sign-Salt", info: "Pair-Setup-Controller-Sign-Info")
        var sub = TLV8()
        sub.append(TLVType.identifier, Array(id.utf8))
        sub.append(TLVType.publicKey, ltpk)
        sub.append(TLVType.signature, Array(try key.signature(for: x + Array(id.utf8) + ltpk)))
        let sealed = try HAPCrypto.seal(sub.encoded(), key: encKey, nonce: HAPCrypto.nonce(label: "PS-Msg05"))
        return tlv([(TLVType.state, [5]), (TLVType.encryptedData, sealed)])
    }

    func testPairSetupWithTheRightCodeAddsAnAdminAndSignsTheAccessorysKey() throws {
        let (state, directory) = try makeState()
        _ = directory
        var machine = PairSetupMachine(connection: 1)
        let (m4, proof) = try runToM4(&machine, state: state, password: Self.code.revealed)
        XCTAssertNil(error(m4))
        XCTAssertEqual(m4[TLVType.proof], proof.expectedHAMK)
        let key = Curve25519.Signing.PrivateKey()
        let step = machine.handle(try m5(proof, id: "controller-1", key: key), state: state)
        XCTAssertNil(error(step.response))
        XCTAssertEqual(step.paired?.id, "controller-1")
        let sealed = try XCTUnwrap(step.response[TLVType.encryptedData])
        let encKey = HAPCrypto.hkdfSHA512(
            key: proof.K, salt: "Pair-Setup-Encrypt-Salt", info: "Pair-Setup-Encrypt-Info")
        let inner = try TLV8.decode(try HAPCrypto.open(sealed, key: encKey, nonce: HAPCrypto.nonce(label: "PS-Msg06")))
        XCTAssertEqual(inner[TLVType.identifier], Array(state.pairingID.utf8))
        XCTAssertEqual(inner[TLVType.publicKey], state.signingKey.publicKey)
        let ax = HAPCrypto.hkdfSHA512(
            key: proof.K, salt: "Pair-Setup-Accessory-Sign-Salt", info: "Pair-Setup-Accessory-Sign-Info")
        XCTAssertTrue(
            HAPCrypto.verifyEd25519(
                signature: try XCTUnwrap(inner[TLVType.signature]),
                message: ax + Array(state.pairingID.utf8) + state.signingKey.publicKey,
                publicKey: state.signingKey.publicKey))
        XCTAssertEqual(
            state.pairings,
            [HAPControllerPairing(id: "controller-1", publicKey: Array(key.publicKey.rawRepresentation), isAdmin: true)]
        )
        XCTAssertTrue(state.status.isPaired)
        XCTAssertEqual(state.status.statusFlags, 0)

        // Once paired, pair-setup is Unavailable, from any connection.
        var again = PairSetupMachine(connection: 2)
        let refused = again.handle(tlv([(TLVType.state, [1]), (TLVType.method, [0])]), state: state).response
        XCTAssertEqual(refused[TLVType.state], [2])
        XCTAssertEqual(error(refused), .unavailable)
    }

    func testAWrongCodeIsAuthenticationAndCounts() throws {
        let (state, directory) = try makeState()
        _ = directory
        var machine = PairSetupMachine(connection: 1)
        let (m4, _) = try runToM4(&machine, state: state, password: "111-22-333")
        XCTAssertEqual(m4[TLVType.state], [4])
        XCTAssertEqual(error(m4), .authentication)
        XCTAssertEqual(state.failedSetupAttempts, 1)
        XCTAssertFalse(state.isPaired)
        // The attempt is over: an M5 now is out of order.
        let late = machine.handle(tlv([(TLVType.state, [5]), (TLVType.encryptedData, [1, 2, 3])]), state: state)
        XCTAssertEqual(error(late.response), .unknown)
        // And the failure survives a restart.
        let reloaded = try AccessoryState(
            store: HAPServerStore(directory: URL(fileURLWithPath: directory.path)), setupCode: Self.code)
        XCTAssertEqual(reloaded.failedSetupAttempts, 1)
        XCTAssertEqual(reloaded.pairingID, state.pairingID)
    }

    func testASecondPairSetupIsBusyUntilTheFirstEnds() throws {
        let (state, directory) = try makeState()
        _ = directory
        var first = PairSetupMachine(connection: 1)
        var second = PairSetupMachine(connection: 2)
        let m1 = tlv([(TLVType.state, [1]), (TLVType.method, [0])])
        XCTAssertNil(error(first.handle(m1, state: state).response))
        let busy = second.handle(m1, state: state).response
        XCTAssertEqual(busy[TLVType.state], [2])
        XCTAssertEqual(error(busy), .busy)
        // The same connection may start over.
        XCTAssertNil(error(first.handle(m1, state: state).response))
        // Its connection closing ends it; then the other may go.
        first.abandon(state)
        XCTAssertNil(error(second.handle(m1, state: state).response))
    }

    func testAfterOneHundredFailuresPairSetupIsMaxTries() throws {
        let (state, directory) = try makeState()
        _ = directory
        for _ in 0..<99 { state.recordFailedSetup() }
        var machine = PairSetupMachine(connection: 1)
        // The hundredth failure through the protocol itself.
        let (m4, _) = try runToM4(&machine, state: state, password: "222-33-444")
        XCTAssertEqual(error(m4), .authentication)
        XCTAssertEqual(state.failedSetupAttempts, 100)
        let refused = machine.handle(tlv([(TLVType.state, [1]), (TLVType.method, [0])]), state: state).response
        XCTAssertEqual(error(refused), .maxTries)
    }

    func testMalformedStepsAreRefusedWithoutPairing() throws {
        let (state, directory) = try makeState()
        _ = directory
        var machine = PairSetupMachine(connection: 1)
        // M3 before M1, a state out of range, no state at all, an unknown method.
        XCTAssertEqual(error(machine.handle(tlv([(TLVType.state, [3])]), state: state).response), .unknown)
        XCTAssertEqual(error(machine.handle(tlv([(TLVType.state, [9])]), state: state).response), .unknown)
        XCTAssertEqual(error(machine.handle(tlv([]), state: state).response), .unknown)
        XCTAssertEqual(
            error(machine.handle(tlv([(TLVType.state, [1]), (TLVType.method, [7])]), state: state).response), .unknown)
        // M3 without a proof.
        XCTAssertNil(error(machine.handle(tlv([(TLVType.state, [1])]), state: state).response))
        XCTAssertEqual(
            error(machine.handle(tlv([(TLVType.state, [3]), (TLVType.publicKey, [1])]), state: state).response),
            .unknown)
        // A = 0 (mod N) is refused as a wrong proof would be.
        XCTAssertNil(error(machine.handle(tlv([(TLVType.state, [1])]), state: state).response))
        let zeroA = machine.handle(
            tlv([
                (TLVType.state, [3]), (TLVType.publicKey, SRP.pad(SRP.N)),
                (TLVType.proof, [UInt8](repeating: 0, count: 64)),
            ]),
            state: state)
        XCTAssertEqual(error(zeroA.response), .authentication)
        // M5 that does not open with the session's key.
        var m = PairSetupMachine(connection: 1)
        _ = try runToM4(&m, state: state, password: Self.code.revealed)
        let garbage = tlv([(TLVType.state, [5]), (TLVType.encryptedData, [UInt8](repeating: 7, count: 80))])
        XCTAssertEqual(error(m.handle(garbage, state: state).response), .authentication)
        XCTAssertFalse(state.isPaired)
    }

    func testPairVerifyAcceptsAPairedControllerOnlyAndAgreesOnTheSecret() throws {
        let (state, directory) = try makeState()
        _ = directory
        let key = Curve25519.Signing.PrivateKey()
        XCTAssertNil(
            state.addPairing(
                HAPControllerPairing(id: "c1", publicKey: Array(key.publicKey.rawRepresentation), isAdmin: true)))

        func verify(as id: String, signingWith signer: Curve25519.Signing.PrivateKey) throws -> PairVerifyMachine.Step {
            var machine = PairVerifyMachine()
            let ephemeral = Curve25519.KeyAgreement.PrivateKey()
            let ours = Array(ephemeral.publicKey.rawRepresentation)
            let m2 = machine.handle(tlv([(TLVType.state, [1]), (TLVType.publicKey, ours)]), state: state).response
            let theirs = try XCTUnwrap(m2[TLVType.publicKey])
            let shared = try HAPCrypto.x25519(privateKey: Array(ephemeral.rawRepresentation), peerPublicKey: theirs)
            let sk = HAPCrypto.hkdfSHA512(
                key: shared, salt: "Pair-Verify-Encrypt-Salt", info: "Pair-Verify-Encrypt-Info")
            let inner = try TLV8.decode(
                try HAPCrypto.open(
                    try XCTUnwrap(m2[TLVType.encryptedData]), key: sk, nonce: HAPCrypto.nonce(label: "PV-Msg02")))
            XCTAssertTrue(
                HAPCrypto.verifyEd25519(
                    signature: try XCTUnwrap(inner[TLVType.signature]),
                    message: theirs + Array(state.pairingID.utf8) + ours, publicKey: state.signingKey.publicKey))
            var sub = TLV8()
            sub.append(TLVType.identifier, Array(id.utf8))
            sub.append(TLVType.signature, Array(try signer.signature(for: ours + Array(id.utf8) + theirs)))
            let m3 = try HAPCrypto.seal(sub.encoded(), key: sk, nonce: HAPCrypto.nonce(label: "PV-Msg03"))
            let step = machine.handle(tlv([(TLVType.state, [3]), (TLVType.encryptedData, m3)]), state: state)
            if let verified = step.verified { XCTAssertEqual(verified.sharedSecret, shared) }
            return step
        }
        let good = try verify(as: "c1", signingWith: key)
        XCTAssertEqual(good.verified?.pairing.id, "c1")
        XCTAssertEqual(good.response[TLVType.state], [4])
        let stranger = try verify(as: "c2", signingWith: Curve25519.Signing.PrivateKey())
        XCTAssertNil(stranger.verified)
        XCTAssertEqual(error(stranger.response), .authentication)
        let impostor = try verify(as: "c1", signingWith: Curve25519.Signing.PrivateKey())
        XCTAssertNil(impostor.verified)
        XCTAssertEqual(error(impostor.response), .authentication)
    }

    func testRemovingTheLastAdminRemovesEveryPairing() throws {
        let (state, directory) = try makeState()
        _ = directory
        let key = { Array(Curve25519.Signing.PrivateKey().publicKey.rawRepresentation) }
        let admin = HAPControllerPairing(id: "admin", publicKey: key(), isAdmin: true)
        XCTAssertNil(state.addPairing(admin))
        XCTAssertNil(state.addPairing(HAPControllerPairing(id: "user", publicKey: key(), isAdmin: false)))
        // The same id with another key is refused; with the same key it changes the permission.
        XCTAssertEqual(state.addPairing(HAPControllerPairing(id: "user", publicKey: key(), isAdmin: true)), .unknown)
        XCTAssertEqual(state.removePairing(id: "nobody"), .removed)
        XCTAssertEqual(state.pairings.count, 2)
        XCTAssertEqual(state.removePairing(id: "admin"), .removedAll)
        XCTAssertEqual(state.pairings, [])
        XCTAssertFalse(state.status.isPaired)
        XCTAssertEqual(state.status.statusFlags, 1)
    }
}
