public import Gateway
public import HAPServer
public import HomeModel
public import MDNS

// The config file's `homekit:` section: whether each home is served to HomeKit controllers (the
// Home app) as a bridge, on which port, with which setup code, and what of the home it shows.

/// The HomeKit bridge's settings. Off by default: a gateway that was not asked to be a bridge
/// opens no HAP port.
public struct HomeKitConfig: ConfigSection, Hashable, CustomStringConvertible {
    public var enabled = false
    /// The first home's bridge listens here; every other home's on a free port (0), which the
    /// mDNS announcement carries.
    public var port = 51826
    /// The code a controller pairs with; nil: a random one, kept in the state directory.
    public var setupCode: HAPSetupCode?
    /// The front end's own scope, within the gateway's: the shape of `scope:`.
    public var scope = ScopeConfig()
    /// Where the server listens (the server's default: every IPv4 and IPv6 address).
    public var bindAddresses = ["0.0.0.0", "::"]
    /// `mdns-interfaces: {allow: [eth0], deny: [docker0]}`: where the bridge is announced (the
    /// `hap` source's key, the same meaning).
    public var mdnsInterfaces = MDNSInterfaces.all

    /// HAP's limit: a bridge exposes at most 150 accessory objects, itself included.
    public static let maxAccessories = 150

    public init() {}

    /// The scope's decisions, its type names resolved (checked when the file was read).
    public var filter: ScopeFilter { (try? ScopeFilter(scope, key: "homekit.scope")) ?? Self.everything }

    private static let everything = try! ScopeFilter(ScopeConfig())

    /// What a log shows of it (ServiceLifecycle logs its services at debug): never the code.
    public var description: String {
        "HomeKitConfig(enabled: \(enabled), port: \(port), setup-code: \(setupCode == nil ? "random" : "***"))"
    }

    /// Reads `homekit:` strictly. `HOMEMQTT_HOMEKIT_ENABLED` (`true`/`false`) overrides
    /// `enabled`, as `HOMEMQTT_WEB_ENABLED` does the web view's: the demo turns the bridge on
    /// without editing the file.
    public static func read(_ top: ConfigReader, _ context: ConfigContext) throws(ConfigError) -> Self {
        var config = Self()
        if let reader = try top.reader("homekit") {
            if let enabled = try reader.bool("enabled") { config.enabled = enabled }
            if let port = try reader.int("port") {
                guard (0...65535).contains(port) else {
                    throw reader.error("port", "must be 1…65535, or 0 for a free port, got \(port)")
                }
                config.port = port
            }
            if let text = try reader.string("setup-code") {
                // The code is not repeated in the message: it is the bridge's secret.
                guard let code = HAPSetupCode(text) else {
                    throw reader.error(
                        "setup-code",
                        "must be eight digits written XXX-XX-XXX, not one digit repeated nor 123-45-678 or 876-54-321")
                }
                config.setupCode = code
            }
            if let addresses = try reader.strings("listen", single: true) {
                guard !addresses.isEmpty else { throw reader.error("listen", "names no address") }
                config.bindAddresses = addresses
            }
            if let lists = try reader.reader("mdns-interfaces") {
                config.mdnsInterfaces = MDNSInterfaces(
                    allow: try lists.strings("allow", single: true),
                    deny: try lists.strings("deny", single: true) ?? [])
                try lists.finish()
            }
            if let scope = try reader.reader("scope") {
                config.scope = try ScopeConfig.read(scope)
                try scope.finish()
                // Type names resolved once now, so that a misspelt one is the file's error.
                _ = try ScopeFilter(config.scope, file: context.file, key: "homekit.scope")
            }
            try reader.finish()
        }
        if let value = context.environment["HOMEMQTT_HOMEKIT_ENABLED"], !value.isEmpty {
            guard let enabled = ["true": true, "1": true, "false": false, "0": false][value.lowercased()] else {
                throw top.error("HOMEMQTT_HOMEKIT_ENABLED", "expected true or false, got '\(value)'")
            }
            config.enabled = enabled
        }
        return config
    }
}
