import Foundation
public import HomeModel

/// Another controller's pairing with an accessory, as aiohomekit keeps it (and Home Assistant's
/// HomeKit Controller, which stores aiohomekit's pairing data in its config entries). HomeMQTT
/// uses it once, to add a pairing of its own (`HAPController.importPairing`), and keeps none
/// of its keys. `description` leaves the private key out.
public struct ForeignPairing: Sendable, CustomStringConvertible {
    public var accessoryPairingID: String
    public var accessoryLTPK: String
    public var controllerPairingID: String
    var controllerLTSK: String
    public var controllerLTPK: String
    public var host: String
    public var port: Int
    /// The config entry's title in Home Assistant; the alias in aiohomekit's file.
    public var name: String?

    public var description: String {
        "ForeignPairing(\(accessoryPairingID) at \(host):\(port), controller \(controllerPairingID))"
    }

    /// The same keys as a `HAPPairing`, to connect and pair-verify as that controller.
    var asPairing: HAPPairing {
        HAPPairing(
            accessoryPairingID: accessoryPairingID, accessoryLTPK: accessoryLTPK,
            controllerPairingID: controllerPairingID, controllerLTSK: controllerLTSK, controllerLTPK: controllerLTPK,
            host: host, port: port, name: name)
    }

    /// The pairings in a file of one of these shapes:
    /// - aiohomekit's pairing data: `{"AccessoryPairingID": …, "iOSDeviceLTSK": …, …}`;
    /// - aiohomekit's saved controller: `{"<alias>": {pairing data}, …}`;
    /// - Home Assistant's `.storage/core.config_entries`: every entry of the `homekit_controller`
    ///   domain, whose `data` is the pairing data, named by its `title`.
    /// Only IP pairings are taken (`Connection` absent or `IP`); BLE and CoAP ones are skipped.
    public static func parse(_ bytes: [UInt8], file: String) throws(HAPError) -> [ForeignPairing] {
        let json: JSONValue
        do { json = try JSONValue(parsing: bytes) } catch {
            throw HAPError(code: .badPairingFile, message: "\(file) is not JSON: \(error.message)")
        }
        var found: [ForeignPairing] = []
        func take(_ data: JSONValue, name: String?, at path: String) throws(HAPError) {
            let connection = data["Connection"]?.stringValue ?? "IP"
            guard connection == "IP" else { return }
            found.append(try ForeignPairing(data, name: name, at: "\(file): \(path)"))
        }
        if json["AccessoryPairingID"] != nil {
            try take(json, name: nil, at: "the pairing")
        } else if case .array(let entries)? = json["data"]?["entries"] {
            for (index, entry) in entries.enumerated() where entry["domain"]?.stringValue == "homekit_controller" {
                // Home Assistant keeps a device the user chose to ignore as an entry with no data.
                guard entry["source"]?.stringValue != "ignore", let data = entry["data"],
                    data["AccessoryPairingID"] != nil
                else { continue }
                try take(data, name: entry["title"]?.stringValue, at: "data.entries[\(index)].data")
            }
        } else if case .object(let aliases) = json {
            for (alias, data) in aliases.sorted(by: { $0.key < $1.key }) where data["AccessoryPairingID"] != nil {
                try take(data, name: alias, at: alias)
            }
        }
        guard !found.isEmpty else {
            throw HAPError(
                code: .badPairingFile,
                message:
                    "\(file) holds no HAP over IP pairing (expected aiohomekit's pairing data or Home Assistant's core.config_entries with homekit_controller entries)"
            )
        }
        return found
    }

    init(_ data: JSONValue, name: String?, at path: String) throws(HAPError) {
        func field(_ key: String, bytes: Int? = nil) throws(HAPError) -> String {
            guard let value = data[key]?.stringValue, !value.isEmpty else {
                throw HAPError(code: .badPairingFile, message: "\(path).\(key) is missing")
            }
            if let bytes {
                guard let decoded = [UInt8](hex: value), decoded.count == bytes else {
                    throw HAPError(code: .badPairingFile, message: "\(path).\(key) is not \(bytes) bytes of hex")
                }
            }
            return value
        }
        accessoryPairingID = try field("AccessoryPairingID")
        accessoryLTPK = try field("AccessoryLTPK", bytes: 32)
        controllerPairingID = try field("iOSPairingId")
        controllerLTSK = try field("iOSDeviceLTSK", bytes: 32)
        controllerLTPK = try field("iOSDeviceLTPK", bytes: 32)
        let addresses = (data["AccessoryIPs"]?.arrayValue ?? []).compactMap(\.stringValue)
        guard let address = data["AccessoryIP"]?.stringValue ?? addresses.first else {
            throw HAPError(code: .badPairingFile, message: "\(path).AccessoryIP is missing")
        }
        guard let port = data["AccessoryPort"]?.intValue, (1...65535).contains(port) else {
            throw HAPError(code: .badPairingFile, message: "\(path).AccessoryPort is missing or not a port")
        }
        host = address
        self.port = port
        self.name = name
    }
}
