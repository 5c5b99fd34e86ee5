public import HomeModel
import MDNS
import Synchronization

// A bridge's (or a standalone accessory's) status as `homekit-status` answers it and the
// announcement carries it.

/// Where a server's status callback finds the responder started after it.
final class ResponderSlot: Sendable {
    let value = Mutex<MDNSResponder?>(nil)
}

/// A bridge's state for its owner and the announcement: `id`, `c#`, `sf`,
/// the category (2, bridge; a standalone accessory's own) and the setup id are what `_hap._tcp`'s
/// TXT record and the QR code carry.
public struct HomeKitBridgeStatus: Sendable, Hashable {
    public struct Pairing: Sendable, Hashable {
        public var id: String
        public var isAdmin: Bool
    }

    public var homeID: String
    public var homeName: String
    /// The accessory served alone; nil for the bridge.
    public var accessoryID: String?
    /// The bridge's: the accessories it leaves to serve alone (`homekit-status` with `accessory`).
    public var standalone: [String] = []
    /// Nil while no server runs.
    public var pairingID: String?
    public var configurationNumber: Int?
    public var isPaired: Bool?
    public var category = 2
    public var setupID: String?
    public var port: Int?
    public var pairings: [Pairing]
    /// Accessory objects served, the bridge included.
    public var accessories: Int
    /// Accessories in scope left out beyond HAP's limit.
    public var leftOut: [String]
    /// Why it does not serve, if it does not.
    public var error: String?

    public init(
        homeID: String, homeName: String, pairingID: String?, configurationNumber: Int?, isPaired: Bool?,
        setupID: String?, port: Int? = nil, pairings: [Pairing], accessories: Int, leftOut: [String],
        error: String? = nil
    ) {
        self.homeID = homeID
        self.homeName = homeName
        self.pairingID = pairingID
        self.configurationNumber = configurationNumber
        self.isPaired = isPaired
        self.setupID = setupID
        self.port = port
        self.pairings = pairings
        self.accessories = accessories
        self.leftOut = leftOut
        self.error = error
    }

    /// `sf`: 1 while unpaired.
    public var statusFlags: Int? { isPaired.map { $0 ? 0 : 1 } }

    public var json: JSONValue {
        var o: [String: JSONValue] = [
            "home": .string(homeID), "home-name": .string(homeName), "category": .int(Int64(category)),
            "accessories": .int(Int64(accessories)),
            "pairings": .array(pairings.map { .object(["id": .string($0.id), "admin": .bool($0.isAdmin)]) }),
        ]
        if let pairingID { o["id"] = .string(pairingID) }
        if let configurationNumber { o["c#"] = .int(Int64(configurationNumber)) }
        if let statusFlags { o["sf"] = .int(Int64(statusFlags)) }
        if let isPaired { o["paired"] = .bool(isPaired) }
        if let setupID { o["setup-id"] = .string(setupID) }
        if let port { o["port"] = .int(Int64(port)) }
        if !leftOut.isEmpty { o["left-out"] = .array(leftOut.map(JSONValue.string)) }
        if let error { o["error"] = .string(error) }
        if let accessoryID { o["accessory"] = .string(accessoryID) }
        if !standalone.isEmpty { o["standalone"] = .array(standalone.map(JSONValue.string)) }
        return .object(o)
    }
}
