public import Gateway

/// `homie:` in the config: the Homie v5 output, off unless enabled.
public struct HomieConfig: ConfigSection, Hashable {
    public var enabled = false
    /// The first topic level: `<domain>/5/<device>/…`.
    public var domain = "homie"
    /// The root device's id; nil: the MQTT client id as a Homie id.
    public var deviceID: String?
    public init() {}

    public static func read(_ top: ConfigReader, _ context: ConfigContext) throws(ConfigError) -> Self {
        var config = Self()
        guard let reader = try top.reader("homie") else { return config }
        if let enabled = try reader.bool("enabled") { config.enabled = enabled }
        if let domain = try reader.string("domain") {
            guard isID(domain) else {
                throw reader.error("domain", "must be one topic level of a-z, 0-9 and -, got '\(domain)'")
            }
            config.domain = domain
        }
        if let id = try reader.string("device-id") {
            guard isID(id) else { throw reader.error("device-id", "must be a Homie id: a-z, 0-9 and -, got '\(id)'") }
            config.deviceID = id
        }
        try reader.finish()
        return config
    }

    /// The convention's topic id: lowercase letters, digits and `-`, not empty.
    static func isID(_ text: String) -> Bool {
        !text.isEmpty
            && text.unicodeScalars.allSatisfy { ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "-" }
    }
}
