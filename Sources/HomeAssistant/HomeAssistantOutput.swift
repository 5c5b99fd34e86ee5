public import Gateway
import HomeModel
public import MQTT

/// Home Assistant MQTT discovery as an output of the gateway: one retained device config per
/// accessory, published, changed and cleared with the tree on the gateway's connection, and
/// published again when Home Assistant announces itself (its birth message on `<prefix>/status`).
/// The configs' availability is the gateway's own status topic, its last will.
public final class HomeAssistantOutput: GatewayOutput {
    let config: HomeAssistantConfig
    /// Whether the gateway serves `$state`/`$set`, which colour and heater-cooler modes use.
    let accessoryTopics: Bool
    /// The context of the pass under way, and of the republication under way: every
    /// accessory's node id in its tree.
    private var pass: HomeAssistantDiscovery.Context?
    private var republishing: HomeAssistantDiscovery.Context?
    /// The published tree's context, made when a config replaces one (see `publishDocuments`).
    private var previous: HomeAssistantDiscovery.Context?

    public init(_ config: HomeAssistantConfig, accessoryTopics: Bool) {
        self.config = config
        self.accessoryTopics = accessoryTopics
    }

    private func context(_ tree: TopicTree, _ gateway: isolated Gateway) -> HomeAssistantDiscovery.Context {
        HomeAssistantDiscovery.Context(
            tree: tree, prefix: config.prefix, gatewayStatusTopic: gateway.statusTopic,
            options: .init(
                defaultRoomID: gateway.home?.roomForEntireHome.id, accessoryTopics: accessoryTopics,
                supportURL: config.supportURL,
                homeName: homeName(gateway), lastSeen: gateway.publishesLastSeen))
    }

    private func homeName(_ gateway: isolated Gateway) -> String? {
        gateway.config.gatewayBaseTopic == nil ? nil : gateway.home?.name
    }

    /// The gateway device's config, while the health document it reads is published.
    private func gatewayConfig(_ gateway: isolated Gateway) -> (topic: String, document: JSONValue)? {
        guard let healthTopic = gateway.publishedHealthTopic else { return nil }
        return HomeAssistantDiscovery.gatewayConfig(
            base: gateway.baseTopic, healthTopic: healthTopic, prefix: config.prefix,
            gatewayStatusTopic: gateway.statusTopic,
            options: .init(supportURL: config.supportURL, homeName: homeName(gateway)))
    }

    public func publishGatewayDocuments(_ gateway: isolated Gateway) -> [String] {
        guard let (topic, document) = gatewayConfig(gateway) else { return [] }
        gateway.publishRetained(topic, document.encodedUTF8())
        return [topic]
    }

    public func gatewayRepublication(_ gateway: isolated Gateway) -> [(String, [UInt8])] {
        guard let (topic, document) = gatewayConfig(gateway) else { return [] }
        return [(topic, document.encodedUTF8())]
    }

    public func requestFilters(_ gateway: isolated Gateway) -> [String] {
        [HomeAssistantDiscovery.statusTopic(prefix: config.prefix)]
    }

    /// Configs of an earlier run are known by their content: they name this gateway's status topic.
    public func snapshotFilters(_ gateway: isolated Gateway) -> [String] { ["\(config.prefix)/device/+/config"] }

    public func isOwnEarlierTopic(_ message: MQTTMessage, _ gateway: isolated Gateway) -> Bool {
        guard let document = try? JSONValue(parsing: message.payload) else { return false }
        return HomeAssistantDiscovery.isOwnConfig(
            topic: message.topic, payload: document, prefix: config.prefix, gatewayStatusTopic: gateway.statusTopic)
    }

    public func beginPass(over tree: TopicTree, republishing: Bool, _ gateway: isolated Gateway) {
        if republishing {
            self.republishing = context(tree, gateway)
            return
        }
        pass = context(tree, gateway)
        previous = nil
    }

    /// Home Assistant drops one entity of a device that stays only when told its platform: a
    /// changed config also lists, platform only, the components of the one it replaces (made
    /// again from the published tree it was made from).
    public func publishDocuments(of node: TopicTree.AccessoryNode, _ gateway: isolated Gateway) -> [String] {
        guard let (topic, document) = pass?.config(node) else { return [] }
        let payload = document.encodedUTF8()
        let (changed, replaced) = gateway.recordRetained(topic, payload)
        guard changed else { return [topic] }
        guard replaced, let old = gateway.publishedTopicTree.accessory(id: node.id) else {
            gateway.publish(topic, payload, retain: true)
            return [topic]
        }
        if previous == nil { previous = context(gateway.publishedTopicTree, gateway) }
        guard let before = previous?.config(old)?.document else {
            gateway.publish(topic, payload, retain: true)
            return [topic]
        }
        let merged = HomeAssistantDiscovery.withRemovedComponents(previous: before, next: document)
        gateway.publish(topic, merged.encodedUTF8(), retain: true)
        return [topic]
    }

    public func republication(of node: TopicTree.AccessoryNode, _ gateway: isolated Gateway) -> [(String, [UInt8])] {
        guard let (topic, document) = republishing?.config(node) else { return [] }
        return [(topic, document.encodedUTF8())]
    }

    /// Home Assistant's birth message: every config again.
    public func handle(_ message: IncomingMessage, _ gateway: isolated Gateway) -> Bool {
        guard
            HomeAssistantDiscovery.isBirthMessage(topic: message.topic, payload: message.payload, prefix: config.prefix)
        else { return false }
        gateway.logger.info("Home Assistant is online; republishing discovery")
        gateway.republish(self)
        return true
    }
}
