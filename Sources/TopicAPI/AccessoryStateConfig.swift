public import Gateway

/// `accessory-state:` in the config: each accessory's retained `$state` JSON document and its
/// `$set`, on by default.
public struct AccessoryStateConfig: ConfigSection, Hashable {
    public var enabled = true
    public init() {}

    public static func read(_ top: ConfigReader, _ context: ConfigContext) throws(ConfigError) -> Self {
        var config = Self()
        if let on = try top.bool("accessory-state") { config.enabled = on }
        return config
    }
}
