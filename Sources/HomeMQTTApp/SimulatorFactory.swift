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

    public init(directory: String) {
        self.directory = directory
    }

    public static func read(_ entry: ConfigReader, _ context: ConfigContext) throws(ConfigError) -> Self {
        Self(directory: context.resolve(try entry.string("directory") ?? "accessories"))
    }

    /// Without `sources:`, the simulated home in `accessories` beside the config file.
    public static func byDefault(_ context: ConfigContext) -> Self? {
        let directory = context.directory.isEmpty ? "." : context.directory
        return Self(directory: (directory as NSString).appendingPathComponent("accessories"))
    }

    public func make(_ context: SourceContext) throws -> MadeSource {
        let url = URL(fileURLWithPath: directory)
        guard context.deferred else {
            do {
                return MadeSource(source: try SimulatedHome.load(directory: url))
            } catch {
                throw SourceFilesError("\(error)")
            }
        }
        let (directory, logger) = (directory, context.logger)
        return MadeSource(
            source: DeferredSource(name: "simulator") { hub in
                logger.info("loading accessory files", metadata: ["directory": "\(directory)"])
                do {
                    return try SimulatedHome.load(directory: url, hub: hub) { warning in
                        logger.warning("accessory file", metadata: ["problem": "\(warning)"])
                    }
                } catch {
                    throw SourceFilesError("\(error)")
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
