// What the two HAP-over-CoAP peers (issue 42) ask of a transport, and nothing more: the
// controller POSTs a payload to a path of the accessory and gets a code and a payload back;
// the accessory answers such requests and PUTs events to a controller. The UDP transport
// (libcoap) and the in-memory one of the tests both fit these, so the peers never see which
// carries them. Codes are aiohomekit's (`controller/coap/connection.py`): 2.04 Changed
// answers a POST, 2.03 Valid an event, 4.04 Not Found on `/` means "no such session".

/// A CoAP response code, `class.detail` (2.04 is 0x44).
public struct CoAPCode: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public init(_ codeClass: UInt8, _ detail: UInt8) { rawValue = codeClass << 5 | detail }

    /// An answered POST (pairing steps, identify, encrypted PDUs).
    public static let changed = CoAPCode(2, 4)
    /// An accepted event PUT.
    public static let valid = CoAPCode(2, 3)
    /// A request that cannot be read (a malformed PDU framing, a bad pairing TLV).
    public static let badRequest = CoAPCode(4, 0)
    /// Identify of a paired accessory.
    public static let unauthorized = CoAPCode(4, 1)
    /// No such resource, or on `/`: the session is gone (never verified, forgotten, out of step).
    public static let notFound = CoAPCode(4, 4)
    public static let methodNotAllowed = CoAPCode(4, 5)
    public static let internalServerError = CoAPCode(5, 0)
    /// The accessory keeps as many controllers' addresses as it can already.
    public static let serviceUnavailable = CoAPCode(5, 3)

    public var codeClass: UInt8 { rawValue >> 5 }
    public var detail: UInt8 { rawValue & 0x1F }
    public var isSuccess: Bool { codeClass == 2 }
    public var description: String { "\(codeClass).\(detail < 10 ? "0" : "")\(detail)" }
}

/// An answer: its code and payload.
public struct CoAPReply: Sendable, Hashable {
    public var code: CoAPCode
    public var payload: [UInt8]
    public init(_ code: CoAPCode, _ payload: [UInt8] = []) {
        self.code = code
        self.payload = payload
    }
}

/// The controller's side of a transport: POSTs to one accessory. A request that gets no
/// answer is a `HAPError` (`timeout` or `unreachable`); any answer, even 4.04, is returned.
public protocol HAPCoAPExchange: Sendable {
    func post(_ path: String, _ payload: [UInt8]) async throws(HAPError) -> CoAPReply
}

/// The accessory's side for events: PUTs a payload to `/` of the controller at `peer` (the
/// address its requests came from) and returns the controller's code.
public protocol HAPCoAPEventSender: Sendable {
    func put(_ payload: [UInt8], to peer: String) async throws(HAPError) -> CoAPCode
}

/// The accessory's resources: `/0` identify, `/1` pair-setup, `/2` pair-verify, `/` PDUs.
public enum HAPCoAPPath {
    public static let identify = "/0"
    public static let pairSetup = "/1"
    public static let pairVerify = "/2"
    public static let pdus = "/"
}
