import ArgumentParser
import Foundation
import HomeMQTTApp
import HomeModel

// homemqtt backup / restore: the whole state directory (home database, scope, HAP pairings with
// their keys) as one file, mode 0600, and back (StateArchive).

struct BackupCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Write the state directory (home, scope, HAP pairings and their keys) to one file, mode 0600.",
        discussion:
            "Safe while the gateway runs: every state file is replaced whole, never edited in place. Reads the state only; write the backup outside the state directory."
    )

    @OptionGroup var options: ConfigOptions

    @Option(name: .shortAndLong, help: "The file to write (default: homemqtt-backup-<UTC date and time>.json).")
    var output: String?

    @Flag(help: "Replace the output file if it exists.") var force = false

    func run() throws {
        do {
            let config = try Setup.loadConfig(options)
            let state = HomeMQTTApp.stateFormat(config)
            let archive = try StateArchive.make(of: state)
            let file = output ?? "homemqtt-backup-\(archive.created).json"
            if !force && FileManager.default.fileExists(atPath: file) {
                throw CLIError("\(file) exists; nothing was written (--force replaces it)")
            }
            try AtomicFileWriter().write(archive.encoded, to: URL(fileURLWithPath: file))
            print(
                "backed up \(archive.files.count) files of \(config.stateDirectory) (state format \(archive.format)) to \(file)"
            )
        } catch let error as ModelError {
            throw Setup.failure(CLIError(error.message))
        } catch {
            throw Setup.failure(error)
        }
    }
}

struct RestoreCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore",
        abstract: "Put a backup back into the state directory; refused while a gateway holds it.",
        discussion:
            "A state directory that already holds state is refused unless --replace, which first moves its files to backups/before-restore-<date>/ in it. A backup of an older HomeMQTT is migrated when the gateway next starts."
    )

    @OptionGroup var options: ConfigOptions

    @Argument(help: "The file `homemqtt backup` wrote; - reads it from stdin.") var file: String

    @Flag(help: "Replace the state that is there (moved aside, not deleted).") var replace = false

    func run() throws {
        do {
            let config = try Setup.loadConfig(options)
            let data: Data
            if file == "-" {
                data = FileHandle.standardInput.readDataToEndOfFile()
            } else {
                guard let read = FileManager.default.contents(atPath: file) else {
                    throw CLIError("cannot read \(file)")
                }
                data = read
            }
            let archive = try StateArchive(reading: Array(data), file: file == "-" ? "stdin" : file)
            let state = HomeMQTTApp.stateFormat(config)
            let aside = try archive.restore(into: state, replacing: replace)
            if let aside { print("moved the state that was there to \(aside.path)") }
            print(
                "restored \(archive.files.count) files (state format \(archive.format), backed up \(archive.created) by HomeMQTT \(archive.writtenBy)) into \(config.stateDirectory)"
            )
        } catch let error as ModelError {
            throw Setup.failure(CLIError(error.message))
        } catch {
            throw Setup.failure(error)
        }
    }
}
