import Gateway
import HomeAssistant
import HomeKitBridge
import HomeModel
import Homie
import MQTT
import TopicAPI
import WebView

// The features HomeMQTT ships, each declared once (`HomeMQTTExtension`) and listed in
// `HomeMQTTApp.extensions`.

/// `$state`/`$set` per accessory (`accessory-state:`).
enum AccessoryStateFeature: HomeMQTTExtension {
    static func outputs(_ settings: AccessoryStateConfig, _ config: GatewayConfig) -> [any GatewayOutput] {
        // Off, it still names `$state` as the gateway's, so an earlier run's are cleared.
        [AccessoryStateOutput(enabled: settings.enabled)]
    }
}

/// The MQTT topic dialect's requests and answers (`set`, `get`, `$toggle`, `$identify`,
/// `$gateway/request/<op>`), always on. Last of `HomeMQTTApp.extensions`: its output takes every
/// request no output before it took.
enum TopicRequestsFeature: HomeMQTTExtension {
    static func outputs(_ settings: NoSettings, _ config: GatewayConfig) -> [any GatewayOutput] { [TopicRequests()] }
}

/// Home Assistant's MQTT discovery, on the gateway's connection (`homeassistant:`).
enum HomeAssistantFeature: HomeMQTTExtension {
    static func reservedPrefixes(_ settings: HomeAssistantConfig) -> [String] {
        settings.enabled ? [settings.prefix] : []
    }

    static func outputs(_ settings: HomeAssistantConfig, _ config: GatewayConfig) -> [any GatewayOutput] {
        guard settings.enabled else { return [] }
        // Every home's output shares the gateway's one record of node ids.
        let identity = Result { () throws(ModelError) in
            try HomeAssistantIdentity.shared(stateDirectory: config.stateDirectory)
        }
        return [
            HomeAssistantOutput(
                settings, accessoryTopics: config[AccessoryStateConfig.self].enabled, identity: identity)
        ]
    }
}

/// Homie v5 on a second connection (`homie:`): a Homie root device's will is its own `$state`,
/// and a connection has one will.
enum HomieFeature: HomeMQTTExtension {
    static func reservedPrefixes(_ settings: HomieConfig) -> [String] {
        settings.enabled ? [settings.domain] : []
    }

    static func services(_ settings: HomieConfig, _ home: HomeContext) -> [HomeMQTTApp.ServiceConfiguration] {
        guard settings.enabled else { return [] }
        let mqtt = MQTTClient(
            configuration: HomieOutput.configuration(gateway: home.config.mqtt, homie: settings), logger: home.logger)
        let homie = HomieOutput(
            gateway: home.gateway, mqtt: mqtt, config: settings, clientID: home.config.mqtt.clientID,
            qos: home.config.qos, logger: home.logger)
        // Stopped before its client, so its `disconnected` goes out on the open connection.
        return [.init(service: mqtt), .init(service: homie)]
    }

    static func settings(_ settings: HomieConfig, forHome home: Home) -> HomieConfig {
        var settings = settings
        if let id = settings.deviceID { settings.deviceID = "\(id)-\(GatewayConfig.homeSuffix(home))" }
        return settings
    }
}

/// The web view (`web:`): one for every home, beside the first home's gateway.
enum WebFeature: HomeMQTTExtension {
    static var perHome: Bool { false }

    /// Its metrics exporter exists before the gateway, which takes its counters from the
    /// factory it bootstraps; without `web.enabled` nothing is bootstrapped, and counting costs
    /// nothing.
    static func prepare(_ settings: WebConfig) {
        if settings.enabled { _ = WebMetrics.shared }
    }

    static func services(_ settings: WebConfig, _ home: HomeContext) -> [HomeMQTTApp.ServiceConfiguration] {
        guard settings.enabled else { return [] }
        return [
            .init(
                service: WebView(
                    gateway: home.gateway, config: settings, access: home.config[AccessConfig.self],
                    logger: home.logger, onListening: home.webListening,
                    // The served home's bridge, from the bridges running (none: nil, a 404).
                    homeKitSetup: { [database = home.database] in
                        HomeKitBridges.serving(database)?.setup.map { HomeKitSetup(code: $0.code, uri: $0.uri) }
                    }))
        ]
    }
}

/// Each home as a HomeKit bridge (`homekit:`): the Home app pairs with it and controls the
/// accessories in its scope. The first home's listens on `homekit.port`, every other home's on
/// a free port.
enum HomeKitFeature: HomeMQTTExtension {
    static var operations: [any ManagementOperation.Type] { HomeKitOperations.all }

    static func services(_ settings: HomeKitConfig, _ home: HomeContext) -> [HomeMQTTApp.ServiceConfiguration] {
        guard settings.enabled else { return [] }
        let firstHome = home.config.gatewayBaseTopic == nil
        return [
            .init(
                service: HomeKitBridgeService(
                    gateway: home.gateway, database: home.database, settings: settings,
                    port: firstHome ? settings.port : 0, stateDirectory: home.config.stateDirectory,
                    logger: home.logger))
        ]
    }
}

/// Users and roles (`access:`): read by the web view and `homemqtt access acl`, nothing to run.
enum AccessFeature: HomeMQTTExtension {
    typealias Settings = AccessConfig
}
