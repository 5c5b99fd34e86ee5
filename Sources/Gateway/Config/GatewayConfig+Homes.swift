public import HomeModel

extension GatewayConfig {
    /// The config of the gateway that serves `home`: the config itself for the home on the
    /// gateway's base topic; for another, its base topic and a client id of its own (each home
    /// has its own connection, because its `status` is that connection's last will).
    public func forHome(_ home: Home) -> GatewayConfig {
        guard let topic = home.baseTopic else { return self }
        var copy = self
        copy.gatewayBaseTopic = gatewayBase
        copy.baseTopic = topic
        copy.mqtt.clientID = "\(mqtt.clientID)-\(Slug.make(topic, fallback: "home"))"
        return copy
    }
}
