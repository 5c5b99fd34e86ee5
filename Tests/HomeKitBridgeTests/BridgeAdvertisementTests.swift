import HAPServer
import HomeKitBridge
import XCTest

/// The bridge's `_hap._tcp` TXT record, key by key as HAP-python's accessory driver writes it.
final class BridgeAdvertisementTests: XCTestCase {
    func status(paired: Bool?, cn: Int? = 4) -> HomeKitBridgeStatus {
        var status = HomeKitBridgeStatus(
            homeID: "h", homeName: "My Home", pairingID: "AA:BB:CC:DD:EE:FF", configurationNumber: cn,
            isPaired: paired, setupID: "7OSX", port: 51826, pairings: [], accessories: 3, leftOut: [])
        status.category = 2
        return status
    }

    func testTheTXTRecordOfAnUnpairedAndAPairedBridge() throws {
        let unpaired = try XCTUnwrap(BridgeAdvertisement.txt(status(paired: false), model: "HomeMQTT My Home"))
        XCTAssertEqual(
            unpaired,
            [
                "c#": "4", "ff": "0", "id": "AA:BB:CC:DD:EE:FF", "md": "HomeMQTT My Home", "pv": "1.1", "s#": "1",
                "sf": "1", "ci": "2",
                // python3: base64.b64encode(hashlib.sha512(b"7OSXAA:BB:CC:DD:EE:FF").digest()[:4])
                "sh": "XIonQA==",
            ])
        XCTAssertEqual(BridgeAdvertisement.txt(status(paired: true), model: "m")?["sf"], "0")
        // No server: nothing to announce.
        XCTAssertNil(BridgeAdvertisement.txt(status(paired: nil, cn: nil), model: "m"))
    }

    func testTheSetupURIIsHAPPythons() throws {
        // HAP-python 5.0.0's Accessory.xhm_uri for category 2, 314-15-926, setup id 7OSX.
        let code = try XCTUnwrap(HAPSetupCode("314-15-926"))
        XCTAssertEqual(BridgeAdvertisement.setupURI(code: code, setupID: "7OSX"), "X-HM://0023ZMWS67OSX")
    }
}
