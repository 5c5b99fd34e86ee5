import Gateway
import HomeModel

// Home Assistant components for a security system (`alarm_control_panel`), buttons and doorbells
// (`event`: a press is an event, not a state) and valves, faucets and irrigation (`valve`).

extension HomeAssistantComponents {
    /// HomeKit's security system: the current state is the panel's state, the target state
    /// takes the commands (by their HomeKit names, which `set` accepts).
    mutating func alarmPanel(_ service: TopicTree.ServiceNode) -> [String: JSONValue]? {
        guard let target = find(service, "target-security-system-state"), target.haIsWritable else { return nil }
        take(target)
        var config: [String: JSONValue] = [
            "platform": "alarm_control_panel", "command_topic": .string(target.haSetTopic),
            "payload_disarm": "3", "code_arm_required": false, "code_disarm_required": false,
        ]
        // By number, which every accessory takes; only the states the accessory takes.
        let valid = Set(target.haAllowedValues.map(\.value))
        let commands: [(Int64, key: String, feature: String)] = [
            (0, "payload_arm_home", "arm_home"), (1, "payload_arm_away", "arm_away"),
            (2, "payload_arm_night", "arm_night"),
        ]
        var features: [JSONValue] = []
        for command in commands where valid.contains(command.0) {
            config[command.key] = .string(String(command.0))
            features.append(.string(command.feature))
        }
        config["supported_features"] = .array(features)
        if let current = find(service, "current-security-system-state"), current.haHasState {
            take(current)
            config["state_topic"] = .string(current.haStateTopic)
            config["value_template"] = .string(
                HomeAssistantTemplate.lookup(
                    [
                        ("0", "armed_home"), ("1", "armed_away"), ("2", "armed_night"), ("3", "disarmed"),
                        ("4", "triggered"),
                    ], fallback: "None"))
        }
        return config
    }

    /// A button (or a doorbell's): each press comes on the `state` topic once, not retained, as
    /// its number; the template turns it into the event Home Assistant expects.
    mutating func event(_ service: TopicTree.ServiceNode) -> [String: JSONValue]? {
        guard let press = find(service, "input-event"), press.haHasState else { return nil }
        take(press)
        let pairs = press.haAllowedValues.map { (key: $0.value, value: $0.name) }
        return [
            "platform": "event", "state_topic": .string(press.haStateTopic),
            "event_types": .array(pairs.map { .string($0.value) }),
            "value_template": .string(
                HomeAssistantTemplate.lookup(
                    pairs.map { (String($0.key), #"{"event_type": "\#($0.value)"}"#) }, fallback: "None")),
            "device_class": .string(service.typeName == "doorbell" ? "doorbell" : "button"),
        ]
    }

    /// A valve, faucet or irrigation system: `active` opens and closes it; `in-use` (water
    /// flowing) is its state where the accessory has it.
    mutating func valve(_ service: TopicTree.ServiceNode) -> [String: JSONValue]? {
        guard let active = find(service, "active"), active.haIsWritable else { return nil }
        take(active)
        var config: [String: JSONValue] = [
            "platform": "valve", "command_topic": .string(active.haSetTopic),
            "payload_open": "1", "payload_close": "0", "state_open": "1", "state_closed": "0",
            "device_class": "water", "reports_position": false,
        ]
        if let inUse = find(service, "in-use"), inUse.haHasState {
            take(inUse)
            config["state_topic"] = .string(inUse.haStateTopic)
        } else if active.haHasState {
            config["state_topic"] = .string(active.haStateTopic)
        }
        return config
    }
}
