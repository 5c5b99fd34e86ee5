// What a person's view of the tree needs beyond topics: which characteristic `$toggle` flips,
// so that a page shows the same control the MQTT contract toggles.

extension TopicTree.ServiceNode {
    /// The characteristic `$toggle` flips (HomeKit's primary control), when it is in scope and
    /// writable; nil for a service that cannot be toggled.
    public var primaryControl: TopicTree.CharacteristicNode? { PrimaryControl.characteristic(in: self) }
}
