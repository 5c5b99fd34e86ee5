import Foundation
public import Gateway
public import HAP
import HAPThread
public import HomeModel
public import MDNS

// Here rather than in HAP: HAP imports HomeModel and MDNS only, and a source below the gateway
// stays below it; this adapter between the config file and `HAPSource` belongs to the
// composition root, which imports both.

/// `type: hap`: accessories paired over HAP, from the pairings in the state directory, and
/// pairing while the gateway runs (`HAPPairingManager`).
public struct HAPFactory: SourceFactory, CustomStringConvertible {
    public static let type = "hap"
    /// `pair`, `pairings`, `unpair` and `discover`.
    public static var operations: [any ManagementOperation.Type] { HAPPairingOperations.all }
    /// Seconds between reads of what cannot notify; nil: the config's `poll-interval`.
    public var pollInterval: Double?
    /// `mdns-interfaces: {allow: [eth0], deny: [docker0]}`: where accessories are looked for
    /// besides the default route's interface (default: every multicast-capable one).
    public var mdnsInterfaces: MDNSInterfaces

    /// Seconds without an answer from a Thread accessory before a probe asks whether it is
    /// still there (IP's TCP keepalive idles as long), and how long one of its requests may wait.
    public var threadProbeInterval: Double = 15
    public var threadRequestDeadline: Duration = .seconds(16)

    public init(pollInterval: Double? = nil, mdnsInterfaces: MDNSInterfaces = .all) {
        self.pollInterval = pollInterval
        self.mdnsInterfaces = mdnsInterfaces
    }

    /// Thread pairings' links, on libcoap (the HAP module knows no CoAP library).
    var threadLinks: HAPThreadLinkMaker { HAPThreadControllerLink.maker(deadline: threadRequestDeadline) }

    public static func read(_ entry: ConfigReader, _ context: ConfigContext) throws(ConfigError) -> Self {
        var interfaces = MDNSInterfaces.all
        if let lists = try entry.reader("mdns-interfaces") {
            interfaces = MDNSInterfaces(
                allow: try lists.strings("allow", single: true), deny: try lists.strings("deny", single: true) ?? [])
            try lists.finish()
        }
        return Self(pollInterval: try entry.double("poll-interval"), mdnsInterfaces: interfaces)
    }

    public func make(_ context: SourceContext) throws -> MadeSource {
        let source = HAPSource(
            store: Self.pairingStore(context.config), logger: context.logger,
            pollInterval: pollInterval ?? context.config.pollInterval, mdnsInterfaces: mdnsInterfaces,
            gatewayID: try GatewayIdentity.load(stateDirectory: context.config.stateDirectory),
            threadLinks: threadLinks, threadProbeInterval: threadProbeInterval)
        return MadeSource(
            source: source, pairing: HAPPairingManager(source: source, threadLinks: threadLinks, logger: context.logger)
        )
    }

    /// Offline, `hap pair`, `pairings`, `unpair` and `discover` work on the state directory's
    /// pairings whether or not the config has a hap source (as before they were operations):
    /// the gateway serves them once it has one.
    public static func offlinePairing(_ entry: Self?, _ context: SourceContext) -> (any PairingManager)? {
        HAPPairingManager(
            store: pairingStore(context.config), mdnsInterfaces: entry?.mdnsInterfaces ?? .all,
            threadLinks: (entry ?? Self()).threadLinks, logger: context.logger)
    }

    /// Where pairings are kept, in the state directory.
    static let pairingDirectory = "pairings"

    /// `<state-directory>/pairings`: where `homemqtt hap pair` and the hap source keep pairings.
    public static func pairingStore(_ config: GatewayConfig) -> HAPPairingStore {
        HAPPairingStore(directory: URL(fileURLWithPath: config.stateDirectory).appendingPathComponent(pairingDirectory))
    }

    public var description: String { "hap(pollInterval: \(pollInterval.map { "\($0)" } ?? "nil"))" }
}

extension SourceConfig {
    /// A `type: hap` entry.
    public static func hap(pollInterval: Double? = nil) -> Self {
        Self(HAPFactory(pollInterval: pollInterval))
    }
}
