public import Foundation

/// The version of a state directory as a whole, in its `state.json`
/// (`{"format": 2, "written-by": "0.10.0"}`); each file in it carries its own `version` as well.
/// A directory without `state.json` but with state in it was written before formats existed:
/// format 1.
///
/// `prepare` brings an older directory up to `current`, under the home database's lock:
/// 1. every file is copied to `backups/format-<n>-<date>/` (made under a temporary name and
///    renamed when complete, so a backup that exists is whole, and the first one is kept when an
///    interrupted migration runs again);
/// 2. the migrations run in order, each rewriting files with `AtomicFileWriter`, each safe to
///    run again on a file it already changed;
/// 3. `state.json` is written last: until then the directory still counts as the old format
///    and the next start migrates it again.
/// A directory of a newer format is refused before anything is read or written.
public struct StateFormat: Sendable {
    public static let current = 2
    public static let fileName = "state.json"
    public static let backupDirectory = "backups"

    /// One step, from `from` to `from + 1`. `apply` must leave a file it already changed as it is.
    public struct Migration: Sendable {
        public var from: Int
        public var summary: String
        public var apply: @Sendable (URL) throws(ModelError) -> Void

        public init(from: Int, summary: String, apply: @escaping @Sendable (URL) throws(ModelError) -> Void) {
            self.from = from
            self.summary = summary
            self.apply = apply
        }
    }

    /// What `prepare` did to an older directory.
    public struct Upgrade: Sendable, Equatable {
        public var from: Int
        public var to: Int
        /// Where the files were before the migration, kept for the user.
        public var backup: URL
        public var steps: [String]
    }

    public let directory: URL
    public let version: String
    public let migrations: [Migration]

    /// - Parameters:
    ///   - version: this HomeMQTT's version, written as `written-by`.
    ///   - migrations: one for each format before `current`.
    public init(directory: URL, version: String, migrations: [Migration]) {
        self.directory = directory
        self.version = version
        self.migrations = migrations
    }

    var file: URL { directory.appendingPathComponent(Self.fileName) }

    /// The directory's format and the version that wrote it; nil for a directory with no state
    /// at all (missing, empty, or only a lock file).
    public func read() throws(ModelError) -> (format: Int, writtenBy: String?)? {
        guard let data = FileManager.default.contents(atPath: file.path) else {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
            let state = names.filter { $0 != HomeDatabase.lockFileName && $0 != Self.backupDirectory }
            return state.isEmpty ? nil : (1, nil)
        }
        let json: JSONValue
        do { json = try JSONValue(parsing: Array(data)) } catch {
            throw ModelError(
                code: .corruptDatabase, message: "\(file.path) is not JSON (\(error.message)); it was left as it is")
        }
        guard let format = json["format"]?.intValue, format >= 2 else {
            throw ModelError(
                code: .corruptDatabase, message: "\(file.path) has no valid \"format\"; it was left as it is")
        }
        return (format, json["written-by"]?.stringValue)
    }

    /// Refuses a newer format; migrates an older one (see the type's comment); marks a new
    /// directory as `current`. Returns what was migrated, if anything.
    @discardableResult
    public func prepare() throws(ModelError) -> Upgrade? {
        if let (format, writtenBy) = try read() {
            if format == Self.current { return nil }
            if format > Self.current { throw newer(format, writtenBy) }
        }
        try AtomicFileWriter.createDirectory(directory)
        let lock = try FileLock(path: directory.appendingPathComponent(HomeDatabase.lockFileName).path)
        defer { withExtendedLifetime(lock) {} }
        // Read again under the lock: another process may have migrated meanwhile.
        guard let (format, writtenBy) = try read() else {
            try writeMarker()
            return nil
        }
        if format > Self.current { throw newer(format, writtenBy) }
        if format == Self.current { return nil }
        let backup = try backUp(format: format)
        var steps: [String] = []
        for from in format..<Self.current {
            guard let migration = migrations.first(where: { $0.from == from }) else {
                throw ModelError(code: .unsupportedVersion, message: "no migration from state format \(from)")
            }
            try migration.apply(directory)
            steps.append(migration.summary)
        }
        try writeMarker()
        return Upgrade(from: format, to: Self.current, backup: backup, steps: steps)
    }

    private func newer(_ format: Int, _ writtenBy: String?) -> ModelError {
        ModelError(
            code: .unsupportedVersion,
            message:
                "the state directory \(directory.path) is format \(format), written by HomeMQTT \(writtenBy ?? "of a later version"); HomeMQTT \(version) reads formats up to \(Self.current). Nothing in it was changed: run that version or a later one, or restore a backup made for this one"
        )
    }

    private func writeMarker() throws(ModelError) {
        let json = JSONValue.object(["format": .int(Int64(Self.current)), "written-by": .string(version)])
        try AtomicFileWriter().write(json.encodedUTF8(pretty: true) + [0x0A], to: file)
    }

    /// Copies every state file to `backups/format-<format>-<UTC date and time>/`, unless a whole
    /// backup of this format exists already (an interrupted migration running again).
    private func backUp(format: Int) throws(ModelError) -> URL {
        let backups = directory.appendingPathComponent(Self.backupDirectory)
        let prefix = "format-\(format)-"
        let existing = ((try? FileManager.default.contentsOfDirectory(atPath: backups.path)) ?? [])
            .filter { $0.hasPrefix(prefix) }.sorted()
        if let first = existing.first { return backups.appendingPathComponent(first) }
        let stamp = Self.timestamp()
        let partial = backups.appendingPathComponent(".partial-\(prefix)\(stamp)")
        let final = backups.appendingPathComponent("\(prefix)\(stamp)")
        try? FileManager.default.removeItem(at: partial)
        for relative in try stateFiles() {
            let bytes: [UInt8]
            do { bytes = Array(try Data(contentsOf: directory.appendingPathComponent(relative))) } catch {
                throw ModelError(
                    code: .io,
                    message:
                        "could not read \(relative) in \(directory.path) to back it up: \(error.localizedDescription)")
            }
            try AtomicFileWriter().write(bytes, to: partial.appendingPathComponent(relative))
        }
        try AtomicFileWriter.createDirectory(partial)
        guard rename(partial.path, final.path) == 0 else {
            throw AtomicFileWriter.ioError("rename \(partial.path) to \(final.path)")
        }
        return final
    }

    /// The directory's files, relative to it: all regular files but the lock, temporaries and
    /// backups.
    public func stateFiles() throws(ModelError) -> [String] {
        guard let walker = FileManager.default.enumerator(atPath: directory.path) else {
            throw ModelError(code: .io, message: "could not list \(directory.path)")
        }
        var files: [String] = []
        while let relative = walker.nextObject() as? String {
            if relative == Self.backupDirectory {
                walker.skipDescendants()
                continue
            }
            let name = (relative as NSString).lastPathComponent
            guard name != HomeDatabase.lockFileName, !name.contains(".tmp-") else { continue }
            var info = stat()
            guard lstat(directory.appendingPathComponent(relative).path, &info) == 0,
                info.st_mode & S_IFMT == S_IFREG
            else { continue }
            files.append(relative)
        }
        return files.sorted()
    }

    static func timestamp(_ date: Date = Date()) -> String {
        var time = time_t(date.timeIntervalSince1970)
        var parts = tm()
        gmtime_r(&time, &parts)
        return String(
            format: "%04d%02d%02dT%02d%02d%02dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
            parts.tm_hour, parts.tm_min, parts.tm_sec)
    }
}

/// A state file's own version: `"version": n` in its top-level JSON object. A file without one
/// was written before files carried versions, and counts as version 1.
public enum FileVersion {
    /// `json` (an object) with `"version": version` set: pretty, sorted keys, a final newline.
    public static func stamped(_ json: [UInt8], version: Int) throws(ModelError) -> [UInt8] {
        guard case .object(var object) = try JSONValue(parsing: json) else {
            throw ModelError(code: .invalidJSON, message: "not a JSON object")
        }
        object["version"] = .int(Int64(version))
        return JSONValue.object(object).encodedUTF8(pretty: true) + [0x0A]
    }

    /// Refuses a file newer than `supported`, naming it; returns the file's version.
    @discardableResult
    public static func check(_ json: [UInt8], supported: Int, file: String) throws(ModelError) -> Int {
        let version: Int
        switch try? JSONValue(parsing: json) {
        case .object(let object)?:
            version = object["version"].flatMap(\.intValue) ?? 1
        default:
            return 1 // the file's own reader reports what is wrong with it
        }
        guard version <= supported else {
            throw ModelError(
                code: .unsupportedVersion,
                message:
                    "\(file) is version \(version), written by a newer HomeMQTT; this one reads version \(supported). It was left as it is"
            )
        }
        return version
    }

    /// Stamps `file` with `version` unless it already has one (a migration step: safe to run
    /// again). A missing file is left missing.
    public static func stampIfMissing(_ file: URL, version: Int) throws(ModelError) {
        guard let data = FileManager.default.contents(atPath: file.path) else { return }
        let bytes = Array(data)
        if case .object(let object)? = try? JSONValue(parsing: bytes), object["version"] != nil { return }
        let stamped: [UInt8]
        do throws(ModelError) { stamped = try Self.stamped(bytes, version: version) } catch {
            throw ModelError(code: error.code, message: "\(file.path): \(error.message); it was left as it is")
        }
        try AtomicFileWriter().write(stamped, to: file)
    }
}
