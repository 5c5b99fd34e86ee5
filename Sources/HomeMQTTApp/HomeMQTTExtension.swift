public import Gateway
public import HomeModel
public import Logging
public import ServiceLifecycle

// A feature of the gateway declared in one type: the config section it reads, the topics it
// publishes outside the homes' base topics, what it puts on the gateway's connection, the
// services it runs beside the gateway, and whether every home gets it. `HomeMQTTApp.extensions`
// lists them; config reading, the ACL file and the build all walk that one list, so a new
// output is a type and a line.

/// One feature of the gateway beside its core (an output, the web view, access control).
public protocol HomeMQTTExtension: Sendable {
    /// Its part of the config file (`homie:`), read by its own module; none by default.
    associatedtype Settings: ConfigSection = NoSettings
    /// Topic prefixes outside the homes' base topics it publishes under (Home Assistant's
    /// discovery, Homie's domain): what the gateway's broker user needs besides the homes, and
    /// what no home's base topic may overlap.
    static func reservedPrefixes(_ settings: Settings) -> [String]
    /// Its outputs on the gateway's own connection; `config`, the home's whole config, for what
    /// it reads of other sections.
    static func outputs(_ settings: Settings, _ config: GatewayConfig) -> [any GatewayOutput]
    /// Runs before the home's gateway is made (the web view's metrics factory, which the
    /// gateway's counters must find already bootstrapped).
    static func prepare(_ settings: Settings)
    /// The services it runs beside the home's gateway, with connections of their own, in start
    /// order (stopped before the gateway).
    static func services(_ settings: Settings, _ home: HomeContext) -> [HomeMQTTApp.ServiceConfiguration]
    /// Whether every home gets it (Homie, Home Assistant) or only the home on the gateway's base
    /// topic (the web view, which serves every home itself).
    static var perHome: Bool { get }
    /// A home's settings other than the first, from the file's (Homie's device id names the
    /// home, so that two homes' devices do not meet).
    static func settings(_ settings: Settings, forHome home: Home) -> Settings
    /// Its management operations (`<base>/$gateway/request/<op>`), answered after the core's
    /// and the sources', whether it is enabled or not (then they say so).
    static var operations: [any ManagementOperation.Type] { get }
}

extension HomeMQTTExtension {
    public static func reservedPrefixes(_ settings: Settings) -> [String] { [] }
    public static func outputs(_ settings: Settings, _ config: GatewayConfig) -> [any GatewayOutput] { [] }
    public static func prepare(_ settings: Settings) {}
    public static func services(_ settings: Settings, _ home: HomeContext) -> [HomeMQTTApp.ServiceConfiguration] {
        []
    }
    public static var perHome: Bool { true }
    public static func settings(_ settings: Settings, forHome home: Home) -> Settings { settings }
    public static var operations: [any ManagementOperation.Type] { [] }

    // Through an existential metatype (`any HomeMQTTExtension.Type`) the settings are reached
    // by these, which name no `Settings` in their signatures.
    static var section: any ConfigSection.Type { Settings.self }

    static func reservedPrefixes(in config: GatewayConfig) -> [String] {
        reservedPrefixes(config[Settings.self])
    }

    static func outputs(in config: GatewayConfig) -> [any GatewayOutput] {
        outputs(config[Settings.self], config)
    }

    static func prepare(in config: GatewayConfig) {
        prepare(config[Settings.self])
    }

    static func services(in home: HomeContext) -> [HomeMQTTApp.ServiceConfiguration] {
        services(home.config[Settings.self], home)
    }

    static func adapt(_ config: inout GatewayConfig, forHome home: Home) {
        config[Settings.self] = settings(config[Settings.self], forHome: home)
    }
}

/// The settings of a feature that has none in the config file (the topic dialect): it reads
/// no key.
public struct NoSettings: ConfigSection {
    public init() {}
    public static func read(_ top: ConfigReader, _ context: ConfigContext) throws(ConfigError) -> Self { Self() }
}

/// What a feature's services are made from: one home's running gateway and config.
public struct HomeContext: Sendable {
    public let gateway: Gateway
    /// The home's view of the home database, as the gateway (and its editor) holds it.
    public let database: HomeDatabase
    /// The home's config (`GatewayConfig.forHome`, with each feature's `settings(forHome:)`),
    /// its `mqtt` the gateway's connection.
    public let config: GatewayConfig
    public let logger: Logger
    /// Told the web view's port once it listens.
    public let webListening: @Sendable (Int) async -> Void
}
