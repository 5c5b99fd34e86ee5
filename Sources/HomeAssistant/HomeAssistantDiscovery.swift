public import Gateway
public import HomeModel

/// Home Assistant MQTT discovery for the scoped tree: one device-based discovery message per
/// accessory (`<prefix>/device/<node id>/config`, Home Assistant 2024.11 and later) whose
/// components read and write the gateway's own `state`/`set` topics, so there is no second copy
/// of any state.
///
/// Pure and deterministic: the gateway puts `configs` among its desired retained topics (so an
/// accessory that leaves scope or the home gets an empty retained config, which makes Home
/// Assistant drop its device) and publishes them again when Home Assistant announces itself on
/// `<prefix>/status` with `online`.
///
/// Ids come only from accessory ids and instance ids, never from names, so renaming or moving
/// an accessory changes its names in Home Assistant but not its entities.
public enum HomeAssistantDiscovery {
    public struct Options: Sendable, Hashable {
        /// The home's default room. It is no room a person chose, so it is not suggested as an area.
        public var defaultRoomID: String?
        /// Set when the gateway serves each accessory's `$state` (every value as one JSON document)
        /// and `$set` (several characteristics written at once): what needs two characteristics
        /// together uses them. A light's colour (Home Assistant sends hue and saturation as one
        /// command) and a heater-cooler's `off` mode (`active` beside the target state). Without
        /// them, hue and saturation are separate number entities and `active` is the power only.
        public var accessoryTopics: Bool
        /// The `origin`'s `support_url`, where the user has one.
        public var supportURL: String?

        /// The home's name, for a home other than the one on the gateway's base topic: its
        /// devices' areas are `<home> <room>` (and `<home>` for its default room), so that two
        /// homes' rooms of one name are two areas.
        public var homeName: String?

        /// Set when the gateway publishes each accessory's `$last-seen`: every device gets a
        /// last-seen sensor (disabled by default).
        public var lastSeen: Bool

        /// The site's name (`homeassistant.site-name`), shown where `site` says, so that two
        /// gateways' devices on one broker are told apart in Home Assistant.
        public var site: Site?

        /// Each heater-cooler's target mode now (its `target-heater-cooler-state`, by address),
        /// where the gateway knows it. Home Assistant has one `min_temp`…`max_temp` per entity,
        /// and a HomeKit heater-cooler has a range per threshold: the single target's range is
        /// that of the mode's threshold (the heating one's in heat, the cooling one's in cool),
        /// as Home Assistant's own HomeKit integration shows it, and both together otherwise; the
        /// config is published again when the mode changes (`HomeAssistantOutput.valueChanged`).
        public var heaterCoolerModes: [CharacteristicAddress: Int64] = [:]

        public init(
            defaultRoomID: String? = nil, accessoryTopics: Bool = false, supportURL: String? = nil,
            homeName: String? = nil, lastSeen: Bool = false, site: Site? = nil
        ) {
            self.site = site
            self.homeName = homeName
            self.lastSeen = lastSeen
            self.defaultRoomID = defaultRoomID
            self.accessoryTopics = accessoryTopics
            self.supportURL = supportURL
        }
    }

    /// A site's name and where Home Assistant shows it: before every device's name, before every
    /// area, or both.
    public struct Site: Sendable, Hashable {
        public var name: String
        public var inDeviceNames: Bool
        public var inAreas: Bool

        public init(name: String, inDeviceNames: Bool = true, inAreas: Bool = false) {
            self.name = name
            self.inDeviceNames = inDeviceNames
            self.inAreas = inAreas
        }
    }

    /// The `origin` name in every config, and the owner mark `isOwnConfig` looks for.
    public static let originName = "HomeMQTT"

    /// Home Assistant's birth and last-will topic.
    public static func statusTopic(prefix: String) -> String { "\(prefix)/status" }

    /// Whether a message is Home Assistant's birth message: then every config is published again.
    public static func isBirthMessage(topic: String, payload: [UInt8], prefix: String) -> Bool {
        topic == statusTopic(prefix: prefix) && String(decoding: payload, as: UTF8.self) == "online"
    }

    public static func configTopic(prefix: String, nodeID: String) -> String {
        "\(prefix)/device/\(nodeID)/config"
    }

    /// Every discovery config topic → its retained payload, for every in-scope accessory that has
    /// at least one entity.
    public static func configs(
        tree: TopicTree, prefix: String, gatewayStatusTopic: String, options: Options = Options()
    ) -> [String: JSONValue] {
        var out: [String: JSONValue] = [:]
        forEachConfig(tree: tree, prefix: prefix, gatewayStatusTopic: gatewayStatusTopic, options: options) {
            topic, document in
            out[topic] = document
        }
        return out
    }

    /// `configs` one accessory at a time, for a caller that encodes each document at once, so
    /// that a large home's documents are never all held as `JSONValue`s together.
    public static func forEachConfig(
        tree: TopicTree, prefix: String, gatewayStatusTopic: String, options: Options = Options(),
        _ body: (_ topic: String, _ document: JSONValue) -> Void
    ) {
        let context = Context(tree: tree, prefix: prefix, gatewayStatusTopic: gatewayStatusTopic, options: options)
        for node in tree.accessories {
            if let (topic, document) = context.config(node) { body(topic, document) }
        }
    }

    /// What one accessory's config needs to know of the whole tree: every node id (two ids can
    /// fold to one) and which accessories are bridges.
    public struct Context: Sendable {
        let ids: [String: String]
        let bridgeIDs: Set<String>
        let base: String
        let prefix: String
        let gatewayStatusTopic: String
        var options: Options

        /// - Parameter nodeIDs: the accessories' node ids as recorded (`HomeAssistantIdentity`);
        ///   without it, the ids the base gives (`nodeIDs(for:base:)`).
        public init(
            tree: TopicTree, prefix: String, gatewayStatusTopic: String, options: Options = Options(),
            nodeIDs: [String: String]? = nil
        ) {
            ids = nodeIDs ?? HomeAssistantDiscovery.nodeIDs(for: tree.accessories.map(\.id), base: tree.base)
            bridgeIDs = Set(tree.accessories.compactMap(\.accessory.bridgeID))
            base = tree.base
            self.prefix = prefix
            self.gatewayStatusTopic = gatewayStatusTopic
            self.options = options
        }

        /// The accessory's config topic and document; nil when it has no entity.
        public func config(_ node: TopicTree.AccessoryNode) -> (topic: String, document: JSONValue)? {
            let nodeID = ids[node.id] ?? HomeAssistantDiscovery.nodeID(accessoryID: node.id, base: base)
            let bridgeNodeID = node.accessory.bridgeID.map {
                ids[$0] ?? HomeAssistantDiscovery.nodeID(accessoryID: $0, base: base)
            }
            var builder = HomeAssistantComponents(node: node, nodeID: nodeID, options: options)
            var components = builder.build()
            if bridgeIDs.contains(node.id) {
                // A bridge usually has no service of its own in scope; this entity makes it a
                // device in Home Assistant so its bridged accessories can name it as `via_device`.
                components.append(builder.connectivity(gatewayStatusTopic: gatewayStatusTopic))
            }
            guard !components.isEmpty else { return nil }
            if options.lastSeen {
                components.append(
                    HomeAssistantDiscovery.lastSeenSensor(
                        node: node, nodeID: nodeID, gatewayStatusTopic: gatewayStatusTopic))
            }
            return (
                configTopic(prefix: prefix, nodeID: nodeID),
                document(
                    node: node, nodeID: nodeID, bridgeNodeID: bridgeNodeID, components: components,
                    gatewayStatusTopic: gatewayStatusTopic, options: options)
            )
        }
    }

    /// The base topic whose node ids carry no base: the default, so that the ids of a gateway
    /// on the default base stay what they were before the base was part of them.
    public static let defaultBase = "home"

    /// `homemqtt_`, the base topic unless it is the default one, and the accessory id, as
    /// `[a-z0-9_]` (`sim-garage:2` → `homemqtt_sim_garage_2`; on base `site-b`,
    /// `homemqtt_site_b__sim_garage_2`). Two gateways on one broker have two bases, so their
    /// configs and unique ids differ even for the same accessories; neither comes from a name.
    public static func nodeID(accessoryID: String, base: String = defaultBase) -> String {
        let accessory = Slug.make(accessoryID, fallback: "accessory").replacingOccurrences(of: "-", with: "_")
        guard base != defaultBase else { return "homemqtt_" + accessory }
        let site = Slug.make(base, fallback: "base").replacingOccurrences(of: "-", with: "_")
        return "homemqtt_\(site)__\(accessory)"
    }

    /// Node ids for a set of accessories. Two ids that fold to the same slug would overwrite each
    /// other's config: the first (by id) keeps the plain form, the others get a hash of their
    /// own id, which is the same at every start.
    public static func nodeIDs(for accessoryIDs: [String], base: String = defaultBase) -> [String: String] {
        var groups: [String: [String]] = [:]
        for id in Set(accessoryIDs) { groups[nodeID(accessoryID: id, base: base), default: []].append(id) }
        var out: [String: String] = [:]
        for (nodeBase, members) in groups {
            for (index, id) in members.sorted().enumerated() {
                out[id] = index == 0 ? nodeBase : "\(nodeBase)_\(fnv1a(id))"
            }
        }
        return out
    }

    /// The config to publish over `previous`: `next` plus a platform-only entry for every
    /// component `previous` had and `next` lacks, which is how Home Assistant removes one
    /// component of a device that stays (a characteristic type that left scope). Removing a whole
    /// device needs no help: an empty retained config does that.
    public static func withRemovedComponents(previous: JSONValue?, next: JSONValue) -> JSONValue {
        guard let old = previous?["components"]?.objectValue,
            case .object(var document) = next,
            var components = document["components"]?.objectValue
        else { return next }
        for (key, component) in old where components[key] == nil {
            guard let platform = component["platform"]?.stringValue else { continue }
            components[key] = .object(["platform": .string(platform)])
        }
        document["components"] = .object(components)
        return .object(document)
    }

    /// Whether a retained config found on the broker was published by this gateway (its origin
    /// and its gateway status topic), so that one left behind by an earlier run can be cleared
    /// without touching another program's or another gateway's.
    public static func isOwnConfig(topic: String, payload: JSONValue, prefix: String, gatewayStatusTopic: String)
        -> Bool
    {
        let parts = topic.split(separator: "/", omittingEmptySubsequences: false)
        let prefixParts = prefix.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == prefixParts.count + 3, parts.starts(with: prefixParts),
            parts[prefixParts.count] == "device", parts.last == "config",
            parts[prefixParts.count + 1].hasPrefix("homemqtt_"),
            payload["origin"]?["name"]?.stringValue == originName,
            let availability = payload["availability"]?.arrayValue
        else { return false }
        return availability.contains { $0["topic"]?.stringValue == gatewayStatusTopic }
    }

    // MARK: - The document

    static func document(
        node: TopicTree.AccessoryNode, nodeID: String, bridgeNodeID: String?, components: [HomeAssistantComponent],
        gatewayStatusTopic: String, options: Options
    ) -> JSONValue {
        let accessory = node.accessory
        // The site's name before the accessory's, where it is shown in device names.
        var name = node.displayName
        if let site = options.site, site.inDeviceNames { name = "\(site.name) \(name)" }
        var device: [String: JSONValue] = [
            "identifiers": .array([.string(nodeID)]),
            "name": .string(name),
        ]
        let facts: [(String, String)] = [
            ("manufacturer", accessory.manufacturer), ("model", accessory.model),
            ("serial_number", accessory.serialNumber), ("sw_version", accessory.firmwareRevision),
        ]
        for (key, value) in facts where !value.isEmpty { device[key] = .string(value) }
        var area: String?
        if node.room.id != options.defaultRoomID {
            area = options.homeName.map { "\($0) \(node.room.name)" } ?? node.room.name
        } else {
            area = options.homeName
        }
        if let site = options.site, site.inAreas { area = area.map { "\(site.name) \($0)" } ?? site.name }
        if let area { device["suggested_area"] = .string(area) }
        if let bridgeNodeID, bridgeNodeID != nodeID { device["via_device"] = .string(bridgeNodeID) }

        var origin: [String: JSONValue] = ["name": .string(originName), "sw_version": .string(HomeMQTTVersion.current)]
        if let url = options.supportURL { origin["support_url"] = .string(url) }
        var componentMap: [String: JSONValue] = [:]
        for component in components { componentMap[component.key] = .object(component.config) }
        return .object([
            "device": .object(device),
            "origin": .object(origin),
            // Both must say online: an accessory is of no use while the gateway is down, and the
            // gateway's last will covers every accessory at once.
            "availability": .array([
                availability(node.topic + "/$availability"),
                availability(gatewayStatusTopic),
            ]),
            "availability_mode": "all",
            "components": .object(componentMap),
        ])
    }

    static func availability(_ topic: String) -> JSONValue {
        .object(["topic": .string(topic), "payload_available": "online", "payload_not_available": "offline"])
    }

    /// 32-bit FNV-1a as 8 hex digits: short, and the same on every platform and run.
    static func fnv1a(_ text: String) -> String {
        var hash: UInt32 = 0x811C_9DC5
        for byte in text.utf8 {
            hash ^= UInt32(byte)
            hash = hash &* 0x0100_0193
        }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 8 - hex.count) + hex
    }
}
