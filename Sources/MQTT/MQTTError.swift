internal import CMosquitto
#if canImport(Glibc)
    import Glibc
#endif

/// Every failure of the MQTT client: a stable machine `code`, the libmosquitto error number and/or
/// the MQTT reason code it came from, and a human message (libmosquitto's own text where there is one).
///
/// Codes in use:
/// - configuration / input: `bad-url`, `invalid-configuration`, `invalid-topic`, `invalid-argument`,
///   `payload-too-large`, `packet-too-large` (beyond the broker's maximum packet size), `malformed-utf8`
/// - transport: `connection-refused` (TCP refused), `unreachable`, `dns`, `connection-lost`, `no-connection`,
///   `keepalive-timeout`, `timeout`, `tls`, `io`, `protocol`
/// - broker refusals (CONNACK / SUBACK / DISCONNECT reason codes): `not-authorized`, `bad-username-or-password`,
///   `client-id-rejected`, `unsupported-protocol`, `server-unavailable`, `server-busy`, `banned`,
///   `server-shutting-down`, `session-taken-over`, `subscription-refused`, `refused` (other refusal)
/// - lifecycle: `closed` (the client was disconnected while the call waited), `cancelled`
public struct MQTTError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A stable, kebab-case machine code; the constants below are every code the client uses.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        public static let administrativeAction = Code(rawValue: "administrative-action")
        public static let badURL = Code(rawValue: "bad-url")
        public static let badUsernameOrPassword = Code(rawValue: "bad-username-or-password")
        public static let banned = Code(rawValue: "banned")
        public static let cancelled = Code(rawValue: "cancelled")
        public static let clientIDRejected = Code(rawValue: "client-id-rejected")
        public static let closed = Code(rawValue: "closed")
        public static let connectionLost = Code(rawValue: "connection-lost")
        public static let connectionRefused = Code(rawValue: "connection-refused")
        public static let dns = Code(rawValue: "dns")
        public static let invalidArgument = Code(rawValue: "invalid-argument")
        public static let invalidConfiguration = Code(rawValue: "invalid-configuration")
        public static let invalidTopic = Code(rawValue: "invalid-topic")
        public static let io = Code(rawValue: "io")
        public static let keepaliveTimeout = Code(rawValue: "keepalive-timeout")
        public static let malformedUTF8 = Code(rawValue: "malformed-utf8")
        public static let noConnection = Code(rawValue: "no-connection")
        public static let noMemory = Code(rawValue: "no-memory")
        public static let notAuthorized = Code(rawValue: "not-authorized")
        public static let notFound = Code(rawValue: "not-found")
        public static let notSupported = Code(rawValue: "not-supported")
        public static let payloadTooLarge = Code(rawValue: "payload-too-large")
        /// A publish whose packet exceeds the broker's maximum packet size (`MQTTBrokerLimits`).
        public static let packetTooLarge = Code(rawValue: "packet-too-large")
        public static let protocolError = Code(rawValue: "protocol")
        public static let qosNotSupported = Code(rawValue: "qos-not-supported")
        public static let quotaExceeded = Code(rawValue: "quota-exceeded")
        public static let refused = Code(rawValue: "refused")
        public static let retainNotSupported = Code(rawValue: "retain-not-supported")
        public static let serverBusy = Code(rawValue: "server-busy")
        public static let serverMoved = Code(rawValue: "server-moved")
        public static let serverShuttingDown = Code(rawValue: "server-shutting-down")
        public static let serverUnavailable = Code(rawValue: "server-unavailable")
        public static let sessionTakenOver = Code(rawValue: "session-taken-over")
        public static let subscriptionRefused = Code(rawValue: "subscription-refused")
        public static let timeout = Code(rawValue: "timeout")
        public static let tls = Code(rawValue: "tls")
        public static let unknown = Code(rawValue: "unknown")
        public static let unreachable = Code(rawValue: "unreachable")
        public static let unsupportedProtocol = Code(rawValue: "unsupported-protocol")
    }

    public var code: Code
    /// The `MOSQ_ERR_*` value this error came from, if any.
    public var mosquittoCode: Int32?
    /// The MQTT reason code (MQTT 5) or CONNACK return code (3.1.1) this error came from, if any.
    public var reasonCode: Int?
    public var message: String

    public init(code: Code, message: String, mosquittoCode: Int32? = nil, reasonCode: Int? = nil) {
        self.code = code
        self.message = message
        self.mosquittoCode = mosquittoCode
        self.reasonCode = reasonCode
    }

    public var description: String {
        var text = "MQTT error \(code): \(message)"
        if let mosquittoCode { text += " [MOSQ_ERR \(mosquittoCode)]" }
        if let reasonCode { text += " [reason \(reasonCode)]" }
        return text
    }

    /// True for refusals caused by credentials or authorisation (retrying will not help).
    public var isAuthenticationFailure: Bool {
        code == .notAuthorized || code == .badUsernameOrPassword
    }

    /// True when retrying later may succeed (the broker or network may come back).
    public var isTransient: Bool {
        switch code {
        case .connectionRefused, .unreachable, .dns, .connectionLost, .noConnection, .keepaliveTimeout,
            .timeout, .io, .serverUnavailable, .serverBusy, .serverShuttingDown:
            return true
        default:
            return false
        }
    }

    static func badURL(_ message: String) -> MQTTError { MQTTError(code: .badURL, message: message) }
    static func invalidConfiguration(_ message: String) -> MQTTError {
        MQTTError(code: .invalidConfiguration, message: message)
    }
    static let closed = MQTTError(code: .closed, message: "the MQTT client was disconnected")
    static let cancelled = MQTTError(code: .cancelled, message: "the operation was cancelled")
    static let notConnected = MQTTError(
        code: .noConnection, message: "the MQTT client is not connected (call connect() first)",
        mosquittoCode: Int32(MOSQ_ERR_NO_CONN.rawValue))

    /// Maps a libmosquitto return value. `savedErrno` must be read right after the failing call on the same
    /// thread, because `MOSQ_ERR_ERRNO` only says "look at errno".
    init(mosquitto rc: Int32, errno savedErrno: Int32 = 0, detail: String? = nil) {
        let text = String(cString: mosquitto_strerror(rc))
        var code: Code
        var message = text
        switch rc {
        case Int32(MOSQ_ERR_NOMEM.rawValue): code = .noMemory
        case Int32(MOSQ_ERR_PROTOCOL.rawValue), Int32(MOSQ_ERR_MALFORMED_PACKET.rawValue),
            Int32(MOSQ_ERR_DUPLICATE_PROPERTY.rawValue):
            code = .protocolError
        case Int32(MOSQ_ERR_INVAL.rawValue): code = .invalidArgument
        case Int32(MOSQ_ERR_NO_CONN.rawValue): code = .noConnection
        case Int32(MOSQ_ERR_CONN_REFUSED.rawValue): code = .refused
        case Int32(MOSQ_ERR_NOT_FOUND.rawValue): code = .notFound
        case Int32(MOSQ_ERR_CONN_LOST.rawValue): code = .connectionLost
        case Int32(MOSQ_ERR_TLS.rawValue), Int32(MOSQ_ERR_TLS_HANDSHAKE.rawValue), Int32(MOSQ_ERR_OCSP.rawValue):
            code = .tls
        case Int32(MOSQ_ERR_PAYLOAD_SIZE.rawValue): code = .payloadTooLarge
        case Int32(MOSQ_ERR_NOT_SUPPORTED.rawValue): code = .notSupported
        case Int32(MOSQ_ERR_AUTH.rawValue): code = .notAuthorized
        case Int32(MOSQ_ERR_ACL_DENIED.rawValue): code = .notAuthorized
        case Int32(MOSQ_ERR_EAI.rawValue), Int32(MOSQ_ERR_LOOKUP.rawValue): code = .dns
        case Int32(MOSQ_ERR_MALFORMED_UTF8.rawValue): code = .malformedUTF8
        case Int32(MOSQ_ERR_KEEPALIVE.rawValue): code = .keepaliveTimeout
        case Int32(MOSQ_ERR_OVERSIZE_PACKET.rawValue): code = .payloadTooLarge
        case Int32(MOSQ_ERR_QOS_NOT_SUPPORTED.rawValue): code = .qosNotSupported
        case Int32(MOSQ_ERR_RETAIN_NOT_SUPPORTED.rawValue): code = .retainNotSupported
        case Int32(MOSQ_ERR_TIMEOUT.rawValue): code = .timeout
        case Int32(MOSQ_ERR_ADMINISTRATIVE_ACTION.rawValue): code = .administrativeAction
        case Int32(MOSQ_ERR_ERRNO.rawValue):
            switch savedErrno {
            case ECONNREFUSED: code = .connectionRefused
            case EHOSTUNREACH, ENETUNREACH, ETIMEDOUT, EHOSTDOWN, ENETDOWN: code = .unreachable
            case ECONNRESET, EPIPE: code = .connectionLost
            case EPROTO: code = .tls
            default: code = .io
            }
            if savedErrno != 0 { message = String(cString: strerror(savedErrno)) }
        default: code = .unknown
        }
        if let detail, !detail.isEmpty { message += " (\(detail))" }
        self.init(code: code, message: message, mosquittoCode: rc)
    }

    /// Maps a broker's refusal: a CONNACK return code for MQTT 3.1.1, an MQTT 5 reason code otherwise.
    init(refusal rc: Int32, protocolVersion: MQTTProtocolVersion) {
        let code: Code
        let text: String
        if protocolVersion == .v311 {
            text = String(cString: mosquitto_connack_string(rc))
            switch rc {
            case 1: code = .unsupportedProtocol
            case 2: code = .clientIDRejected
            case 3: code = .serverUnavailable
            case 4: code = .badUsernameOrPassword
            case 5: code = .notAuthorized
            default: code = .refused
            }
        } else {
            text = String(cString: mosquitto_reason_string(rc))
            code = MQTTError.reasonCodeName(rc)
        }
        self.init(code: code, message: text, mosquittoCode: nil, reasonCode: Int(rc))
    }

    static func reasonCodeName(_ rc: Int32) -> Code {
        switch rc {
        case 132: return .unsupportedProtocol
        case 133: return .clientIDRejected
        case 134: return .badUsernameOrPassword
        case 135: return .notAuthorized
        case 136: return .serverUnavailable
        case 137: return .serverBusy
        case 138: return .banned
        case 139: return .serverShuttingDown
        case 140: return .notAuthorized
        case 141: return .keepaliveTimeout
        case 142: return .sessionTakenOver
        case 143, 144: return .invalidTopic
        case 149: return .payloadTooLarge
        case 151: return .quotaExceeded
        case 152: return .administrativeAction
        case 153: return .malformedUTF8
        case 154: return .retainNotSupported
        case 155: return .qosNotSupported
        case 156, 157: return .serverMoved
        case 159: return .serverBusy
        case 129, 130: return .protocolError
        default: return .refused
        }
    }
}
