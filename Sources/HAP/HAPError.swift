public import HomeModel

/// An error a user can act on, with a machine `code` and a message that says what to do.
///
/// Codes: `wrong-setup-code`, `already-paired`, `max-peers`, `busy`, `backoff`, `unreachable`,
/// `bad-tlv`, `bad-signature`, `bad-frame`, `oversized-frame`, `bad-http`, `bad-json`, `timeout`,
/// `unknown-pairing`, `key-mismatch`, `not-paired`, `authentication`, `closed`, `io`, `protocol`,
/// `bad-setup-code`, `bad-pairing-file`, `accessory-status`.
public struct HAPError: Error, Sendable, Hashable, CustomStringConvertible {
    public var code: ErrorCode
    public var message: String

    public init(code: ErrorCode, message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }

    static func proto(_ message: String) -> HAPError { HAPError(code: .protocolError, message: message) }
    static func badTLV(_ message: String) -> HAPError { HAPError(code: .badTLV, message: message) }
    static func badFrame(_ message: String) -> HAPError { HAPError(code: .badFrame, message: message) }
    static func badSignature(_ message: String) -> HAPError { HAPError(code: .badSignature, message: message) }
    static func closed(_ message: String = "the accessory closed the connection") -> HAPError {
        HAPError(code: .closed, message: message)
    }

    /// Whether retrying later might succeed (the connection, not our data, was the problem).
    public var isTransient: Bool {
        [.busy, .backoff, .unreachable, .timeout, .closed, .io, .maxPeers].contains(code)
    }

    /// The same failure as an `AccessoryError`, for the `AccessorySource` seam.
    public var accessoryError: AccessoryError {
        switch code {
        case .busy, .backoff: AccessoryError(.busy, message)
        case .timeout: AccessoryError(.timedOut, message)
        default: AccessoryError(.communicationFailure, message)
        }
    }
}

/// The TLV error codes of pair-setup, pair-verify and pairings (HAP spec table 5-5).
enum PairingTLVError: UInt8 {
    case unknown = 1, authentication = 2, backoff = 3, maxPeers = 4, maxTries = 5, unavailable = 6, busy = 7

    /// What the accessory's error means at this step, in terms the user can act on.
    func hapError(during step: String) -> HAPError {
        switch self {
        case .authentication:
            if step == "pair-setup M4" {
                return HAPError(code: .wrongSetupCode, message: "the accessory refused the setup code (wrong code?)")
            }
            return HAPError(
                code: .authentication,
                message:
                    "the accessory refused our credentials during \(step); the pairing may have been removed on the accessory (pair again)"
            )
        case .backoff:
            return HAPError(
                code: .backoff,
                message:
                    "the accessory asks to wait before another pairing attempt (too many failures); try again later")
        case .maxPeers:
            return HAPError(
                code: .maxPeers,
                message:
                    "the accessory has no room for another controller (max peers); remove one of its pairings first")
        case .maxTries:
            return HAPError(code: .backoff, message: "too many failed pairing attempts; reset the accessory or wait")
        case .unavailable:
            return HAPError(
                code: .alreadyPaired,
                message:
                    "the accessory is already paired with another controller; remove it there (or reset the accessory) first"
            )
        case .busy:
            return HAPError(code: .busy, message: "the accessory is busy with another pairing; try again shortly")
        case .unknown:
            return HAPError(code: .protocolError, message: "the accessory reported an unknown error during \(step)")
        }
    }
}
