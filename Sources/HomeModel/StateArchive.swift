public import Foundation

/// One file holding a whole state directory (`homemqtt backup`), and putting it back
/// (`homemqtt restore`). The archive is JSON:
/// `{"homemqtt-backup": 1, "format": 2, "written-by": "0.10.0", "created": "…",
///   "files": {"home.json": "<base64>", "pairings/hap-pairing-….json": "<base64>", …}}`,
/// written mode 0600 (it holds pairing keys). Restoring takes the home database's lock, so it
/// is refused while a gateway or another command holds the state.
public struct StateArchive: Sendable {
    public static let archiveVersion = 1

    public let format: Int
    public let writtenBy: String
    public let created: String
    /// Relative path → contents.
    public let files: [String: [UInt8]]

    /// Reads every state file of `state` (see `StateFormat.stateFiles`), writing nothing. A
    /// directory of any format is archived as it is, with its format (a restore checks it).
    public static func make(of state: StateFormat) throws(ModelError) -> StateArchive {
        guard let (format, _) = try state.read() else {
            throw ModelError(code: .io, message: "there is no state in \(state.directory.path) to back up")
        }
        var files: [String: [UInt8]] = [:]
        for relative in try state.stateFiles() {
            do {
                files[relative] = Array(try Data(contentsOf: state.directory.appendingPathComponent(relative)))
            } catch {
                throw ModelError(
                    code: .io,
                    message: "could not read \(relative) in \(state.directory.path): \(error.localizedDescription)")
            }
        }
        return StateArchive(format: format, writtenBy: state.version, created: StateFormat.timestamp(), files: files)
    }

    init(format: Int, writtenBy: String, created: String, files: [String: [UInt8]]) {
        self.format = format
        self.writtenBy = writtenBy
        self.created = created
        self.files = files
    }

    public var encoded: [UInt8] {
        var entries: [String: JSONValue] = [:]
        for (path, bytes) in files { entries[path] = .string(Data(bytes).base64EncodedString()) }
        let json = JSONValue.object([
            "homemqtt-backup": .int(Int64(Self.archiveVersion)), "format": .int(Int64(format)),
            "written-by": .string(writtenBy), "created": .string(created), "files": .object(entries),
        ])
        return json.encodedUTF8(pretty: true) + [0x0A]
    }

    /// Reads an archive, checking every path before anything is written anywhere.
    public init(reading bytes: [UInt8], file: String) throws(ModelError) {
        func bad(_ why: String) -> ModelError {
            ModelError(code: .invalidJSON, message: "\(file) is not a HomeMQTT backup: \(why)")
        }
        let json: JSONValue
        do { json = try JSONValue(parsing: bytes) } catch { throw bad(error.message) }
        guard let version = json["homemqtt-backup"]?.intValue else { throw bad("no \"homemqtt-backup\"") }
        guard version <= Self.archiveVersion else {
            throw ModelError(
                code: .unsupportedVersion,
                message:
                    "\(file) is a backup of version \(version), made by a newer HomeMQTT; this one reads version \(Self.archiveVersion)"
            )
        }
        guard let format = json["format"]?.intValue, format >= 1 else { throw bad("no valid \"format\"") }
        guard case .object(let entries)? = json["files"] else { throw bad("no \"files\"") }
        var files: [String: [UInt8]] = [:]
        for (path, value) in entries {
            guard StateFormat.isStateFile(path) else { throw bad("\(Self.printable(path)) is not a state file's path") }
            guard let text = value.stringValue, let data = Data(base64Encoded: text) else {
                throw bad("\"\(path)\" is not base64")
            }
            files[path] = Array(data)
        }
        guard files[HomeDatabase.fileName] != nil else { throw bad("it holds no \(HomeDatabase.fileName)") }
        self.init(
            format: format, writtenBy: Self.printable(json["written-by"]?.stringValue ?? "?"),
            created: Self.printable(json["created"]?.stringValue ?? "?"), files: files)
    }

    /// Text from an archive as it may be shown on a terminal: control characters replaced.
    static func printable(_ text: String) -> String {
        String(
            String.UnicodeScalarView(
                text.prefix(200).unicodeScalars.map { $0.properties.generalCategory == .control ? "?" : $0 }))
    }

    /// Puts the archive's files into `state`'s directory under the home database's lock
    /// (`locked` while a gateway holds it), as the directory's owner (`wrong-owner` otherwise).
    /// A directory that already holds state is refused unless `replacing`, when its files are
    /// moved to `backups/before-restore-<date>/`. The archive is written to
    /// `backups/.restore-<date>/` first and renamed into place file by file, `state.json` last;
    /// if that fails part-way, the files that were there are put back. An archive of a newer
    /// format than this HomeMQTT reads is refused; an older one is restored as it is and migrated
    /// by the next start. Returns where the replaced files went.
    @discardableResult
    public func restore(into state: StateFormat, replacing: Bool) throws(ModelError) -> URL? {
        guard format <= StateFormat.current else {
            throw ModelError(
                code: .unsupportedVersion,
                message:
                    "the backup is of state format \(format), written by HomeMQTT \(writtenBy); HomeMQTT \(state.version) reads formats up to \(StateFormat.current). Nothing was changed"
            )
        }
        try state.checkOwner()
        try AtomicFileWriter.createDirectory(state.directory)
        let lock: FileLock
        do throws(ModelError) {
            lock = try FileLock(path: state.directory.appendingPathComponent(HomeDatabase.lockFileName).path)
        } catch  where error.code == .locked {
            throw ModelError(
                code: .locked,
                message:
                    "\(state.directory.path) is held by a running gateway or another homemqtt command; stop it first (nothing was changed)"
            )
        }
        defer { withExtendedLifetime(lock) {} }
        let existing = try state.stateFiles()
        if !existing.isEmpty && !replacing {
            throw ModelError(
                code: .stateNotEmpty,
                message:
                    "\(state.directory.path) already holds state (\(existing.count) files); restore with --replace to move them to \(StateFormat.backupDirectory)/ first (nothing was changed)"
            )
        }
        let stamp = StateFormat.timestamp()
        let backups = try state.backupsDirectory()
        let staged = backups.appendingPathComponent(".restore-\(stamp)")
        try? FileManager.default.removeItem(at: staged)
        defer { try? FileManager.default.removeItem(at: staged) }
        for (relative, bytes) in files {
            try AtomicFileWriter().write(bytes, to: staged.appendingPathComponent(relative))
        }
        var aside: URL?
        if !existing.isEmpty {
            let target = backups.appendingPathComponent("before-restore-\(stamp)")
            try Self.move(existing, from: state.directory, to: target)
            aside = target
        }
        // state.json last: until it is there, a start sees format 1 or nothing, never a mix.
        let order =
            files.keys.filter { $0 != StateFormat.fileName }.sorted()
            + (files[StateFormat.fileName] == nil ? [] : [StateFormat.fileName])
        do throws(ModelError) {
            try Self.move(order, from: staged, to: state.directory)
        } catch {
            for relative in (try? state.stateFiles()) ?? [] {
                unlink(state.directory.appendingPathComponent(relative).path)
            }
            if let aside { try? Self.move(existing, from: aside, to: state.directory) }
            throw ModelError(code: error.code, message: "\(error.message); the restore was undone")
        }
        return aside
    }

    /// Renames `files` from `source` to `target` (one file system), then syncs the directories.
    static func move(_ files: [String], from source: URL, to target: URL) throws(ModelError) {
        var directories: Set<String> = []
        for relative in files {
            let destination = target.appendingPathComponent(relative)
            let folder = destination.deletingLastPathComponent()
            try AtomicFileWriter.createDirectory(folder)
            directories.insert(folder.path)
            guard rename(source.appendingPathComponent(relative).path, destination.path) == 0 else {
                throw AtomicFileWriter.ioError("move \(relative) to \(target.path)")
            }
        }
        for directory in directories.sorted() { try AtomicFileWriter.syncDirectory(directory) }
    }
}
