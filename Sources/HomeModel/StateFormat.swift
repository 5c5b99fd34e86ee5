public import Foundation

/// The version of a state directory as a whole, in its `state.json`
/// (`{"format": 2, "written-by": "0.10.0"}`); each file in it carries its own `version` as well.
/// A directory without `state.json` but with state in it was written before formats existed:
/// format 1.
///
/// `prepare` brings an older directory up to `current`, under the home database's lock:
/// 1. every state file is copied to `backups/format-<n>-<date>/` (made under a temporary name
///    and renamed when complete, so a backup that exists is whole); `backups/.migrating` names it
///    until the migration is done, so an interrupted migration that runs again reuses it rather
///    than backing up half-migrated files;
/// 2. the migrations run in order, each rewriting files with `AtomicFileWriter`, each safe to
///    run again on a file it already changed;
/// 3. `state.json` is written last: until then the directory still counts as the old format
///    and the next start migrates it again.
/// A directory of a newer format is refused before anything is read or written, and so is one
/// owned by another user than the one writing (files it made would lock the owner out).
///
/// The state files are `home.json`, `scope.json`, `state.json`, the `*.json` files in
/// `pairings/`, `published/` and `homeassistant/` (the node ids Home Assistant knows accessories
/// by), and the HomeKit servers' in `homekit/<home>/` and
/// `homekit/<home>/standalone/<accessory>/`, each a regular file: nothing else there is backed
/// up, migrated or restored, and a symbolic link in their place is refused.
public struct StateFormat: Sendable {
    public static let current = 3
    public static let fileName = "state.json"
    public static let backupDirectory = "backups"
    static let topLevelFiles: Set<String> = [HomeDatabase.fileName, "scope.json", fileName]
    static let fileDirectories: Set<String> = ["pairings", "published", "homeassistant"]
    /// Folders of folders of state files: `homekit/<home id>/*.json`, a HomeKit bridge's each.
    static let nestedFileDirectories: Set<String> = ["homekit"]
    /// In a home's `homekit/` folder, the folder of its standalone accessories' folders
    /// (`homekit/<home id>/standalone/<accessory id>/*.json`), each with a server's keys and ids.
    static let standaloneFolder = "standalone"
    static let migratingMarker = ".migrating"

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
    /// files at all (missing, empty, or only a lock file).
    public func read() throws(ModelError) -> (format: Int, writtenBy: String?)? {
        var info = stat()
        if lstat(file.path, &info) != 0 {
            guard errno == ENOENT else { throw AtomicFileWriter.ioError("read \(file.path)") }
            return try stateFiles().isEmpty ? nil : (1, nil)
        }
        guard info.st_mode & S_IFMT == S_IFREG, let data = FileManager.default.contents(atPath: file.path) else {
            throw ModelError(code: .io, message: "\(file.path) is not a readable file; it was left as it is")
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

    /// For commands that only read: refuses a newer format, and writes nothing.
    public func check() throws(ModelError) {
        if let (format, writtenBy) = try read(), format > Self.current { throw newer(format, writtenBy) }
    }

    /// Refuses to write into a directory another user owns.
    public func checkOwner() throws(ModelError) {
        var info = stat()
        guard stat(directory.path, &info) == 0, info.st_uid != geteuid() else { return }
        let owner = getpwuid(info.st_uid).map { String(cString: $0.pointee.pw_name) } ?? "uid \(info.st_uid)"
        throw ModelError(
            code: .wrongOwner,
            message:
                "\(directory.path) belongs to \(owner): files written as another user would lock it out. Run this as \(owner) (sudo -u \(owner) homemqtt …); nothing was changed"
        )
    }

    /// For a command that writes: refuses a newer format and a directory another user owns;
    /// migrates an older one (see the type's comment); marks a new directory as `current`.
    /// Returns what was migrated, if anything.
    @discardableResult
    public func prepare() throws(ModelError) -> Upgrade? {
        let found = try read()
        if let (format, writtenBy) = found, format > Self.current { throw newer(format, writtenBy) }
        try checkOwner()
        if found?.format == Self.current { return nil }
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
        unlink(directory.appendingPathComponent(Self.backupDirectory).appendingPathComponent(Self.migratingMarker).path)
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

    /// Copies every state file to `backups/format-<format>-<UTC date and time>/`, unless
    /// `backups/.migrating` names a whole backup made by an interrupted migration of this format.
    private func backUp(format: Int) throws(ModelError) -> URL {
        let backups = try backupsDirectory()
        let marker = backups.appendingPathComponent(Self.migratingMarker)
        let prefix = "format-\(format)-"
        if let data = FileManager.default.contents(atPath: marker.path) {
            let name = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            var info = stat()
            if name.hasPrefix(prefix), !name.contains("/"), stat(backups.appendingPathComponent(name).path, &info) == 0
            {
                return backups.appendingPathComponent(name)
            }
        }
        for stale in (try? FileManager.default.contentsOfDirectory(atPath: backups.path)) ?? []
        where stale.hasPrefix(".partial-") {
            try? FileManager.default.removeItem(at: backups.appendingPathComponent(stale))
        }
        let name = "\(prefix)\(Self.timestamp())"
        let partial = backups.appendingPathComponent(".partial-\(name)")
        let final = backups.appendingPathComponent(name)
        try copy(try stateFiles(), to: partial)
        guard rename(partial.path, final.path) == 0 else {
            throw AtomicFileWriter.ioError("rename \(partial.path) to \(final.path)")
        }
        // Written through AtomicFileWriter, which syncs backups/ and so the rename above too.
        try AtomicFileWriter().write(Array(name.utf8), to: marker)
        return final
    }

    /// `backups/` in the directory; a symbolic link or a file in its place is an error.
    func backupsDirectory() throws(ModelError) -> URL {
        let backups = directory.appendingPathComponent(Self.backupDirectory)
        var info = stat()
        if lstat(backups.path, &info) == 0 && info.st_mode & S_IFMT != S_IFDIR {
            throw notRegular(Self.backupDirectory, "a directory")
        }
        return backups
    }

    /// Copies `files` (relative to the state directory) into `target`, made 0700.
    private func copy(_ files: [String], to target: URL) throws(ModelError) {
        try AtomicFileWriter.createDirectory(target)
        for relative in files {
            let bytes: [UInt8]
            do { bytes = Array(try Data(contentsOf: directory.appendingPathComponent(relative))) } catch {
                throw ModelError(
                    code: .io,
                    message: "could not read \(relative) in \(directory.path) to copy it: \(error.localizedDescription)"
                )
            }
            try AtomicFileWriter().write(bytes, to: target.appendingPathComponent(relative))
        }
    }

    /// Whether `relative` names a state file: one of the top-level files, a `*.json` file
    /// directly in `pairings/` or `published/`, in a folder of `homekit/` or in a standalone
    /// accessory's folder there, without hidden or temporary names.
    public static func isStateFile(_ relative: String) -> Bool {
        let parts = relative.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        func plain(_ name: String) -> Bool {
            !name.isEmpty && !name.hasPrefix(".") && !name.contains(".tmp-") && !name.contains("\0")
        }
        switch parts.count {
        case 1: return topLevelFiles.contains(parts[0])
        case 2: return fileDirectories.contains(parts[0]) && plain(parts[1]) && parts[1].hasSuffix(".json")
        case 3:
            return nestedFileDirectories.contains(parts[0]) && plain(parts[1]) && plain(parts[2])
                && parts[2].hasSuffix(".json")
        case 5:
            return nestedFileDirectories.contains(parts[0]) && plain(parts[1]) && parts[2] == standaloneFolder
                && plain(parts[3]) && plain(parts[4]) && parts[4].hasSuffix(".json")
        default: return false
        }
    }

    /// The state files there are (see the type's comment), relative to the directory, sorted.
    /// A symbolic link or anything but a regular file in a state file's place is an error.
    public func stateFiles() throws(ModelError) -> [String] {
        var candidates: [String] = Self.topLevelFiles.sorted()
        for folder in Self.fileDirectories.sorted() {
            let path = directory.appendingPathComponent(folder).path
            var info = stat()
            guard lstat(path, &info) == 0 else { continue }
            guard info.st_mode & S_IFMT == S_IFDIR else { throw notRegular(folder, "a directory") }
            for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] {
                candidates.append("\(folder)/\(name)")
            }
        }
        for folder in Self.nestedFileDirectories.sorted() {
            let path = directory.appendingPathComponent(folder).path
            var info = stat()
            guard lstat(path, &info) == 0 else { continue }
            guard info.st_mode & S_IFMT == S_IFDIR else { throw notRegular(folder, "a directory") }
            for relative in try subfolders(of: folder) {
                candidates += entries(of: relative)
                // A standalone HomeKit accessory's own folder: `homekit/<home>/standalone/<id>/`.
                let standalone = "\(relative)/\(Self.standaloneFolder)"
                guard lstat(directory.appendingPathComponent(standalone).path, &info) == 0 else { continue }
                if info.st_mode & S_IFMT == S_IFLNK { throw notRegular(standalone, "a directory") }
                guard info.st_mode & S_IFMT == S_IFDIR else { continue }
                for accessory in try subfolders(of: standalone) { candidates += entries(of: accessory) }
            }
        }
        var files: [String] = []
        for relative in candidates where Self.isStateFile(relative) {
            var info = stat()
            guard lstat(directory.appendingPathComponent(relative).path, &info) == 0 else { continue }
            guard info.st_mode & S_IFMT == S_IFREG else { throw notRegular(relative, "a regular file") }
            files.append(relative)
        }
        return files.sorted()
    }

    /// The folders directly in `relative`, as paths relative to the directory, sorted. A file of
    /// someone else's beside them is not state; a link in a folder's place is refused.
    private func subfolders(of relative: String) throws(ModelError) -> [String] {
        let path = directory.appendingPathComponent(relative).path
        var folders: [String] = []
        for inner in ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted() {
            let child = "\(relative)/\(inner)"
            var info = stat()
            guard lstat(directory.appendingPathComponent(child).path, &info) == 0 else { continue }
            if info.st_mode & S_IFMT == S_IFLNK { throw notRegular(child, "a directory") }
            if info.st_mode & S_IFMT == S_IFDIR { folders.append(child) }
        }
        return folders
    }

    /// Every name in the folder `relative`, as paths relative to the directory.
    private func entries(of relative: String) -> [String] {
        let path = directory.appendingPathComponent(relative).path
        return ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).map { "\(relative)/\($0)" }
    }

    private func notRegular(_ relative: String, _ expected: String) -> ModelError {
        ModelError(
            code: .io,
            message:
                "\(directory.appendingPathComponent(relative).path) is not \(expected) (a symbolic link?); HomeMQTT keeps only its own files there. Nothing was changed"
        )
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
