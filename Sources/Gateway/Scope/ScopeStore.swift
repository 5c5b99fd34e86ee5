public import Foundation
public import HomeModel

/// The scope set at run time (`scope/set`), kept in the state directory so that it survives a
/// restart; the config file's scope applies until one has been set.
public struct ScopeStore: Sendable {
    public let file: URL
    /// The `version` the file carries; a file without one is version 1.
    public static let fileVersion = 1

    public init(directory: URL) {
        file = directory.appendingPathComponent("scope.json")
    }

    public func load() throws(ConfigError) -> ScopeConfig? {
        guard let data = FileManager.default.contents(atPath: file.path) else { return nil }
        do throws(ModelError) {
            try FileVersion.check(Array(data), supported: Self.fileVersion, file: "the scope document")
        } catch {
            throw ConfigError(file: file.path, key: nil, message: error.message)
        }
        do {
            return try JSONDecoder().decode(ScopeConfig.self, from: data)
        } catch {
            throw ConfigError(file: file.path, key: nil, message: "not a valid scope document: \(error)")
        }
    }

    /// Written by `AtomicFileWriter`: mode 0600, fsynced, renamed in place, and nothing made
    /// outside the state directory.
    public func save(_ scope: ScopeConfig) throws(ModelError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let data: Data
        do { data = try encoder.encode(scope) } catch {
            throw ModelError(code: .io, message: "could not encode the scope: \(error)")
        }
        try AtomicFileWriter().write(try FileVersion.stamped(Array(data), version: Self.fileVersion), to: file)
    }
}
