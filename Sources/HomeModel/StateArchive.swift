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

    /// Reads every state file of `state` (see `StateFormat.stateFiles`). A directory of a newer
    /// format is refused; an older one is archived as it is, with its format.
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
            guard Self.isSafe(path) else { throw bad("the path \"\(path)\" is not a state file's") }
            guard let text = value.stringValue, let data = Data(base64Encoded: text) else {
                throw bad("\"\(path)\" is not base64")
            }
            files[path] = Array(data)
        }
        self.init(
            format: format, writtenBy: json["written-by"]?.stringValue ?? "?",
            created: json["created"]?.stringValue ?? "?",
            files: files)
    }

    /// Relative, without `.`/`..` components, hidden names, the lock or backups: a path the
    /// state directory's own files have.
    static func isSafe(_ path: String) -> Bool {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard !path.hasPrefix("/"), !parts.isEmpty, parts.count <= 4 else { return false }
        for part in parts where part.isEmpty || part.hasPrefix(".") || part.contains("\0") { return false }
        return parts[0] != Substring(StateFormat.backupDirectory) && path != HomeDatabase.lockFileName
    }

    /// Puts the archive's files into `state`'s directory under the home database's lock
    /// (`locked` while a gateway holds it). A directory that already holds state is refused
    /// unless `replacing`, when its files are first moved to `backups/before-restore-<date>/`.
    /// An archive of a newer format than this HomeMQTT reads is refused; an older one is
    /// restored as it is and migrated by the next start. Returns where the replaced files went.
    @discardableResult
    public func restore(into state: StateFormat, replacing: Bool) throws(ModelError) -> URL? {
        guard format <= StateFormat.current else {
            throw ModelError(
                code: .unsupportedVersion,
                message:
                    "the backup is of state format \(format), written by HomeMQTT \(writtenBy); HomeMQTT \(state.version) reads formats up to \(StateFormat.current)"
            )
        }
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
        var movedTo: URL?
        if !existing.isEmpty {
            guard replacing else {
                throw ModelError(
                    code: .stateNotEmpty,
                    message:
                        "\(state.directory.path) already holds state (\(existing.count) files); restore with --replace to move them to \(StateFormat.backupDirectory)/ first (nothing was changed)"
                )
            }
            let aside = state.directory.appendingPathComponent(StateFormat.backupDirectory)
                .appendingPathComponent("before-restore-\(StateFormat.timestamp())")
            try AtomicFileWriter.createDirectory(aside)
            for relative in existing {
                let target = aside.appendingPathComponent(relative)
                try AtomicFileWriter.createDirectory(target.deletingLastPathComponent())
                guard rename(state.directory.appendingPathComponent(relative).path, target.path) == 0 else {
                    throw AtomicFileWriter.ioError("move \(relative) to \(aside.path)")
                }
            }
            movedTo = aside
        }
        // state.json last: until it is there, a start sees format 1 or nothing, never a mix.
        for (relative, bytes) in files.sorted(by: {
            ($0.key == StateFormat.fileName ? 1 : 0, $0.key) < ($1.key == StateFormat.fileName ? 1 : 0, $1.key)
        }) {
            try AtomicFileWriter().write(bytes, to: state.directory.appendingPathComponent(relative))
        }
        return movedTo
    }
}
