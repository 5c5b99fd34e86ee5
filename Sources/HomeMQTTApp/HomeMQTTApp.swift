public import Foundation
public import Gateway
import Homie
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
    ]

    /// Loads a config file with every section of the app (see `GatewayConfig.load`).
    public static func loadConfig(
        file: String, environment: [String: String] = ProcessInfo.processInfo.environment, stateDirectory: String? = nil
    ) throws(ConfigError) -> GatewayConfig {
        try GatewayConfig.load(
            file: file, environment: environment, stateDirectory: stateDirectory, sections: configSections)
    }

    /// Reads a config text with every section of the app (see `GatewayConfig.parse`).
    public static func parseConfig(
        _ text: String, file: String, environment: [String: String] = [:], stateDirectory: String? = nil
    ) throws(ConfigError) -> GatewayConfig {
        try GatewayConfig.parse(
            text, file: file, environment: environment, stateDirectory: stateDirectory, sections: configSections)
    }
}
