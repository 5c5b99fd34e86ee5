public import Gateway
public import HomeModel

/// The gateway itself as a Home Assistant device: diagnostic entities read from its retained
/// health document (`<base>/$gateway/health`), and each accessory's last-seen sensor read from
/// its `$last-seen`. Both exist only while the gateway publishes what they read, so no entity
/// waits for a topic that never comes.
///
/// Every one of these entities is available while the gateway is (its status topic alone): a
/// last-seen time matters most while its accessory is unreachable, and the health document says
/// nothing of any one accessory.
extension HomeAssistantDiscovery {
    /// The gateway device's node id: `homemqtt__gateway`, or `homemqtt_<base>___gateway` off the
    /// default base. An accessory's is `homemqtt_<slug>` or `homemqtt_<base>__<slug>`, and a slug
    /// never starts with `_`, so no accessory's node id is this one.
    public static func gatewayNodeID(base: String = defaultBase) -> String {
        guard base != defaultBase else { return "homemqtt__gateway" }
        let site = Slug.make(base, fallback: "base").replacingOccurrences(of: "-", with: "_")
        return "homemqtt_\(site)___gateway"
    }

    /// The gateway device's config topic and document, read from the health document on
    /// `healthTopic`.
    public static func gatewayConfig(
        base: String, healthTopic: String, prefix: String, gatewayStatusTopic: String, options: Options = Options()
    ) -> (topic: String, document: JSONValue) {
        let nodeID = gatewayNodeID(base: base)
        var name = "HomeMQTT"
        if let site = options.site, site.inDeviceNames { name += " \(site.name)" }
        if let home = options.homeName {
            name += " \(home)"
        } else if base != defaultBase {
            name += " \(base)"
        }
        var origin: [String: JSONValue] = ["name": .string(originName), "sw_version": .string(HomeMQTTVersion.current)]
        if let url = options.supportURL { origin["support_url"] = .string(url) }
        var components: [String: JSONValue] = [:]
        for (key, config) in gatewaySensors(nodeID: nodeID) {
            var config = config
            config["state_topic"] = .string(healthTopic)
            config["entity_category"] = "diagnostic"
            components[key] = .object(config)
        }
        var device: [String: JSONValue] = [
            "identifiers": .array([.string(nodeID)]), "name": .string(name),
            "manufacturer": .string(originName), "model": "Gateway", "sw_version": .string(HomeMQTTVersion.current),
        ]
        // A home on a base of its own: its area, as its accessories in its default room have.
        // The site's name before it, or alone, where the site is shown in areas.
        var area = options.homeName
        if let site = options.site, site.inAreas { area = area.map { "\(site.name) \($0)" } ?? site.name }
        if let area { device["suggested_area"] = .string(area) }
        let document: JSONValue = .object([
            "device": .object(device),
            "origin": .object(origin),
            "availability": .array([availability(gatewayStatusTopic)]),
            "components": .object(components),
        ])
        return (configTopic(prefix: prefix, nodeID: nodeID), document)
    }

    /// The health document's fields each entity shows (GatewayHealth.document), by component key.
    static func gatewaySensors(nodeID: String) -> [(String, [String: JSONValue])] {
        func sensor(_ key: String, _ name: String, _ template: String) -> (String, [String: JSONValue]) {
            (
                key,
                [
                    "platform": "sensor", "unique_id": .string("\(nodeID)_\(key)"), "name": .string(name),
                    "value_template": .string(template),
                ]
            )
        }
        var uptime = sensor("uptime", "Uptime", "{{ value_json['uptime'] | round(0) | int }}")
        uptime.1["device_class"] = "duration"
        uptime.1["unit_of_measurement"] = "s"
        var broker = sensor(
            "broker", "Broker", "{{ 'ON' if value_json['broker']['connected'] else 'OFF' }}")
        broker.1["platform"] = "binary_sensor"
        broker.1["device_class"] = "connectivity"
        var counts = [
            sensor("reachable", "Accessories reachable", "{{ value_json['accessories']['reachable'] }}"),
            sensor("unreachable", "Accessories unreachable", "{{ value_json['accessories']['unreachable'] }}"),
            sensor(
                "received_rate", "Messages received per second",
                "{{ value_json['messages']['received-per-second'] }}"),
            sensor(
                "published_rate", "Messages published per second",
                "{{ value_json['messages']['published-per-second'] }}"),
            sensor("backlog", "Outbox backlog", "{{ value_json['outbox']['backlog'] }}"),
        ]
        for index in counts.indices { counts[index].1["state_class"] = "measurement" }
        for index in 2...3 {
            counts[index].1["unit_of_measurement"] = "msg/s"
            counts[index].1["suggested_display_precision"] = 2
        }
        // The newest of the last errors; `None` (Home Assistant's unknown) while there is none.
        let lastError = sensor(
            "last_error", "Last error",
            "{{ value_json['last-errors'][-1]['message'] if value_json['last-errors'] else 'None' }}")
        return [uptime, broker] + counts + [lastError]
    }

    /// An accessory's last-seen sensor, disabled until the user enables it (as zigbee2mqtt's):
    /// one timestamp per accessory is a lot of history for what few look at.
    static func lastSeenSensor(
        node: TopicTree.AccessoryNode, nodeID: String, gatewayStatusTopic: String
    ) -> HomeAssistantComponent {
        HomeAssistantComponent(
            key: "last_seen",
            config: [
                "platform": "sensor", "unique_id": .string("\(nodeID)_last_seen"), "name": "Last seen",
                "device_class": "timestamp", "entity_category": "diagnostic", "enabled_by_default": false,
                "state_topic": .string(node.topic + "/" + lastSeenLevel),
                "value_template": "{{ value_json['last-seen'] }}",
                "availability": .array([availability(gatewayStatusTopic)]),
            ])
    }

    /// The level of `$last-seen` under an accessory's topic (the gateway's `LastSeen.level`).
    static let lastSeenLevel = "$last-seen"
}
