import Crypto
import Foundation
public import HAPServer

// What the bridge announces over mDNS (`_hap._tcp.local`), as HAP-python's accessory driver
// and HAP-NodeJS's advertiser say it: the TXT keys a controller reads to find the bridge by its
// pairing id, to know whether it is paired (`sf`) and whether its shape changed (`c#`), and
// `sh`, by which the Home app matches a scanned setup code to the announcement.

/// The bridge's `_hap._tcp` instance, from its status.
public enum BridgeAdvertisement {
    public static let serviceType = "_hap._tcp.local"
    /// A Thread accessory's (HAP over CoAP, `homekit: thread`): the same TXT keys.
    public static let threadServiceType = "_hap._udp.local"

    /// The TXT record: `c#`, `ff` 0, `id`, `md`, `pv` 1.1, `s#` 1, `sf` (1 unpaired, 0 paired),
    /// `ci` (2, bridge) and `sh`; nil while no server runs (no id nor `c#` yet).
    public static func txt(_ status: HomeKitBridgeStatus, model: String) -> [String: String]? {
        guard let id = status.pairingID, let cn = status.configurationNumber, let sf = status.statusFlags else {
            return nil
        }
        var txt = [
            "c#": "\(cn)", "ff": "0", "id": id, "md": model, "pv": "1.1", "s#": "1", "sf": "\(sf)",
            "ci": "\(status.category)",
        ]
        if let setupID = status.setupID { txt["sh"] = setupHash(setupID: setupID, pairingID: id) }
        return txt
    }

    /// `sh`: the first four bytes of SHA-512(setup id + pairing id), in base64 (HAP-python's
    /// `_get_setup_hash`: `setup_id + mac`, the id as the TXT's `id` writes it).
    public static func setupHash(setupID: String, pairingID: String) -> String {
        let digest = SHA512.hash(data: Data((setupID + pairingID).utf8))
        return Data(Array(digest).prefix(4)).base64EncodedString()
    }

    /// The setup URI a QR code carries, `X-HM://` + nine base-36 digits + the setup id
    /// (HAP-python's `xhm_uri`): version 0, the category, flags 2 (IP), the code's 27 bits.
    public static func setupURI(code: HAPSetupCode, setupID: String, category: Int = 2) -> String {
        let digits = UInt64(code.revealed.filter(\.isNumber)) ?? 0
        let payload = (UInt64(category & 0xFF) << 31) | (2 << 27) | (digits & 0x7FF_FFFF)
        let text = String(payload, radix: 36, uppercase: true)
        return "X-HM://" + String(repeating: "0", count: max(0, 9 - text.count)) + text + setupID
    }
}
