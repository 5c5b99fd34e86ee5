public import Gateway
public import HomeModel

/// `homeassistant:` in the config: MQTT discovery for Home Assistant, on by default.
public struct HomeAssistantConfig: ConfigSection, Hashable {
    public var enabled = true
    public var prefix = "homeassistant"
    /// Where a user of Home Assistant finds help with this gateway (discovery's `origin`).
    public var supportURL: String?
    public init() {}

    public static func read(_ top: ConfigReader, _ context: ConfigContext) throws(ConfigError) -> Self {
        var config = Self()
        guard let ha = try top.reader("homeassistant") else { return config }
        if let enabled = try ha.bool("enabled") { config.enabled = enabled }
        if let prefix = try ha.string("prefix") {
            guard !prefix.isEmpty, !prefix.contains(where: { "+#".contains($0) }) else {
                throw ha.error("prefix", "must be a topic prefix without + or #")
            }
            config.prefix = prefix
        }
        if let url = try ha.string("support-url") {
            guard url.hasPrefix("https://") || url.hasPrefix("http://") else {
                throw ha.error("support-url", "must be an http:// or https:// address, got '\(url)'")
            }
            config.supportURL = url
        }
        try ha.finish()
        return config
    }
}
