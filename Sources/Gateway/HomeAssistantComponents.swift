import HomeModel

// The Home Assistant components of one accessory: the component and template types, and the
// builder's state, naming and the lookups its service and characteristic parts share.

/// One entry of a device config's `components`: its key (stable: instance ids only) and its
/// options, `platform` and `unique_id` included.
struct HomeAssistantComponent: Sendable, Hashable {
    var key: String
    var config: [String: JSONValue]

    var platform: String { config["platform"]?.stringValue ?? "" }
}

/// The few template forms the configs use. Our state payloads are plain text, so every template
/// works on `value` alone; keeping to these forms keeps them checkable.
enum HomeAssistantTemplate {
    /// `{{ {'0': 'open', …}[value] | default('None') }}`: a lookup; `None` is Home Assistant's
    /// payload for "unknown".
    static func lookup(_ pairs: [(String, String)], fallback: String) -> String {
        let entries = pairs.map { "\(literal($0.0)): \(literal($0.1))" }.joined(separator: ", ")
        return "{{ {\(entries)}[value] | default(\(literal(fallback))) }}"
    }

    /// For a float characteristic whose value Home Assistant reads as an integer
    /// (`int("50.0")` fails in Python).
    static let roundedInteger = "{{ value | float | round(0) | int }}"

    /// For a command whose characteristic starts above Home Assistant's smallest value (a
    /// brightness of 10…100 where Home Assistant may send 1).
    static func atLeast(_ bound: Int64) -> String { "{{ [value | int, \(bound)] | max }}" }

    static func literal(_ text: String) -> String {
        var out = "'"
        for character in text {
            switch character {
            case "\\": out += "\\\\"
            case "'": out += "\\'"
            default: out.append(character)
            }
        }
        return out + "'"
    }
}

extension TopicTree.CharacteristicNode {
    var haStateTopic: String { topic + "/state" }
    var haSetTopic: String { topic + "/set" }
    /// The gateway publishes `state` for what it can read or is told about.
    var haHasState: Bool {
        let permissions = characteristic.metadata.permissions
        return permissions.contains(.read) || permissions.contains(.notify)
    }
    var haIsWritable: Bool { characteristic.metadata.permissions.contains(.write) && !isReadOnlyScope }
    var haMetadata: CharacteristicMetadata { characteristic.metadata }
}

/// Builds the components of one accessory: each service's natural Home Assistant component
/// (light, switch, cover, lock, climate, fan), then an entity for every characteristic the
/// component did not take, by type where Home Assistant has a device class for it, else by
/// format and permissions.
struct HomeAssistantComponents {
    let node: TopicTree.AccessoryNode
    let nodeID: String
    let options: HomeAssistantDiscovery.Options
    private var consumed = Set<UInt64>()
    private var unnamedMain = 0

    init(node: TopicTree.AccessoryNode, nodeID: String, options: HomeAssistantDiscovery.Options) {
        self.node = node
        self.nodeID = nodeID
        self.options = options
    }

    mutating func build() -> [HomeAssistantComponent] {
        var out: [HomeAssistantComponent] = []
        for service in node.services {
            for main in mainComponents(service) {
                let name = mainName(service)
                out.append(finish(main, service: service, name: name))
            }
            for c in service.characteristics where !consumed.contains(c.characteristic.iid) {
                guard let entity = characteristicComponent(c, service: service) else { continue }
                out.append(entity)
            }
        }
        return out
    }

    /// The bridge's own entity: whether the bridge is reachable. It leaves out the accessory's
    /// availability, or it would turn unavailable exactly when it has something to say.
    func connectivity(gatewayStatusTopic: String) -> HomeAssistantComponent {
        HomeAssistantComponent(
            key: "connectivity",
            config: [
                "platform": "binary_sensor",
                "unique_id": .string("\(nodeID)_connectivity"),
                "name": "Connectivity",
                "device_class": "connectivity",
                "entity_category": "diagnostic",
                "state_topic": .string(node.topic + "/$availability"),
                "payload_on": "online",
                "payload_off": "offline",
                "availability": .array([HomeAssistantDiscovery.availability(gatewayStatusTopic)]),
            ])
    }

    // MARK: - Naming

    /// A service's own name, or nil when the accessory's name says it all.
    private func serviceLabel(_ service: TopicTree.ServiceNode) -> String? {
        let name = service.displayName
        if node.services.count == 1 || name == node.displayName || name == service.typeName { return nil }
        return name
    }

    /// Home Assistant shows `<device> <entity name>`; a null name marks the device's main entity.
    private mutating func mainName(_ service: TopicTree.ServiceNode) -> JSONValue {
        if let label = serviceLabel(service) { return .string(label) }
        unnamedMain += 1
        return unnamedMain == 1 ? .null : .string(Self.humanize(service.typeName))
    }

    func entityName(_ base: String, service: TopicTree.ServiceNode) -> String {
        guard let label = serviceLabel(service) else { return base }
        return "\(label) \(base)"
    }

    static func humanize(_ kebab: String) -> String {
        let words = kebab.split(separator: "-").joined(separator: " ")
        guard let first = words.first else { return kebab }
        return first.uppercased() + words.dropFirst()
    }

    private func finish(
        _ main: (key: String, config: [String: JSONValue]), service: TopicTree.ServiceNode, name: JSONValue
    ) -> HomeAssistantComponent {
        var config = main.config
        config["unique_id"] = .string("\(nodeID)_\(service.iid)_\(main.key)")
        config["name"] = name
        return HomeAssistantComponent(key: "\(service.iid)_\(main.key)", config: config)
    }

    // MARK: - Shared by services and characteristics

    func find(_ service: TopicTree.ServiceNode, _ typeName: String) -> TopicTree.CharacteristicNode? {
        service.characteristics.first { $0.typeName == typeName && !consumed.contains($0.characteristic.iid) }
    }

    mutating func take(_ c: TopicTree.CharacteristicNode?) {
        if let c { consumed.insert(c.characteristic.iid) }
    }

    /// On/off payloads as the gateway writes a characteristic's state.
    static func onOff(_ c: TopicTree.CharacteristicNode) -> (on: String, off: String) {
        c.haMetadata.format == .bool ? ("true", "false") : ("1", "0")
    }
}
