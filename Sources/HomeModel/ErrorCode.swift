// Every machine code an error of HomeMQTT carries, in one place: on MQTT in `result` and
// response messages, on the CLI after the file and key, and in tests. A code is a constant of
// this type, never a string written at the place that throws, so one meaning has one spelling.

/// A stable, kebab-case machine code (`out-of-range`), as scripts match on it.
public struct ErrorCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }
}

// Requests and payloads on MQTT (`set`, `get`, `$toggle`, management requests).
extension ErrorCode {
    /// The payload was empty where a value or a JSON object was needed.
    public static let empty = ErrorCode(rawValue: "empty")
    public static let invalidJSON = ErrorCode(rawValue: "invalid-json")
    /// A JSON `set` without `value`.
    public static let missingValue = ErrorCode(rawValue: "missing-value")
    public static let missingField = ErrorCode(rawValue: "missing-field")
    public static let invalidField = ErrorCode(rawValue: "invalid-field")
    public static let unknownField = ErrorCode(rawValue: "unknown-field")
    public static let unknownOp = ErrorCode(rawValue: "unknown-op")
    /// A request on a topic the gateway does not serve (a name from before a rename, a typo).
    public static let unknownTopic = ErrorCode(rawValue: "unknown-topic")
    /// An in-process request (the web view, Homie) while the gateway is not online.
    public static let unavailable = ErrorCode(rawValue: "unavailable")
    /// A payload that is neither a plain value nor a JSON object.
    public static let invalidPayload = ErrorCode(rawValue: "invalid-payload")
    /// A retained request: never applied, and left for the client that published it to clear.
    public static let retained = ErrorCode(rawValue: "retained")
    /// A name that matches more than one room, accessory or service.
    public static let ambiguous = ErrorCode(rawValue: "ambiguous")
    public static let unknownRoom = ErrorCode(rawValue: "unknown-room")
    public static let unknownAccessory = ErrorCode(rawValue: "unknown-accessory")
    public static let unknownService = ErrorCode(rawValue: "unknown-service")
    /// `$toggle` on a service without a primary control.
    public static let notToggleable = ErrorCode(rawValue: "not-toggleable")
    /// The characteristic can be written, but the gateway's scope makes it read-only.
    public static let readOnlyScope = ErrorCode(rawValue: "read-only-scope")
    public static let invalidScope = ErrorCode(rawValue: "invalid-scope")
    /// `pair`/`unpair` with no `hap` source configured.
    public static let noPairingSource = ErrorCode(rawValue: "no-pairing-source")
    /// A CLI command that only the running gateway can carry out.
    public static let needsGateway = ErrorCode(rawValue: "needs-gateway")
    /// The CLI could not load the configuration it needs for a request.
    public static let invalidConfig = ErrorCode(rawValue: "invalid-config")
    /// An answer or document larger than the broker's maximum packet size: not sent.
    public static let tooLarge = ErrorCode(rawValue: "too-large")
    /// A fault of the gateway itself, not of the request.
    public static let `internal` = ErrorCode(rawValue: "internal")
}

// Values, checked against a characteristic's metadata (the same checks for every source).
extension ErrorCode {
    public static let invalidType = ErrorCode(rawValue: "invalid-type")
    public static let outOfRange = ErrorCode(rawValue: "out-of-range")
    public static let notAStep = ErrorCode(rawValue: "not-a-step")
    public static let notAValidValue = ErrorCode(rawValue: "not-a-valid-value")
    public static let tooLong = ErrorCode(rawValue: "too-long")
    /// The characteristic cannot be written at all.
    public static let readOnly = ErrorCode(rawValue: "read-only")
    /// A value or setting that is wrong for another reason; also HAP's status -70410.
    public static let invalidValue = ErrorCode(rawValue: "invalid-value")
}

// What an accessory answers (HAP statuses) or what reaching it failed with.
extension ErrorCode {
    public static let unreachable = ErrorCode(rawValue: "unreachable")
    public static let busy = ErrorCode(rawValue: "busy")
    public static let timeout = ErrorCode(rawValue: "timeout")
    public static let insufficientPrivileges = ErrorCode(rawValue: "insufficient-privileges")
    public static let writeOnly = ErrorCode(rawValue: "write-only")
    public static let notificationNotSupported = ErrorCode(rawValue: "notification-not-supported")
    public static let outOfResources = ErrorCode(rawValue: "out-of-resources")
    public static let doesNotExist = ErrorCode(rawValue: "does-not-exist")
    public static let insufficientAuthorization = ErrorCode(rawValue: "insufficient-authorization")
    /// An operating-system read or write failed (a file of the state directory, a socket).
    public static let io = ErrorCode(rawValue: "io")
    public static let closed = ErrorCode(rawValue: "closed")
    public static let cancelled = ErrorCode(rawValue: "cancelled")
}

// The home database and the model.
extension ErrorCode {
    public static let corruptDatabase = ErrorCode(rawValue: "corrupt-database")
    /// A home database, state directory, state file or backup written by a newer HomeMQTT.
    public static let unsupportedVersion = ErrorCode(rawValue: "unsupported-version")
    /// Another process holds the state directory's lock.
    public static let locked = ErrorCode(rawValue: "locked")
    /// A command that writes the state directory run by another user than its owner.
    public static let wrongOwner = ErrorCode(rawValue: "wrong-owner")
    /// A restore into a state directory that already holds state, without `--replace`.
    public static let stateNotEmpty = ErrorCode(rawValue: "state-not-empty")
    /// A test hook stopped an atomic write part-way.
    public static let writeInterrupted = ErrorCode(rawValue: "write-interrupted")
    /// The default room cannot be removed or renamed away.
    public static let defaultRoom = ErrorCode(rawValue: "default-room")
    public static let duplicateName = ErrorCode(rawValue: "duplicate-name")
    /// No home with that id or name.
    public static let unknownHome = ErrorCode(rawValue: "unknown-home")
    /// A home that still holds accessories cannot be removed unless told where they go.
    public static let homeNotEmpty = ErrorCode(rawValue: "home-not-empty")
    /// The primary home, or the home served on the gateway's own base topic, cannot be removed.
    public static let protectedHome = ErrorCode(rawValue: "protected-home")
    /// A home's base topic that is not a valid topic prefix, or overlaps another home's.
    public static let invalidBaseTopic = ErrorCode(rawValue: "invalid-base-topic")
    public static let invalidName = ErrorCode(rawValue: "invalid-name")
    public static let unknownPermission = ErrorCode(rawValue: "unknown-permission")
    /// An `/accessories` document that is not the shape HAP defines.
    public static let badAccessories = ErrorCode(rawValue: "bad-accessories")
}

// Accessory files of the simulator.
extension ErrorCode {
    public static let yamlSyntax = ErrorCode(rawValue: "yaml-syntax")
    public static let unknownKey = ErrorCode(rawValue: "unknown-key")
    public static let missingKey = ErrorCode(rawValue: "missing-key")
    public static let duplicateKey = ErrorCode(rawValue: "duplicate-key")
    public static let unknownType = ErrorCode(rawValue: "unknown-type")
    public static let duplicateUUID = ErrorCode(rawValue: "duplicate-uuid")
    public static let duplicateID = ErrorCode(rawValue: "duplicate-id")
    /// A HAP `/accessories` dump that cannot be imported.
    public static let invalidDump = ErrorCode(rawValue: "invalid-dump")
}

// HAP pairing and sessions.
extension ErrorCode {
    public static let wrongSetupCode = ErrorCode(rawValue: "wrong-setup-code")
    /// A setup code not of the form `XXX-XX-XXX`.
    public static let badSetupCode = ErrorCode(rawValue: "bad-setup-code")
    public static let alreadyPaired = ErrorCode(rawValue: "already-paired")
    public static let maxPeers = ErrorCode(rawValue: "max-peers")
    /// The accessory asks to wait before another attempt.
    public static let backoff = ErrorCode(rawValue: "backoff")
    /// The accessory refused our credentials (the pairing was removed on its side?).
    public static let authentication = ErrorCode(rawValue: "authentication")
    public static let badTLV = ErrorCode(rawValue: "bad-tlv")
    public static let badSignature = ErrorCode(rawValue: "bad-signature")
    public static let badFrame = ErrorCode(rawValue: "bad-frame")
    public static let oversizedFrame = ErrorCode(rawValue: "oversized-frame")
    public static let badHTTP = ErrorCode(rawValue: "bad-http")
    public static let badJSON = ErrorCode(rawValue: "bad-json")
    public static let unknownPairing = ErrorCode(rawValue: "unknown-pairing")
    public static let badPairingFile = ErrorCode(rawValue: "bad-pairing-file")
    /// The accessory broke the protocol in another way.
    public static let protocolError = ErrorCode(rawValue: "protocol")
}

// The web view: its HTTP routes and its WebSocket.
extension ErrorCode {
    /// No token, or a wrong one, where the web view asks for one.
    public static let unauthorized = ErrorCode(rawValue: "unauthorized")
    /// A browser's request from a page of another site (cross-site request forgery), or one
    /// naming a `Host` that is not a loopback literal while no token is configured (DNS
    /// rebinding).
    public static let forbiddenOrigin = ErrorCode(rawValue: "forbidden-origin")
    /// A request head larger than `web.max-header-bytes` (HTTP 431).
    public static let headerTooLarge = ErrorCode(rawValue: "header-too-large")
    /// A path the web view does not serve.
    public static let notFound = ErrorCode(rawValue: "not-found")
    /// A request topic outside the base topic, or one with wildcards.
    public static let invalidTopic = ErrorCode(rawValue: "invalid-topic")
}
