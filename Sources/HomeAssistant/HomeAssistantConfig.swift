import Foundation
public import Gateway
public import HomeModel

/// `homeassistant:` in the config: MQTT discovery for Home Assistant, on by default.
public struct HomeAssistantConfig: ConfigSection, Hashable {
    public var enabled = true
    public var prefix = "homeassistant"
    /// Where a user of Home Assistant finds help with this gateway (discovery's `origin`).
    public var supportURL: String?
    /// The site's name (`site-name`), shown in Home Assistant where `site-name-in` says (device
    /// names by default): nil, none, as before it existed.
    public var site: HomeAssistantDiscovery.Site?
    public init() {}

    /// Where a site's name may be shown (`site-name-in`).
    static let sitePlaces = ["device-name", "area"]
    /// A site name's longest: a prefix of every device's name, kept short enough to read.
    static let siteNameLimit = 40

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
        if let name = try ha.string("site-name") {
            let trimmed = name.trimmingCharacters(in: .whitespaces)
            guard !trimmed.isEmpty, trimmed == name, name.count <= Self.siteNameLimit,
                !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
            else {
                throw ha.error(
                    "site-name",
                    "must be a name of 1 to \(Self.siteNameLimit) characters, without control characters or "
                        + "spaces at either end, got '\(name)'")
            }
            config.site = HomeAssistantDiscovery.Site(name: name)
        }
        if let places = try ha.strings("site-name-in", single: true) {
            guard !places.isEmpty, places.allSatisfy(Self.sitePlaces.contains) else {
                throw ha.error(
                    "site-name-in",
                    "must be one or both of \(Self.sitePlaces.joined(separator: ", ")), "
                        + "got \(places.joined(separator: ", "))")
            }
            guard var site = config.site else {
                throw ha.error("site-name-in", "says where the site's name is shown; set site-name too")
            }
            site.inDeviceNames = places.contains("device-name")
            site.inAreas = places.contains("area")
            config.site = site
        }
        try ha.finish()
        return config
    }
}
