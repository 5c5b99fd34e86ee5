public import HomeModel
public import Logging

// The config file's `sources:`: each entry names its kind by `type`, and that kind's factory,
// registered by the composition root, reads the entry's other keys and makes the source. The
// core knows no kind of source: it reads the list and sees the sources as `AccessorySource`s.

/// One kind of accessory source, as the settings of one `sources:` entry of that kind.
public protocol SourceFactory: Sendable, Hashable {
    /// The entry's `type`.
    static var type: String { get }
    /// Reads the entry's keys other than `type`. The caller finishes the reader, so a key that
    /// nothing read is named as unknown.
    static func read(_ entry: ConfigReader, _ context: ConfigContext) throws(ConfigError) -> Self
    /// The entry a file without `sources:` gets; nil: none of this kind.
    static func byDefault(_ context: ConfigContext) -> Self?
    /// Makes the source these settings describe.
    func make(_ context: SourceContext) throws -> MadeSource
    /// The management operations this kind of source adds to the gateway's (`pair` for HAP),
    /// answered live and offline alike.
    static var operations: [any ManagementOperation.Type] { get }
    /// Without a running gateway: this kind's pairing over the state directory alone, so its
    /// operations work offline as the core's do. `entry`: the config's entry of this kind, if
    /// it has one. Nil: nothing to pair offline.
    static func offlinePairing(_ entry: Self?, _ context: SourceContext) -> (any PairingManager)?
}

extension SourceFactory {
    public static func byDefault(_ context: ConfigContext) -> Self? { nil }
    public static var operations: [any ManagementOperation.Type] { [] }
    public static func offlinePairing(_ entry: Self?, _ context: SourceContext) -> (any PairingManager)? { nil }

    /// `offlinePairing` with the config's first entry of this kind.
    public static func offlinePairing(_ context: SourceContext) -> (any PairingManager)? {
        let entry = context.config.sources.lazy.compactMap { $0.settings as? Self }.first
        return offlinePairing(entry, context)
    }

    // Through an existential metatype (`any SourceFactory.Type`) the settings are reached as a
    // `SourceConfig`, which names no `Self`.
    static func readEntry(_ entry: ConfigReader, _ context: ConfigContext) throws(ConfigError) -> SourceConfig {
        SourceConfig(try read(entry, context))
    }

    static func defaultEntry(_ context: ConfigContext) -> SourceConfig? {
        byDefault(context).map { SourceConfig($0) }
    }
}

/// What a factory may need beside its settings.
public struct SourceContext: Sendable {
    public var config: GatewayConfig
    public var logger: Logger
    /// Whether a source with files to load loads them when its service runs (`DeferredSource`,
    /// for `homemqtt run`, where SIGTERM must stop the load too) rather than now.
    public var deferred: Bool

    public init(config: GatewayConfig, logger: Logger, deferred: Bool = false) {
        self.config = config
        self.logger = logger
        self.deferred = deferred
    }
}

/// A source, and what pairs new accessories with it while the gateway runs: one manager per
/// kind of source that pairs (a `CompositeSource` of several has several).
public struct MadeSource: Sendable {
    public var source: any AccessorySource
    public var pairings: [any PairingManager]

    public init(source: any AccessorySource, pairing: (any PairingManager)? = nil) {
        self.init(source: source, pairings: pairing.map { [$0] } ?? [])
    }

    public init(source: any AccessorySource, pairings: [any PairingManager]) {
        self.source = source
        self.pairings = pairings
    }
}

/// One entry of `sources:`: the settings its kind's factory read.
public struct SourceConfig: Sendable, Hashable, CustomStringConvertible {
    public let settings: any SourceFactory

    public init(_ settings: any SourceFactory) {
        self.settings = settings
    }

    /// The entry's `type`.
    public var type: String { Swift.type(of: settings).type }

    public func make(_ context: SourceContext) throws -> MadeSource {
        try settings.make(context)
    }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        AnyHashable(lhs.settings) == AnyHashable(rhs.settings)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(AnyHashable(settings))
    }

    public var description: String { "\(settings)" }
}

extension GatewayConfig {
    /// Reads `sources:` through the registered factories; without the key, each factory's
    /// default entry (the simulated home beside the file).
    mutating func readSources(
        _ top: ConfigReader, _ factories: [any SourceFactory.Type], _ context: ConfigContext
    ) throws(ConfigError) {
        sources = factories.compactMap { factory in factory.defaultEntry(context) }
        guard let entries = try top.list("sources") else { return }
        // A closure, not `\.type`: a key path to a static member through an existential
        // metatype crashes Swift 6.3's SILGen.
        let types = Self.alternatives(factories.map { factory in factory.type })
        sources = []
        for (path, node) in entries {
            let entry = try top.reader(for: node, path: path)
            let type = try entry.string("type")
            guard let factory = factories.first(where: { $0.type == type }) else {
                throw ConfigError(
                    file: file, key: "\(path).type", message: "expected \(types), got '\(type ?? "nothing")'")
            }
            sources.append(try factory.readEntry(entry, context))
            try entry.finish()
        }
        if sources.isEmpty {
            throw top.error("sources", "needs at least one source (\(types))")
        }
    }

    /// `a`, `a or b`, `a, b or c`.
    static func alternatives(_ names: [String]) -> String {
        guard let last = names.last else { return "no source type" }
        let rest = names.dropLast()
        return rest.isEmpty ? last : rest.joined(separator: ", ") + " or " + last
    }
}
