public import Gateway
public import HomeModel
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
    /// Made at the start of each pass (`accessoriesHeldElsewhere`).
    private var heldElsewhere: Set<String> = []
    /// The accessories with a heater-cooler whose config follows its mode (`heaterCoolerModes`)
    /// in the pass's tree: a value change of any other costs a set lookup.
    private var modeFollowing: Set<String> = []

    /// The node ids kept in the state directory, shared by every home of the gateway; nil when
    /// its file cannot be read (then the ids the base gives, and `identityError` is logged).
    let identity: HomeAssistantIdentity?
    private var identityError: ModelError?

    /// - Parameter identity: the gateway's `HomeAssistantIdentity` (or the error reading it);
    ///   nil for none, as a test of discovery alone: the ids the base gives.
    public init(
        _ config: HomeAssistantConfig, accessoryTopics: Bool,
        identity: Result<HomeAssistantIdentity, ModelError>? = nil
    ) {
        self.config = config
        self.accessoryTopics = accessoryTopics
        switch identity {
        case .success(let kept): self.identity = kept
        case .failure(let error):
            self.identity = nil
            identityError = error
        case nil: self.identity = nil
        }
    }

    private func context(_ tree: TopicTree, _ gateway: isolated Gateway) -> HomeAssistantDiscovery.Context {
        var options = HomeAssistantDiscovery.Options(
            defaultRoomID: gateway.home?.roomForEntireHome.id, accessoryTopics: accessoryTopics,
            supportURL: config.supportURL,
            homeName: homeName(gateway), lastSeen: gateway.publishesLastSeen, site: config.site)
        if accessoryTopics {
            for node in tree.accessories {
                options.heaterCoolerModes.merge(heaterCoolerModes(of: node, gateway)) { $1 }
            }
        }
        return HomeAssistantDiscovery.Context(
            tree: tree, prefix: config.prefix, gatewayStatusTopic: gateway.statusTopic, options: options,
            nodeIDs: identity?.nodeIDs(for: tree.accessories.map(\.id), base: tree.base))
    }

    /// The target mode of each heater-cooler of the accessory (-1 while it has no value).
    private func heaterCoolerModes(
        of node: TopicTree.AccessoryNode, _ gateway: isolated Gateway
    ) -> [CharacteristicAddress: Int64] {
        var out: [CharacteristicAddress: Int64] = [:]
        for service in node.services where service.typeName == "heater-cooler" {
            guard let mode = service.characteristics.first(where: { $0.typeName == "target-heater-cooler-state" })
            else { continue }
            out[mode.address] = gateway.value(of: mode.address)?.doubleValue.map { Int64($0) } ?? -1
        }
        return out
    }

    /// A heater-cooler's mode changed: its config again, with the range of the mode's threshold.
    /// (Published at once, so Home Assistant has it before the `$state` with the new mode.)
    public func valueChanged(accessoryID: String, _ gateway: isolated Gateway) {
        guard modeFollowing.contains(accessoryID), var current = pass,
            let node = gateway.publishedTopicTree.accessory(id: accessoryID)
        else { return }
        let modes = heaterCoolerModes(of: node, gateway)
        guard modes.contains(where: { current.options.heaterCoolerModes[$0.key] != $0.value }) else { return }
        current.options.heaterCoolerModes.merge(modes) { $1 }
        pass = current
        _ = publishDocuments(of: node, gateway)
    }

    /// Writes what the pass recorded of the ids; a failure is logged, and the ids stay in memory.
    private func flushIdentity(_ gateway: isolated Gateway) {
        if let error = identityError {
            gateway.logger.error(
                "the Home Assistant node ids cannot be read; using the ids the base topic gives",
                metadata: ["error": "\(error.message)"])
            identityError = nil
        }
        do throws(ModelError) { try identity?.flush() } catch {
            gateway.logger.warning(
                "cannot write the Home Assistant node ids", metadata: ["error": "\(error.message)"])
        }
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
            options: .init(supportURL: config.supportURL, homeName: homeName(gateway), site: config.site))
    }

    public func publishGatewayDocuments(_ gateway: isolated Gateway) -> [String] {
        flushIdentity(gateway)
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
        heldElsewhere = accessoriesHeldElsewhere(gateway)
        if republishing {
            self.republishing = context(tree, gateway)
            return
        }
        pass = context(tree, gateway)
        modeFollowing = Set(pass?.options.heaterCoolerModes.keys.map(\.accessoryID) ?? [])
        previous = nil
        clearLeftBehind(tree, gateway)
    }

    /// The accessories another home holds, served on another base topic: their configs are that
    /// home's to publish or clear. An accessory just moved away can still be in this home's tree
    /// for a pass (its source has not let go of it yet); publishing its config then would put
    /// this home's version over the other home's, and nothing would clear it.
    private func accessoriesHeldElsewhere(_ gateway: isolated Gateway) -> Set<String> {
        guard identity != nil else { return [] }
        var out = Set<String>()
        for home in gateway.homes where gateway.config.baseTopic(of: home) != gateway.baseTopic {
            out.formUnion(home.knownAccessoryIDs)
            out.formUnion(home.assignments.keys)
            out.formUnion(home.removedAccessoryIDs)
        }
        return out
    }

    /// Configs of this home's accessories that the gateway of the home they were in left on the
    /// broker (`mayClear`) and this one does not publish (reported, and out of its scope):
    /// cleared here, on this home's connection, whichever home's gateway passed first. One the
    /// source has not handed to this home yet waits: it is published when it comes, or cleared
    /// here if it comes out of scope.
    private func clearLeftBehind(_ tree: TopicTree, _ gateway: isolated Gateway) {
        guard let identity, let home = gateway.home else { return }
        let base = gateway.baseTopic
        for id in home.knownAccessoryIDs where tree.accessory(id: id) == nil && gateway.reports(accessoryID: id) {
            guard let entry = identity.entry(id), let elsewhere = entry.publishedOn, elsewhere != base else { continue }
            gateway.publish(
                HomeAssistantDiscovery.configTopic(prefix: config.prefix, nodeID: entry.nodeID), [], retain: true)
            identity.setPublished(id, on: nil)
        }
    }

    /// An accessory's config that this home no longer publishes is left to the home that holds
    /// the accessory now when that home is served on another base topic (moved there, or this
    /// home moved to another base): its gateway publishes the same topic, or clears it.
    public func mayClear(_ topic: String, _ gateway: isolated Gateway) -> Bool {
        guard let identity, let nodeID = nodeID(inConfigTopic: topic),
            let accessoryID = identity.accessoryID(ofNode: nodeID)
        else { return true }
        if let holder = gateway.homes.first(where: { $0.holds(accessoryID: accessoryID) }),
            gateway.config.baseTopic(of: holder) != gateway.baseTopic
        {
            return false
        }
        if identity.entry(accessoryID)?.publishedOn == gateway.baseTopic { identity.setPublished(accessoryID, on: nil) }
        return true
    }

    /// The node id of `<prefix>/device/<node id>/config`.
    private func nodeID(inConfigTopic topic: String) -> String? {
        let head = "\(config.prefix)/device/", tail = "/config"
        guard topic.hasPrefix(head), topic.hasSuffix(tail), topic.count > head.count + tail.count else { return nil }
        return String(topic.dropFirst(head.count).dropLast(tail.count))
    }

    /// Home Assistant drops one entity of a device that stays only when told its platform: a
    /// changed config also lists, platform only, the components of the one it replaces (made
    /// again from the published tree it was made from).
    public func publishDocuments(of node: TopicTree.AccessoryNode, _ gateway: isolated Gateway) -> [String] {
        guard !heldElsewhere.contains(node.id), let (topic, document) = pass?.config(node) else { return [] }
        identity?.setPublished(node.id, on: gateway.baseTopic)
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
        guard !heldElsewhere.contains(node.id), let (topic, document) = republishing?.config(node) else { return [] }
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
