internal import CMosquitto
#if canImport(Glibc)
import Glibc
#endif

/// Every failure of the MQTT client: a stable machine `code`, the libmosquitto error number and/or
/// the MQTT reason code it came from, and a human message (libmosquitto's own text where there is one).
///
/// Codes in use:
/// - configuration / input: `bad-url`, `invalid-configuration`, `invalid-topic`, `invalid-argument`,
///   `payload-too-large`, `malformed-utf8`
/// - transport: `connection-refused` (TCP refused), `unreachable`, `dns`, `connection-lost`, `no-connection`,
///   `keepalive-timeout`, `timeout`, `tls`, `io`, `protocol`
/// - broker refusals (CONNACK / SUBACK / DISCONNECT reason codes): `not-authorized`, `bad-username-or-password`,
///   `client-id-rejected`, `unsupported-protocol`, `server-unavailable`, `server-busy`, `banned`,
///   `server-shutting-down`, `session-taken-over`, `subscription-refused`, `refused` (other refusal)
/// - lifecycle: `closed` (the client was disconnected while the call waited), `cancelled`
public struct MQTTError: Error, Sendable, Hashable, CustomStringConvertible {
    public var code: String
    /// The `MOSQ_ERR_*` value this error came from, if any.
    public var mosquittoCode: Int32?
    /// The MQTT reason code (MQTT 5) or CONNACK return code (3.1.1) this error came from, if any.
    public var reasonCode: Int?
    public var message: String

    public init(code: String, message: String, mosquittoCode: Int32? = nil, reasonCode: Int? = nil) {
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
        code == "not-authorized" || code == "bad-username-or-password"
    }

    /// True when retrying later may succeed (the broker or network may come back).
    public var isTransient: Bool {
        switch code {
        case "connection-refused", "unreachable", "dns", "connection-lost", "no-connection", "keepalive-timeout",
             "timeout", "io", "server-unavailable", "server-busy", "server-shutting-down":
            return true
        default:
            return false
        }
    }

    static func badURL(_ message: String) -> MQTTError { MQTTError(code: "bad-url", message: message) }
    static func invalidConfiguration(_ message: String) -> MQTTError {
        MQTTError(code: "invalid-configuration", message: message)
    }
    static let closed = MQTTError(code: "closed", message: "the MQTT client was disconnected")
    static let cancelled = MQTTError(code: "cancelled", message: "the operation was cancelled")
    static let notConnected = MQTTError(
        code: "no-connection", message: "the MQTT client is not connected (call connect() first)",
        mosquittoCode: Int32(MOSQ_ERR_NO_CONN.rawValue))

    /// Maps a libmosquitto return value. `savedErrno` must be read right after the failing call on the same
    /// thread, because `MOSQ_ERR_ERRNO` only says "look at errno".
    init(mosquitto rc: Int32, errno savedErrno: Int32 = 0, detail: String? = nil) {
        let text = String(cString: mosquitto_strerror(rc))
        var code: String
        var message = text
        switch rc {
        case Int32(MOSQ_ERR_NOMEM.rawValue): code = "no-memory"
        case Int32(MOSQ_ERR_PROTOCOL.rawValue), Int32(MOSQ_ERR_MALFORMED_PACKET.rawValue),
             Int32(MOSQ_ERR_DUPLICATE_PROPERTY.rawValue):
            code = "protocol"
        case Int32(MOSQ_ERR_INVAL.rawValue): code = "invalid-argument"
        case Int32(MOSQ_ERR_NO_CONN.rawValue): code = "no-connection"
        case Int32(MOSQ_ERR_CONN_REFUSED.rawValue): code = "refused"
        case Int32(MOSQ_ERR_NOT_FOUND.rawValue): code = "not-found"
        case Int32(MOSQ_ERR_CONN_LOST.rawValue): code = "connection-lost"
        case Int32(MOSQ_ERR_TLS.rawValue), Int32(MOSQ_ERR_TLS_HANDSHAKE.rawValue), Int32(MOSQ_ERR_OCSP.rawValue):
            code = "tls"
        case Int32(MOSQ_ERR_PAYLOAD_SIZE.rawValue): code = "payload-too-large"
        case Int32(MOSQ_ERR_NOT_SUPPORTED.rawValue): code = "not-supported"
        case Int32(MOSQ_ERR_AUTH.rawValue): code = "not-authorized"
        case Int32(MOSQ_ERR_ACL_DENIED.rawValue): code = "not-authorized"
        case Int32(MOSQ_ERR_EAI.rawValue), Int32(MOSQ_ERR_LOOKUP.rawValue): code = "dns"
        case Int32(MOSQ_ERR_MALFORMED_UTF8.rawValue): code = "malformed-utf8"
        case Int32(MOSQ_ERR_KEEPALIVE.rawValue): code = "keepalive-timeout"
        case Int32(MOSQ_ERR_OVERSIZE_PACKET.rawValue): code = "payload-too-large"
        case Int32(MOSQ_ERR_QOS_NOT_SUPPORTED.rawValue): code = "qos-not-supported"
        case Int32(MOSQ_ERR_RETAIN_NOT_SUPPORTED.rawValue): code = "retain-not-supported"
        case Int32(MOSQ_ERR_TIMEOUT.rawValue): code = "timeout"
        case Int32(MOSQ_ERR_ADMINISTRATIVE_ACTION.rawValue): code = "administrative-action"
        case Int32(MOSQ_ERR_ERRNO.rawValue):
            switch savedErrno {
            case ECONNREFUSED: code = "connection-refused"
            case EHOSTUNREACH, ENETUNREACH, ETIMEDOUT, EHOSTDOWN, ENETDOWN: code = "unreachable"
            case ECONNRESET, EPIPE: code = "connection-lost"
            case EPROTO: code = "tls"
            default: code = "io"
            }
            if savedErrno != 0 { message = String(cString: strerror(savedErrno)) }
        default: code = "unknown"
        }
        if let detail, !detail.isEmpty { message += " (\(detail))" }
        self.init(code: code, message: message, mosquittoCode: rc)
    }

    /// Maps a broker's refusal: a CONNACK return code for MQTT 3.1.1, an MQTT 5 reason code otherwise.
    init(refusal rc: Int32, protocolVersion: MQTTProtocolVersion) {
        let code: String
        let text: String
        if protocolVersion == .v311 {
            text = String(cString: mosquitto_connack_string(rc))
            switch rc {
            case 1: code = "unsupported-protocol"
            case 2: code = "client-id-rejected"
            case 3: code = "server-unavailable"
            case 4: code = "bad-username-or-password"
            case 5: code = "not-authorized"
            default: code = "refused"
            }
        } else {
            text = String(cString: mosquitto_reason_string(rc))
            code = MQTTError.reasonCodeName(rc)
        }
        self.init(code: code, message: text, mosquittoCode: nil, reasonCode: Int(rc))
    }

    static func reasonCodeName(_ rc: Int32) -> String {
        switch rc {
        case 132: return "unsupported-protocol"
        case 133: return "client-id-rejected"
        case 134: return "bad-username-or-password"
        case 135: return "not-authorized"
        case 136: return "server-unavailable"
        case 137: return "server-busy"
        case 138: return "banned"
        case 139: return "server-shutting-down"
        case 140: return "not-authorized"
        case 141: return "keepalive-timeout"
        case 142: return "session-taken-over"
        case 143, 144: return "invalid-topic"
        case 149: return "payload-too-large"
        case 151: return "quota-exceeded"
        case 152: return "administrative-action"
        case 153: return "malformed-utf8"
        case 154: return "retain-not-supported"
        case 155: return "qos-not-supported"
        case 156, 157: return "server-moved"
        case 159: return "server-busy"
        case 129, 130: return "protocol"
        default: return "refused"
        }
    }
}
