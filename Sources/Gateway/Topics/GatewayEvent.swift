/// The name of every event the gateway publishes on `<base>/$gateway/event`: one place to see
/// them all, and the README's list is checked against it.
public enum GatewayEvent: String, Sendable, CaseIterable {
    case accessoryAdded = "accessory-added"
    case accessoryRemoved = "accessory-removed"
    case accessoryLeftScope = "accessory-left-scope"
    case accessoryRenamed = "accessory-renamed"
    case accessoryMoved = "accessory-moved"
    case accessoryTopicChanged = "accessory-topic-changed"
    case accessoryReachable = "accessory-reachable"
    case accessoryUnreachable = "accessory-unreachable"
    case roomAdded = "room-added"
    case roomRemoved = "room-removed"
    case roomRenamed = "room-renamed"
    case serviceRenamed = "service-renamed"
    case homeRenamed = "home-renamed"
    case homeAdded = "home-added"
    case homeRemoved = "home-removed"
    case primaryHomeChanged = "primary-home-changed"
    case homeBaseTopicChanged = "home-base-topic-changed"
    /// An accessory moved here from another home (`accessory-left-home` in the home it left).
    case accessoryJoinedHome = "accessory-joined-home"
    case accessoryLeftHome = "accessory-left-home"
    case scopeChanged = "scope-changed"
}
