import Foundation
public import Gateway
public import HomeModel
import Simulator

// Here rather than in Simulator: Simulator imports HomeModel only, and a source below the
// gateway stays below it; this adapter between the config file and `SimulatedHome` belongs to
// the composition root, which imports both.

/// `type: simulator`: simulated accessories from the files in a directory.
public struct SimulatorFactory: SourceFactory, CustomStringConvertible {
    public static let type = "simulator"
    /// The accessory files' directory, absolute or relative to the config file.
    public var directory: String
    /// Where the directory was named (`gateway.yml: sources[0].directory`), so that a
    /// directory that cannot be listed is reported as a config error is; not part of equality.
    var origin: String?

    public init(directory: String) {
        self.directory = directory
    }

    public static func read(_ entry: ConfigReader, _ context: ConfigContext) throws(ConfigError) -> Self {
        var factory = Self(directory: context.resolve(try entry.string("directory") ?? "accessories"))
        factory.origin = "\(context.file): \(entry.keyPath("directory"))"
        return factory
    }

    /// Without `sources:`, the simulated home in `accessories` beside the config file.
    public static func byDefault(_ context: ConfigContext) -> Self? {
        let directory = context.directory.isEmpty ? "." : context.directory
        var factory = Self(directory: (directory as NSString).appendingPathComponent("accessories"))
        factory.origin = "\(context.file): sources (none given: the simulated home beside the file)"
        return factory
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.directory == rhs.directory }
    public func hash(into hasher: inout Hasher) { hasher.combine(directory) }

    /// A directory that cannot be listed is the config's mistake: said with the file and key
    /// that name it (`gateway.yml: sources[0].directory: /srv/sim: no such directory`). A
    /// problem inside an accessory file names that file, as it is.
    func failure(_ error: any Error) -> SourceFilesError {
        guard let error = error as? SimulatorError, error.key == nil,
            error.file == URL(fileURLWithPath: directory).relativePath, let origin
        else { return SourceFilesError("\(error)") }
        return SourceFilesError("\(origin): \(directory): \(error.message)")
    }

    public func make(_ context: SourceContext) throws -> MadeSource {
        let url = URL(fileURLWithPath: directory)
        guard context.deferred else {
            do {
                return MadeSource(source: try SimulatedHome.load(directory: url))
            } catch {
                throw failure(error)
            }
        }
        let (directory, logger, factory) = (directory, context.logger, self)
        return MadeSource(
            source: DeferredSource(name: "simulator") { hub in
                logger.info("loading accessory files", metadata: ["directory": "\(directory)"])
                do {
                    return try SimulatedHome.load(directory: url, hub: hub) { warning in
                        logger.warning("accessory file", metadata: ["problem": "\(warning)"])
                    }
                } catch {
                    throw factory.failure(error)
                }
            })
    }

    public var description: String { "simulator(directory: \(directory))" }
}

extension SourceConfig {
    /// A `type: simulator` entry.
    public static func simulator(directory: String) -> Self {
        Self(SimulatorFactory(directory: directory))
    }
}

/// A source's own files are at fault (an accessory file names a key the simulator does not
/// know): a problem of the configuration, told in the source's own words.
public struct SourceFilesError: Error, CustomStringConvertible {
    public var description: String

    public init(_ description: String) {
        self.description = description
    }
}
