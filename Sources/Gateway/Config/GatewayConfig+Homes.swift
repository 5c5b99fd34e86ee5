public import HomeModel

extension GatewayConfig {
    /// The config of the gateway that serves `home`: the config itself for the home on the
    /// gateway's base topic; for another, its base topic and a client id of its own (each home
    /// has its own connection, because its `status` is that connection's last will), made of
    /// the home's id: two base topics of one slug never share a session.
    public func forHome(_ home: Home) -> GatewayConfig {
        guard let topic = home.baseTopic else { return self }
        var copy = self
        copy.gatewayBaseTopic = gatewayBase
        copy.baseTopic = topic
        copy.mqtt.clientID = "\(mqtt.clientID)-\(Self.homeSuffix(home))"
        return copy
    }

    /// `home-` and the first 8 characters of the home's id, lowercased: what names a home's
    /// connection and its Homie root device.
    public static func homeSuffix(_ home: Home) -> String {
        "home-" + String(Slug.make(home.id, fallback: "x").prefix(8))
    }
}

extension GatewayConfig {
    /// The base topic a home is served on: its own, or the gateway's (the first home's).
    public func baseTopic(of home: Home) -> String { home.baseTopic ?? gatewayBase }
}
