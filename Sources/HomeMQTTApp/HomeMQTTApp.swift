public import Foundation
public import Gateway
import HomeAssistant
import Homie
public import Logging
import WebView

/// The composition root: what makes a HomeMQTT gateway, listed once, for the `homemqtt`
/// binary, the bench and the tests alike. Adding an output or a source is a line here.
public enum HomeMQTTApp {
    /// The config file's sections other modules read, each by its module. An unknown key's
    /// error lists them as allowed in this order, after the core's keys.
    public static let configSections: [any ConfigSection.Type] = [
        HomeAssistantConfig.self,
        HomieConfig.self,
        AccessoryStateConfig.self,
        WebConfig.self,
        AccessConfig.self,
    ]

    /// The kinds of source `sources:` may name, each read and made by its factory.
    public static let sourceFactories: [any SourceFactory.Type] = [
        SimulatorFactory.self,
        HAPFactory.self,
    ]

    /// Loads a config file with every section of the app (see `GatewayConfig.load`).
    public static func loadConfig(
        file: String, environment: [String: String] = ProcessInfo.processInfo.environment, stateDirectory: String? = nil
    ) throws(ConfigError) -> GatewayConfig {
        var config = try GatewayConfig.load(
            file: file, environment: environment, stateDirectory: stateDirectory, sections: configSections,
            sources: sourceFactories)
        config.reservedTopicPrefixes = gatewayTopicPrefixes(config)
        return config
    }

    /// Reads a config text with every section of the app (see `GatewayConfig.parse`).
    public static func parseConfig(
        _ text: String, file: String, environment: [String: String] = [:], stateDirectory: String? = nil
    ) throws(ConfigError) -> GatewayConfig {
        var config = try GatewayConfig.parse(
            text, file: file, environment: environment, stateDirectory: stateDirectory, sections: configSections,
            sources: sourceFactories)
        config.reservedTopicPrefixes = gatewayTopicPrefixes(config)
        return config
    }

    /// The config's sources as the gateway's one source (a `CompositeSource` when there are
    /// several), with the pairing of the first that can pair.
    /// - Parameter deferred: load the simulator's files when its service runs (`SourceContext`).
    public static func makeSource(_ config: GatewayConfig, logger: Logger, deferred: Bool = false) throws
        -> MadeSource
    {
        let context = SourceContext(config: config, logger: logger, deferred: deferred)
        let made = try config.sources.map { entry in try entry.make(context) }
        let source = made.count == 1 ? made[0].source : CompositeSource(made.map(\.source))
        return MadeSource(source: source, pairing: made.lazy.compactMap(\.pairing).first)
    }
}

extension HomeMQTTApp {
    /// The topic prefixes outside the homes' base topics the gateway publishes under (Home
    /// Assistant's discovery, Homie's domain): what its broker user needs besides the homes.
    public static func gatewayTopicPrefixes(_ config: GatewayConfig) -> [String] {
        var prefixes: [String] = []
        if config[HomeAssistantConfig.self].enabled { prefixes.append(config[HomeAssistantConfig.self].prefix) }
        if config[HomieConfig.self].enabled { prefixes.append(config[HomieConfig.self].domain) }
        return prefixes
    }

    /// The outputs the config asks for, in the order their documents are published.
    public static func outputs(for config: GatewayConfig) -> [any GatewayOutput] {
        var outputs: [any GatewayOutput] = []
        let accessoryState = config[AccessoryStateConfig.self].enabled
        // Off, it still names `$state` as the gateway's, so an earlier run's are cleared.
        outputs.append(AccessoryStateOutput(enabled: accessoryState))
        if config[HomeAssistantConfig.self].enabled {
            outputs.append(HomeAssistantOutput(config[HomeAssistantConfig.self], accessoryTopics: accessoryState))
        }
        return outputs
    }
}

extension HomeMQTTApp {
    /// The sources' own management operations (HAP's `pair`, `pairings`, `unpair`, `discover`),
    /// answered after the core ones, live and offline alike: every kind's, whether the config
    /// has a source of that kind or not (then they answer that it has none).
    public static let sourceOperations: [any ManagementOperation.Type] = sourceFactories.flatMap { factory in
        factory.operations
    }
}
