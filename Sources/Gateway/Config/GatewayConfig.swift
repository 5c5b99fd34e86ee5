public import Foundation
public import MQTT
public import HomeModel
public import Yams

// The gateway's configuration: the YAML file's broker, sources, scope, outputs' sections and
// state-directory settings, loaded and validated.

/// What a scope list allows: everything but `deny` when `allow` is nil, else only `allow`.
public struct ScopeList: Sendable, Hashable, Codable {
    public var allow: [String]?
    public var deny: [String]

    public init(allow: [String]? = nil, deny: [String] = []) {
        self.allow = allow
        self.deny = deny
    }

    /// The `{allow, deny}` mapping under `key`, in the config file (`single`: one name alone
    /// is a list of one) or in `scope/set`; nil when absent.
    static func read<Node, Failure>(_ key: String, in scope: StrictReader<Node, Failure>, single: Bool)
        throws(Failure) -> ScopeList?
    {
        guard let lists = try scope.reader(key) else { return nil }
        let list = ScopeList(
            allow: try lists.strings("allow", single: single), deny: try lists.strings("deny", single: single) ?? [])
        try lists.finish()
        return list
    }

    public var isUnrestricted: Bool { allow == nil && deny.isEmpty }
}

/// Which parts of the home are published and writable.
public struct ScopeConfig: Sendable, Hashable, Codable {
    public var manufacturers = ScopeList()
    /// HomeKit's user-interactive services only (the default), or every service (`all`).
    public var userInteractiveOnly = true
    public var serviceTypes = ScopeList()
    public var characteristicTypes = ScopeList()
    public var rooms = ScopeList()
    public var accessories = ScopeList()
    /// Accessory names or ids, or topic patterns with `+`/`#`, whose `set` is refused.
    public var readOnly: [String] = []
    /// How often, and by how much, characteristics' `state` may change (`RateLimits.swift`).
    /// Nil, not empty, when none are set: `scope/get` and the stored scope then say nothing of
    /// them, as before they existed.
    public var rateLimits: [RateLimit]?

    public init() {}

    enum CodingKeys: String, CodingKey {
        case manufacturers
        case userInteractiveOnly = "user-interactive-only"
        case serviceTypes = "service-types"
        case characteristicTypes = "characteristic-types"
        case rooms, accessories
        case readOnly = "read-only"
        case rateLimits = "rate-limits"
    }
}

/// What decides the state directory, strongest first: the command line's `--state-directory`,
/// then `$STATE_DIRECTORY` (systemd sets it for a unit's `StateDirectory=`, the one place a
/// sandboxed service may write), then the config's `state-directory` (relative to the file),
/// then `.homemqtt` beside the config file.
public enum StateDirectorySource: String, Sendable, Hashable {
    case option = "--state-directory"
    case environment = "$STATE_DIRECTORY"
    case config = "state-directory"
    case `default` = "default"

    /// The first path of `$STATE_DIRECTORY`: systemd gives one per `StateDirectory=` entry,
    /// separated by ':'. Nil when it is unset or empty.
    public static func systemdDirectory(_ environment: [String: String]) -> String? {
        guard let value = environment["STATE_DIRECTORY"],
            let first = value.split(separator: ":", omittingEmptySubsequences: true).first
        else { return nil }
        return String(first)
    }
}

public struct GatewayConfig: Sendable {
    public var file: String
    public var mqtt: MQTTConfiguration
    /// The broker URL as configured, its password masked (`MaskedURL`), for logs and errors.
    public var brokerDisplay: String
    public var qos: MQTTQoS = .atLeastOnce
    public var baseTopic = "home"
    /// Set when this config serves a home other than the one on the gateway's base topic
    /// (`forHome`): the gateway's own base topic, which `baseTopic` then is not.
    public var gatewayBaseTopic: String?
    /// Topic prefixes the gateway publishes under beside the homes' base topics (Home
    /// Assistant's discovery prefix, Homie's domain), set by the app that reads the config.
    public var reservedTopicPrefixes: [String] = []
    /// The gateway's own base topic, whichever home this config serves.
    public var gatewayBase: String { gatewayBaseTopic ?? baseTopic }
    /// The home database, the run-time scope and the HAP pairings. See `StateDirectorySource`
    /// for what decides it.
    public var stateDirectory: String
    public var stateDirectorySource = StateDirectorySource.default
    public var pollInterval: Double = 60
    public var requestTimeout: Double = 10
    /// Seconds between refreshes of the retained `<base>/$gateway/health`; 0: none published.
    public var healthInterval: Double = 60
    /// Seconds between refreshes of an accessory's retained `$last-seen` (while it is heard
    /// from); 0: none published.
    public var lastSeenInterval: Double = 60
    /// The largest `$gateway/tree` published whole, in bytes; a larger one goes in pages of at
    /// most this size whatever the broker takes (a 5 MB retained message is a burden to every
    /// subscriber of the base, and to a broker that keeps it). 0: whole unless the broker's
    /// maximum packet size needs pages.
    public var treePageSize = 262_144
    /// The smallest `tree-page-size`: a page holds an accessory (or one service of one) at least.
    public static let smallestTreePage = 16_384
    public var scope = ScopeConfig()
    /// `sources:`, each entry read by its kind's factory (`SourceFactory`).
    public var sources: [SourceConfig] = []
    public var logLevel = "info"
    /// The parts of the file other modules read (`ConfigSection`): `config[SomeSection.self]`.
    public var sections = ConfigSections()

    /// The built-in default: a local broker; the sources are those a file without `sources:`
    /// gets only when it is read (`parse`), by the factories it is read with.
    public init(file: String = "(defaults)", directory: String = "Config") {
        self.file = file
        self.mqtt = MQTTConfiguration(host: "127.0.0.1", port: 1883)
        self.mqtt.clientID = "homemqtt"
        // MQTT 5 unless the broker refuses it; an explicit `protocol` turns this off.
        self.mqtt.fallBackToMQTT311 = true
        Self.applyGatewayOptions(&mqtt)
        // A persistent session: the broker keeps the gateway's subscriptions and queues the
        // sets sent while it is away (restarting, reconnecting), so that each is answered.
        self.mqtt.cleanStart = false
        self.mqtt.sessionExpiry = Self.defaultSessionExpiry
        self.brokerDisplay = "mqtt://127.0.0.1:1883"
        self.stateDirectory = ".homemqtt"
    }

    /// Loads and validates a YAML config file. Relative paths in it are relative to the file.
    /// `environment` supplies `HOMEMQTT_BROKER_URL`, `HOMEMQTT_MQTT_USERNAME`,
    /// `HOMEMQTT_MQTT_PASSWORD` and `STATE_DIRECTORY`; `stateDirectory` is the command line's
    /// `--state-directory`, which overrides them all.
    /// `sections` are the parts of the file other modules read, and `sources` the kinds of
    /// source `sources:` may name (the composition root's lists); a key none of them reads is
    /// an unknown key, a `type` none of them has an error naming those they have.
    public static func load(
        file: String, environment: [String: String] = ProcessInfo.processInfo.environment,
        stateDirectory: String? = nil,
        sections: [any ConfigSection.Type] = [], sources: [any SourceFactory.Type] = []
    ) throws(ConfigError) -> GatewayConfig {
        try parse(
            try ConfigFile.read(file), file: file, environment: environment, stateDirectory: stateDirectory,
            sections: sections, sources: sources)
    }

    public static func parse(
        _ text: String, file: String, environment: [String: String] = [:], stateDirectory option: String? = nil,
        sections: [any ConfigSection.Type] = [], sources factories: [any SourceFactory.Type] = []
    ) throws(ConfigError) -> GatewayConfig {
        let directory = (file as NSString).deletingLastPathComponent
        func resolve(_ path: String) -> String {
            if path.hasPrefix("/") || directory.isEmpty { return path }
            return (directory as NSString).appendingPathComponent(path)
        }
        let root: Node?
        do {
            root = try Node.compose(yaml: text)
        } catch {
            throw ConfigError(file: file, key: nil, message: ConfigFile.yamlProblem(error), code: .invalidYAML)
        }
        var config = GatewayConfig(file: file, directory: directory.isEmpty ? "." : directory)
        config.stateDirectory = resolve(".homemqtt")
        let top = try ConfigReader(root, failure: ConfigError.reading(file))

        if let broker = try top.reader("broker") {
            try config.readBroker(broker, resolve: resolve)
            try broker.finish()
        }
        if let url = environment["HOMEMQTT_BROKER_URL"], !url.isEmpty {
            try config.applyURL(url, key: "HOMEMQTT_BROKER_URL")
        }
        if let user = environment["HOMEMQTT_MQTT_USERNAME"], !user.isEmpty { config.mqtt.username = user }
        if let password = environment["HOMEMQTT_MQTT_PASSWORD"], !password.isEmpty { config.mqtt.password = password }

        if let base = try top.string("base-topic") {
            let segments = base.split(separator: "/", omittingEmptySubsequences: false)
            guard !base.isEmpty, !segments.contains(where: \.isEmpty),
                !base.contains(where: { "+#$".contains($0) })
            else {
                throw top.error(
                    "base-topic", "must be one or more non-empty topic levels without +, # or $, got '\(base)'")
            }
            config.baseTopic = base
        }
        if let dir = try top.string("state-directory") {
            (config.stateDirectory, config.stateDirectorySource) = (resolve(dir), .config)
        }
        if let directory = StateDirectorySource.systemdDirectory(environment) {
            (config.stateDirectory, config.stateDirectorySource) = (directory, .environment)
        }
        if let option, !option.isEmpty {
            (config.stateDirectory, config.stateDirectorySource) = (option, .option)
        }
        if let poll = try top.double("poll-interval") {
            guard poll >= 0 else { throw top.error("poll-interval", "must be 0 (off) or a number of seconds") }
            config.pollInterval = poll
        }
        if let timeout = try top.double("request-timeout") {
            guard timeout > 0 else { throw top.error("request-timeout", "must be a positive number of seconds") }
            config.requestTimeout = timeout
        }
        if let interval = try top.double("health-interval") {
            guard interval == 0 || (1...86_400).contains(interval) else {
                throw top.error(
                    "health-interval",
                    "must be 0 (no health document) or 1…86400 seconds between refreshes, got \(interval)")
            }
            config.healthInterval = interval
        }
        if let interval = try top.double("last-seen-interval") {
            guard interval == 0 || (1...86_400).contains(interval) else {
                throw top.error(
                    "last-seen-interval",
                    "must be 0 (no $last-seen) or 1…86400 seconds between refreshes, got \(interval)")
            }
            config.lastSeenInterval = interval
        }
        if let size = try top.int("tree-page-size") {
            guard size == 0 || (Self.smallestTreePage...MQTTBrokerLimits.protocolMaximumPacketSize).contains(size)
            else {
                throw top.error(
                    "tree-page-size",
                    "must be 0 (whole unless the broker needs pages) or \(Self.smallestTreePage)…"
                        + "\(MQTTBrokerLimits.protocolMaximumPacketSize) bytes, got \(size)")
            }
            config.treePageSize = size
        }
        if let scope = try top.reader("scope") {
            config.scope = try ScopeConfig.read(scope)
            try scope.finish()
        }
        let context = ConfigContext(file: file, environment: environment, directory: directory)
        try config.readSources(top, factories, context)
        for section in sections { try config.sections.read(section, top, context) }
        if let level = try top.string("log-level") {
            let levels = ["trace", "debug", "info", "notice", "warning", "error", "critical"]
            guard levels.contains(level) else {
                throw top.error("log-level", "expected one of \(levels.joined(separator: ", "))")
            }
            config.logLevel = level
        }
        try top.finish()
        return config
    }

    private mutating func applyURL(_ url: String, key: String) throws(ConfigError) {
        let keep = (mqtt.clientID, mqtt.protocolVersion, mqtt.keepAlive, mqtt.tls)
        let session = (mqtt.cleanStart, mqtt.sessionExpiry)
        let limits = (mqtt.maximumPacketSize, mqtt.fallBackToMQTT311, mqtt.maximumTopicLevels)
        do {
            mqtt = try MQTTConfiguration(url: url)
        } catch {
            // The MQTT module quotes the URL whole; the message must not carry its password.
            throw ConfigError(file: file, key: key, message: MaskedURL.scrubbing(error.message, passwordOf: url))
        }
        if mqtt.tls == nil { mqtt.tls = keep.3 }
        Self.applyGatewayOptions(&mqtt)
        (mqtt.clientID, mqtt.protocolVersion, mqtt.keepAlive) = (keep.0, keep.1, keep.2)
        (mqtt.cleanStart, mqtt.sessionExpiry) = session
        (mqtt.maximumPacketSize, mqtt.fallBackToMQTT311, mqtt.maximumTopicLevels) = limits
        brokerDisplay = MaskedURL.masked(url)
    }

    /// The gateway needs its own publications not echoed back (no-local), and retained
    /// requests recognisable when forwarded live (retain-as-published).
    public static func applyGatewayOptions(_ mqtt: inout MQTTConfiguration) {
        mqtt.noLocal = true
        mqtt.retainAsPublished = true
    }

    /// How long the broker keeps the gateway's session while it is away: an hour of queued sets
    /// is as much as a user would still want applied.
    public static let defaultSessionExpiry: UInt32 = 3600

    private mutating func readBroker(_ broker: ConfigReader, resolve: (String) -> String) throws(ConfigError) {
        if let url = try broker.string("url") { try applyURL(url, key: broker.keyPath("url")) }
        if let id = try broker.string("client-id") {
            guard !id.isEmpty, id.utf8.count <= 65535 else { throw broker.error("client-id", "must not be empty") }
            mqtt.clientID = id
        }
        if let user = try broker.string("username") { mqtt.username = user }
        if let password = try broker.string("password") { mqtt.password = password }
        if let passwordFile = try broker.string("password-file") {
            let path = resolve(passwordFile)
            guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8)
            else {
                throw broker.error("password-file", "cannot read '\(path)'")
            }
            mqtt.password = text.trimmingCharacters(in: .newlines)
        }
        if let version = try broker.string("protocol") {
            switch version {
            case "5", "5.0": mqtt.protocolVersion = .v5
            case "3.1.1", "4": mqtt.protocolVersion = .v311
            default: throw broker.error("protocol", "expected 5 or 3.1.1, got '\(version)'")
            }
            mqtt.fallBackToMQTT311 = false
        }
        if let size = try broker.int("max-packet-size") {
            guard (128...MQTTBrokerLimits.protocolMaximumPacketSize).contains(size) else {
                throw broker.error(
                    "max-packet-size",
                    "must be 128…\(MQTTBrokerLimits.protocolMaximumPacketSize) bytes: the broker's "
                        + "max_packet_size (or message size limit), got \(size)")
            }
            mqtt.maximumPacketSize = size
        }
        if let levels = try broker.int("max-topic-levels") {
            guard (8...65535).contains(levels) else {
                throw broker.error(
                    "max-topic-levels",
                    "must be 8…65535: the most levels a topic may have on the broker (mosquitto: "
                        + "\(MQTTConfiguration.mosquittoTopicLevels), EMQX: max_topic_levels), got \(levels)")
            }
            mqtt.maximumTopicLevels = levels
        }
        if let keepAlive = try broker.int("keepalive") {
            guard (5...65535).contains(keepAlive) else { throw broker.error("keepalive", "must be 5…65535 seconds") }
            mqtt.keepAlive = keepAlive
        }
        if let expiry = try broker.int("session-expiry") {
            guard (0...Int(UInt32.max)).contains(expiry) else {
                throw broker.error(
                    "session-expiry", "must be 0 (a clean session at every connect) or a number of seconds")
            }
            mqtt.cleanStart = expiry == 0
            mqtt.sessionExpiry = expiry == 0 ? nil : UInt32(expiry)
        }
        if let qos = try broker.int("qos") {
            guard let value = MQTTQoS(rawValue: qos) else { throw broker.error("qos", "must be 0, 1 or 2") }
            self.qos = value
        }
        if let tls = try broker.reader("tls") {
            var settings = mqtt.tls ?? MQTTTLS()
            if let ca = try tls.string("ca-file") { settings.caFile = resolve(ca) }
            if let ca = try tls.string("ca-directory") { settings.caDirectory = resolve(ca) }
            if let cert = try tls.string("cert-file") { settings.certificateFile = resolve(cert) }
            if let key = try tls.string("key-file") { settings.keyFile = resolve(key) }
            if let insecure = try tls.bool("insecure") { settings.insecure = insecure }
            for (key, path) in [
                ("ca-file", settings.caFile), ("cert-file", settings.certificateFile), ("key-file", settings.keyFile),
            ] {
                if let path, !FileManager.default.isReadableFile(atPath: path) {
                    throw tls.error(key, "cannot read '\(path)'")
                }
            }
            if (settings.certificateFile == nil) != (settings.keyFile == nil) {
                throw tls.error("cert-file", "cert-file and key-file go together")
            }
            mqtt.tls = settings
            try tls.finish()
        }
    }
}

/// The config file's reader: its errors are `ConfigError`s naming the file and key.
public typealias ConfigReader = StrictReader<Node, ConfigError>

extension ConfigError {
    static func reading(_ file: String) -> ConfigReader.MakeFailure {
        { code, key, message in
            ConfigError(file: file, key: key, message: message, code: code == .unknownKey ? .unknownKey : .invalidValue)
        }
    }
}

extension ScopeConfig {
    /// Reads a scope mapping (`scope:`, or a front end's own, such as `homekit.scope`); the
    /// caller finishes the reader.
    public static func read(_ scope: ConfigReader) throws(ConfigError) -> ScopeConfig {
        var config = ScopeConfig()
        func list(_ key: String, _ scope: ConfigReader) throws(ConfigError) -> ScopeList {
            try ScopeList.read(key, in: scope, single: true) ?? ScopeList()
        }
        config.manufacturers = try list("manufacturers", scope)
        config.serviceTypes = try list("service-types", scope)
        config.characteristicTypes = try list("characteristic-types", scope)
        config.rooms = try list("rooms", scope)
        config.accessories = try list("accessories", scope)
        // One vocabulary with `scope/get`, `scope/set` and the stored scope:
        // `user-interactive-only`. `services: user-interactive|all` is its older name, still read.
        if let only = try scope.bool("user-interactive-only") {
            if scope.has("services") {
                throw scope.error(
                    "services", "services is the older name of user-interactive-only (all is false): give one of them")
            }
            config.userInteractiveOnly = only
        } else if let services = try scope.string("services") {
            switch services {
            case "user-interactive": config.userInteractiveOnly = true
            case "all": config.userInteractiveOnly = false
            default:
                throw scope.error(
                    "services",
                    "expected user-interactive or all, got '\(services)' (the newer key: user-interactive-only: true|false)"
                )
            }
        }
        config.readOnly = try scope.strings("read-only", single: true) ?? []
        config.rateLimits = try RateLimit.readList("rate-limits", in: scope)
        return config
    }
}
