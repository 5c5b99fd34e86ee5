public import Foundation
public import Gateway
public import Logging

/// The composition root: what makes a HomeMQTT gateway, listed once, for the `homemqtt`
/// binary, the bench and the tests alike. Adding a feature or a source is a type and a line here.
public enum HomeMQTTApp {
    /// The features beside the core, each declared in one type (`HomeMQTTExtension`): their
    /// config sections (an unknown key's error lists them as allowed in this order, after the
    /// core's keys), the topics they publish outside the base, their outputs on the gateway's
    /// connection (their documents published in this order) and their services (started in this
    /// order).
    public static let extensions: [any HomeMQTTExtension.Type] = [
        AccessoryStateFeature.self,
        HomeAssistantFeature.self,
        HomieFeature.self,
        WebFeature.self,
        HomeKitFeature.self,
        AccessFeature.self,
        // Last: the topic dialect takes every request that no output before it took.
        TopicRequestsFeature.self,
    ]

    /// The kinds of source `sources:` may name, each read and made by its factory, each
    /// bringing its own operations (and pairing, when it pairs).
    public static let sources: [any SourceFactory.Type] = [
        SimulatorFactory.self,
        HAPFactory.self,
    ]

    /// Loads a config file with every section of `extensions` (see `GatewayConfig.load`).
    public static func loadConfig(
        file: String, environment: [String: String] = ProcessInfo.processInfo.environment,
        stateDirectory: String? = nil,
        extensions: [any HomeMQTTExtension.Type] = HomeMQTTApp.extensions,
        sources: [any SourceFactory.Type] = HomeMQTTApp.sources
    ) throws(ConfigError) -> GatewayConfig {
        var config = try GatewayConfig.load(
            file: file, environment: environment, stateDirectory: stateDirectory,
            sections: extensions.map { $0.section }, sources: sources)
        config.reservedTopicPrefixes = reservedPrefixes(config, extensions: extensions)
        return config
    }

    /// Reads a config text with every section of `extensions` (see `GatewayConfig.parse`).
    public static func parseConfig(
        _ text: String, file: String, environment: [String: String] = [:], stateDirectory: String? = nil,
        extensions: [any HomeMQTTExtension.Type] = HomeMQTTApp.extensions,
        sources: [any SourceFactory.Type] = HomeMQTTApp.sources
    ) throws(ConfigError) -> GatewayConfig {
        var config = try GatewayConfig.parse(
            text, file: file, environment: environment, stateDirectory: stateDirectory,
            sections: extensions.map { $0.section }, sources: sources)
        config.reservedTopicPrefixes = reservedPrefixes(config, extensions: extensions)
        return config
    }

    /// The config's sources as the gateway's one source (a `CompositeSource` when there are
    /// several), with the pairing of each that pairs.
    /// - Parameter deferred: load the simulator's files when its service runs (`SourceContext`).
    public static func makeSource(_ config: GatewayConfig, logger: Logger, deferred: Bool = false) throws
        -> MadeSource
    {
        let context = SourceContext(config: config, logger: logger, deferred: deferred)
        let made = try config.sources.map { entry in try entry.make(context) }
        let source = made.count == 1 ? made[0].source : CompositeSource(made.map(\.source))
        return MadeSource(source: source, pairings: made.flatMap(\.pairings))
    }
}

extension HomeMQTTApp {
    /// The topic prefixes outside the homes' base topics the gateway publishes under (Home
    /// Assistant's discovery, Homie's domain): what its broker user needs besides the homes.
    public static func reservedPrefixes(
        _ config: GatewayConfig, extensions: [any HomeMQTTExtension.Type] = HomeMQTTApp.extensions
    ) -> [String] {
        extensions.flatMap { feature in feature.reservedPrefixes(in: config) }
    }

    /// The outputs the config asks for on the gateway's connection, in the order their
    /// documents are published.
    public static func outputs(
        for config: GatewayConfig, extensions: [any HomeMQTTExtension.Type] = HomeMQTTApp.extensions
    ) -> [any GatewayOutput] {
        extensions.flatMap { feature in feature.outputs(in: config) }
    }

    /// The sources' own management operations (HAP's `pair`, `pairings`, `unpair`, `discover`),
    /// then the features' (the HomeKit bridge's `homekit-status`, `homekit-reset`), answered
    /// after the core ones, live and offline alike: every kind's, whether the config has a
    /// source of that kind or the feature on or not (then they answer so).
    public static func operations(
        of sources: [any SourceFactory.Type] = HomeMQTTApp.sources,
        extensions: [any HomeMQTTExtension.Type] = HomeMQTTApp.extensions
    ) -> [any ManagementOperation.Type] {
        sources.flatMap { factory in factory.operations } + extensions.flatMap { feature in feature.operations }
    }

    /// `operations()` of the shipped sources and features.
    public static let sourceOperations = operations()

    /// Without a running gateway: each kind's pairing over the state directory, for its
    /// operations (`hap pair` offline).
    public static func offlinePairings(
        _ config: GatewayConfig, logger: Logger, sources: [any SourceFactory.Type] = HomeMQTTApp.sources
    ) -> [any PairingManager] {
        let context = SourceContext(config: config, logger: logger)
        return sources.compactMap { factory in factory.offlinePairing(context) }
    }
}
