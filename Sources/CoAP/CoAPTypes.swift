// The values the CoAP module's API speaks in: peers, methods, codes, messages, errors and the
// transmission parameters. Nothing here touches libcoap.

/// A CoAP peer: a numeric IPv6 or IPv4 address and a UDP port.
public struct CoAPPeer: Hashable, Sendable, CustomStringConvertible {
    public var host: String
    public var port: UInt16

    public init(host: String, port: UInt16 = 5683) {
        self.host = host
        self.port = port
    }

    /// `[::1]:5683` or `127.0.0.1:5683`, as in a URI.
    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// A request method (RFC 7252 §12.1.1).
public enum CoAPMethod: UInt8, Sendable, CustomStringConvertible {
    case get = 1
    case post = 2
    case put = 3
    case delete = 4

    public var description: String {
        switch self {
        case .get: "GET"
        case .post: "POST"
        case .put: "PUT"
        case .delete: "DELETE"
        }
    }
}

/// A response code, `class.detail` (RFC 7252 §12.1.2), as its byte.
public struct CoAPCode: Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public init(_ codeClass: UInt8, _ detail: UInt8) { rawValue = codeClass << 5 | (detail & 0x1F) }

    public var codeClass: UInt8 { rawValue >> 5 }
    public var detail: UInt8 { rawValue & 0x1F }
    public var isSuccess: Bool { codeClass == 2 }
    public var description: String { "\(codeClass).\(detail < 10 ? "0" : "")\(detail)" }

    public static let created = CoAPCode(2, 1)
    public static let deleted = CoAPCode(2, 2)
    public static let valid = CoAPCode(2, 3)
    public static let changed = CoAPCode(2, 4)
    public static let content = CoAPCode(2, 5)
    public static let badRequest = CoAPCode(4, 0)
    public static let notFound = CoAPCode(4, 4)
    public static let methodNotAllowed = CoAPCode(4, 5)
    public static let internalServerError = CoAPCode(5, 0)
    public static let serviceUnavailable = CoAPCode(5, 3)
}

/// What a peer answered: its code and its whole payload (Block2 already reassembled).
public struct CoAPResponse: Sendable, Equatable {
    public var code: CoAPCode
    public var payload: [UInt8]

    public init(code: CoAPCode, payload: [UInt8] = []) {
        self.code = code
        self.payload = payload
    }
}

/// A request a peer sent us (to a server's route, or an event to a client): who, what, where.
public struct CoAPIncoming: Sendable, Equatable {
    public var peer: CoAPPeer
    public var method: CoAPMethod
    /// The Uri-Path segments joined by `/`, without a leading one: `"0"`, `"1"`, `""` for `/`.
    public var path: String
    public var payload: [UInt8]
}

/// Why a request got no answer. Never carries a payload (they are HAP ciphertext or secrets).
public enum CoAPError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No answer within the request's deadline (`CoAPClient.request(deadline:)`).
    case deadlineExceeded
    /// libcoap retransmitted the confirmable request MAX_RETRANSMIT times and got no ACK.
    case noAcknowledgement
    /// The peer answered with a Reset (RST): it does not know or want the message.
    case reset
    /// The peer is not reachable (an ICMP error on the socket: port unreachable, no route).
    case unreachable
    /// The address is not a numeric IPv6/IPv4 address, or the URI is not `coap://host:port/path`.
    case badAddress(String)
    /// libcoap could not build or send the request (no session, no memory, payload too large).
    case sendFailed(String)
    /// The answer could not be read (no code, a block reassembly libcoap gave up on).
    case badResponse(String)
    /// The client or server was stopped, or the task waiting was cancelled.
    case closed
    case cancelled

    public var description: String {
        switch self {
        case .deadlineExceeded: "no CoAP response before the deadline"
        case .noAcknowledgement: "no CoAP acknowledgement after the last retransmission"
        case .reset: "the CoAP peer answered with a reset"
        case .unreachable: "the CoAP peer is unreachable"
        case .badAddress(let what): "not a CoAP address: \(what)"
        case .sendFailed(let why): "the CoAP request could not be sent: \(why)"
        case .badResponse(let why): "bad CoAP response: \(why)"
        case .closed: "the CoAP endpoint is closed"
        case .cancelled: "the CoAP request was cancelled"
        }
    }
}

/// RFC 7252 §4.8 transmission parameters for confirmable messages, per peer session.
/// The defaults are RFC 7252's and libcoap's own. libcoap 4.3.1 takes an ACK_TIMEOUT and an
/// ACK_RANDOM_FACTOR of at least 1 and a MAX_RETRANSMIT and NSTART of at least 1; smaller values
/// are raised to those (`effective`), which is what the client waits by.
public struct CoAPTransmission: Sendable, Equatable {
    /// ACK_TIMEOUT: the first retransmission waits this long times a random factor.
    public var ackTimeout: Double = 2
    /// ACK_RANDOM_FACTOR (≥ 1): the first wait is between ackTimeout and ackTimeout × this.
    public var ackRandomFactor: Double = 1.5
    /// MAX_RETRANSMIT: retransmissions before libcoap gives up (`CoAPError.noAcknowledgement`).
    public var maxRetransmit: UInt16 = 4
    /// NSTART: confirmable requests outstanding at once to one peer; libcoap queues the rest in
    /// order. RFC 7252 says 1; HAP controllers keep one request per accessory in flight anyway.
    public var nstart: UInt16 = 1

    public init() {}

    /// The values libcoap applies (see above).
    public var effective: CoAPTransmission {
        var applied = self
        applied.ackTimeout = max(1, ackTimeout)
        applied.ackRandomFactor = max(1, ackRandomFactor)
        applied.maxRetransmit = max(1, maxRetransmit)
        applied.nstart = max(1, nstart)
        return applied
    }
}
