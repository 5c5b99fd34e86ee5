import BigInt
import Foundation
import XCTest
@testable import HAP

final class KnownAnswerTests: XCTestCase {
    func hex(_ s: String) -> [UInt8] { [UInt8](hex: s.replacingOccurrences(of: " ", with: ""))! }

    // HAP-python's tests/test_hsrp.py: server side with fixed s, b, password and a 24-byte A.
    func testSRPMatchesHAPPythonVector() throws {
        let A = hex("5665ced4904c45784b449d37165c40b6b89f011a5d86a41c")
        let salt = Array(BigUInt("227710976386754876301088769828140156049").serialize())
        let b = BigUInt("191304991611724068381190663629083136274")
        XCTAssertEqual(
            SRP.k,
            BigUInt(
                "8891118944006259431156568541843809053371474718154946070525699599564743247786811275097952247025117806925219847643897478119979876683245412022290811230509536"
            ))
        let v = SRP.verifier(salt: salt, password: "123-45-543")
        XCTAssertEqual(
            v,
            BigUInt(
                "1800954445588585461785592179273284825501707649217210015435034845050179016324355419526711292364866248346582448660643272322280999760562622718989053886869428917425675795172391329924178337579968214001782222575897907780437717763112406095878356902641567396545009429496128133564692965499069074320017151157469160990771527712530637370897276672652870613312504255873634362188551282649472569433062597795005057270622772410668342950279555516133010272639201733492626622809480021268951287298118968011031850511105359580984350020671780470982743318615303989055956125558514263378948829479434245711743458681522240763520911255733079164391662778946744155477806679057949726211652108387739564473209550264487697151825509058193841809273482575660658239177704074882302955007248950743262054925817705066654613816236610736311934089570249355454459951577900707115340781119430461780455828980205046091360390327787803271426555681638302650021637121212829077894589"
            ))
        let B = SRP.serverB(b: b, verifier: v)
        XCTAssertEqual(
            B,
            BigUInt(
                "2149981971605054722971448928513305504744266471818820776094113337432031877014471028912971746321748621185649001880451734094103311676264091997241948096711710461140721738956497494552388614895831596671069609694220554015991913746528757304239759620571367574036184864989138266792823575841594621160010011666017298902208272126405229578664943728094068949021795802799552486045670159066273942547651088762352104942364707580142387716636468281068738042936130578774565386637668610429058884417819388838110075674266297699354845325023954873162742733169560666501210723876454859556564325607870517213063038111644227553599978606540729093082921723443122696487068510228710655880466038292327450357013882323502992655150615829432843408599038481983277372215619348128412279375677793332715557041679298014663382481619951610899087031959653365603032111634191603851554865349816117884573658915813848292512124719015181912892538210471183790840676306564839828444134"
            ))
        let Bbytes = SRP.pad(B)
        let S = SRP.serverS(A: A, B: Bbytes, b: b, verifier: v)
        XCTAssertEqual(
            S,
            BigUInt(
                "74327940101639752536537640881643581886247890122995727869092918508085397047960192114187184206420245499227933354038262980545757154896143196917567791395562849790585173129051928488506985432588320936161016609993624725221069849383124728580710793131421162926844621384309691065416908669855286020750380619018007734494245389837285359061649585082978114606737696983003789452193299203880220013003551748645087934186574940836315605161763958706985646740794424371115818479937015467439653789667600114913036877616558029128521276071759153575011083182650027094873442901697309464533625147028860476977419766721379872518101123122550406587162809198793634217353529574423908555799363233330194347012490634061830786590780000201696990820985363093141614397601285773980430681705777477946555312165250133963931282621724675380164859592461132141730419315498467050491890312826221069184134326282895963295397215898192608240385050625017941322853973472354023693355"
            ))
        let K = SRP.K(S: S)
        XCTAssertEqual(
            BigUInt(Data(K)),
            BigUInt(
                "7776966363435436003301596680621751479448170893927097125414524508260409807602643597201957531811064094375727460485526402929080964822225092649470633176208468"
            ))
        let M = SRP.M(salt: salt, A: A, B: Bbytes, K: K)
        XCTAssertEqual(
            M,
            hex(
                "af6e5aef8e84beaae24d7d35270cb8b90713a374bb664f4c0539a354af023105f72adb5da35d92bca70e64c14388570be76ee67c1eb4f9705563a28d05d7ab49"
            ))
        XCTAssertEqual(
            SRP.HAMK(A: A, M: M, K: K),
            hex(
                "e100cfe298af1e0274620bfc6c4b46ee1b80f690b78a9f133379233e8d2fc188938e68094e9bdac22d1a28e3ca0b66f3c4cac4ecfa2fecb71681dd25c969f990"
            ))
    }

    /// Our client and the server formulas agree on S, including when S or B has leading zero
    /// bytes (the padding HAP-python gets wrong).
    func testSRPClientAgreesWithServerIncludingLeadingZeros() throws {
        let salt = HAPCrypto.randomBytes(16)
        let password = "031-45-154"
        let v = SRP.verifier(salt: salt, password: password)
        for i in 0..<2 {
            let b = BigUInt(Data(HAPCrypto.randomBytes(32)))
            let client = SRP.Client()
            XCTAssertEqual(client.A.count, 384)
            let B = SRP.pad(SRP.serverB(b: b, verifier: v))
            // Every other round hands over B without its padding, as HAP-python does.
            let sentB = i % 2 == 0 ? B : Array(SRP.serverB(b: b, verifier: v).serialize())
            let proof = try client.proof(salt: salt, B: sentB, password: password)
            let S = SRP.serverS(A: client.A, B: B, b: b, verifier: v)
            XCTAssertEqual(proof.K, SRP.K(S: S))
            XCTAssertEqual(proof.K.count, 64)
            XCTAssertEqual(proof.M, SRP.M(salt: salt, A: client.A, B: B, K: SRP.K(S: S)))
            if i == 0 {
                let wrong = try client.proof(salt: salt, B: sentB, password: "031-45-155")
                XCTAssertNotEqual(wrong.M, proof.M)
            }
        }
        XCTAssertEqual(SRP.pad(BigUInt(1)).count, 384)
        XCTAssertEqual(SRP.pad(BigUInt(1)).last, 1)
        XCTAssertThrowsError(try SRP.Client().proof(salt: salt, B: SRP.pad(SRP.N), password: password))
    }

    // RFC 5869 test case 1 inputs with SHA-512 (expected value from pyca/cryptography).
    func testHKDFSHA512() {
        let okm = HAPCrypto.hkdfSHA512(
            key: [UInt8](repeating: 0x0b, count: 22), salt: Array(0x00...0x0c), info: Array(0xf0...0xf9), count: 42)
        XCTAssertEqual(okm, hex("832390086cda71fb47625bb5ceb168e4c8e26a1a16ed34d9fc7fe92c1481579338da362cb8d9f925d7cb"))
        XCTAssertEqual(
            HAPCrypto.hkdfSHA512(key: Array(0..<32), salt: "Control-Salt", info: "Control-Read-Encryption-Key"),
            hex("c09403ef8aa6c5045cbd8cf9bf3e665b2caed623af2be0e87c8f80f519914d3d"))
    }

    // RFC 8439 §2.8.2.
    func testChaCha20Poly1305() throws {
        let key = Array(UInt8(0x80)...UInt8(0x9f))
        let nonce = hex("070000004041424344454647")
        let aad = hex("50515253c0c1c2c3c4c5c6c7")
        let plaintext = Array(
            "Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it."
                .utf8)
        let sealed = try HAPCrypto.seal(plaintext, key: key, nonce: nonce, aad: aad)
        XCTAssertEqual(
            sealed,
            hex(
                "d31a8d34648e60db7b86afbc53ef7ec2a4aded51296e08fea9e2b5a736ee62d63dbea45e8ca9671282fafb69da92728b1a71de0a9e060b2905d6a5b67ecd3b3692ddbd7f2d778b8c9803aee328091b58fab324e4fad675945585808b4831d7bc3ff4def08e4b7a9de576d26586cec64b6116"
                    + "1ae10b594f09e26a7e902ecbd0600691"))
        XCTAssertEqual(try HAPCrypto.open(sealed, key: key, nonce: nonce, aad: aad), plaintext)
        var tampered = sealed
        tampered[3] ^= 1
        XCTAssertThrowsError(try HAPCrypto.open(tampered, key: key, nonce: nonce, aad: aad)) {
            XCTAssertEqual(($0 as? HAPError)?.code.rawValue, "bad-frame")
        }
        XCTAssertEqual(HAPCrypto.nonce(label: "PS-Msg05"), [0, 0, 0, 0] + Array("PS-Msg05".utf8))
        XCTAssertEqual(
            withUnsafeBytes(of: HAPSessionCipher.nonceBytes(258)) { Array($0) }, [0, 0, 0, 0, 2, 1, 0, 0, 0, 0, 0, 0])
    }

    // RFC 8032 §7.1 test 1.
    func testEd25519() throws {
        let secret = hex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
        let publicKey = hex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
        let signature = hex(
            "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
        )
        XCTAssertEqual(try HAPCrypto.ed25519PublicKey(privateKey: secret), publicKey)
        XCTAssertTrue(HAPCrypto.verifyEd25519(signature: signature, message: [], publicKey: publicKey))
        XCTAssertFalse(HAPCrypto.verifyEd25519(signature: signature, message: [0], publicKey: publicKey))
        let ours = try HAPCrypto.signEd25519([1, 2, 3], privateKey: secret)
        XCTAssertTrue(HAPCrypto.verifyEd25519(signature: ours, message: [1, 2, 3], publicKey: publicKey))
    }

    // RFC 7748 §6.1.
    func testX25519() throws {
        let alice = hex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
        let bob = hex("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb")
        XCTAssertEqual(
            try HAPCrypto.x25519PublicKey(privateKey: alice),
            hex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"))
        let bobPublic = try HAPCrypto.x25519PublicKey(privateKey: bob)
        XCTAssertEqual(bobPublic, hex("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f"))
        XCTAssertEqual(
            try HAPCrypto.x25519(privateKey: alice, peerPublicKey: bobPublic),
            hex("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742"))
    }
}

final class MontgomeryTests: XCTestCase {
    func testSmallPowersAgreeWithPlainArithmetic() {
        XCTAssertEqual(SRP.powMod(2, 10), 1024)
        XCTAssertEqual(SRP.powMod(SRP.N - 1, 2), 1)
        XCTAssertEqual(SRP.powMod(SRP.N + 7, 1), 7)
        let x = BigUInt(Data(HAPCrypto.randomBytes(380)))
        XCTAssertEqual(SRP.powMod(x, 3), (x * x % SRP.N) * x % SRP.N)
        XCTAssertEqual(SRP.powMod(x, 0), 1)
    }
}
