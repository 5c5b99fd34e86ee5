import Foundation
import Testing
import TestSupport
@testable import HomeModel

// The state directory's format and its migration (StateFormat).

/// A format-1 directory as 0.9.0 left it: a versioned home database, an unversioned scope and
/// pairing file.
func formatOne(_ dir: TemporaryDirectory) throws {
    try AtomicFileWriter().write(
        Array(#"{"version": 1, "primaryHomeID": "H", "homes": []}"#.utf8),
        to: dir.url.appendingPathComponent("home.json"))
    try AtomicFileWriter().write(
        Array(#"{"rooms": {"deny": ["Bedroom"]}}"#.utf8), to: dir.url.appendingPathComponent("scope.json"))
    try AtomicFileWriter().write(
        Array(#"{"accessoryPairingID": "AA"}"#.utf8), to: dir.url.appendingPathComponent("pairings/p.json"))
}

/// The migration the app defines for format 1, counting its runs.
private final class Stamp: @unchecked Sendable {
    var runs = 0
    var failAfterFirstFile = false
    var migration: StateFormat.Migration {
        StateFormat.Migration(from: 1, summary: "stamp") { directory throws(ModelError) in
            self.runs += 1
            try FileVersion.stampIfMissing(directory.appendingPathComponent("scope.json"), version: 1)
            if self.failAfterFirstFile { throw ModelError(code: .io, message: "the disk went away") }
            try FileVersion.stampIfMissing(directory.appendingPathComponent("pairings/p.json"), version: 1)
        }
    }
    /// One for each format before the current one: the stamp, then steps that change nothing.
    var migrations: [StateFormat.Migration] {
        [migration] + (2..<StateFormat.current).map { StateFormat.Migration(from: $0, summary: "step \($0)") { _ in } }
    }
}

func json(_ dir: TemporaryDirectory, _ file: String) throws -> JSONValue {
    try JSONValue(parsing: Array(try Data(contentsOf: dir.url.appendingPathComponent(file))))
}

/// Every file under `dir` with its bytes and modification time: what "untouched" means.
private func snapshot(_ dir: TemporaryDirectory) throws -> [String: String] {
    var out: [String: String] = [:]
    let walker = FileManager.default.enumerator(atPath: dir.url.path)!
    while let relative = walker.nextObject() as? String {
        let path = dir.url.appendingPathComponent(relative).path
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        let data = FileManager.default.contents(atPath: path) ?? Data()
        out[relative] = "\(attributes[.modificationDate]!) \(data.base64EncodedString())"
    }
    return out
}

@Suite struct StateFormatTests {
    @Test func aNewDirectoryIsMarkedCurrentAndNothingIsMigrated() throws {
        let dir = try TemporaryDirectory()
        let stamp = Stamp()
        let upgrade = try StateFormat(
            directory: dir.url.appendingPathComponent("state"), version: "9.9", migrations: stamp.migrations
        ).prepare()
        #expect(upgrade == nil)
        #expect(stamp.runs == 0)
        let marker = try JSONValue(
            parsing: Array(try Data(contentsOf: dir.url.appendingPathComponent("state/state.json"))))
        #expect(marker["format"]?.intValue == StateFormat.current)
        #expect(marker["written-by"]?.stringValue == "9.9")
    }

    @Test func anOlderDirectoryIsBackedUpThenMigrated() throws {
        let dir = try TemporaryDirectory()
        try formatOne(dir)
        let before = try Data(contentsOf: dir.url.appendingPathComponent("scope.json"))
        let stamp = Stamp()
        let format = StateFormat(directory: dir.url, version: "9.9", migrations: stamp.migrations)
        let upgrade = try #require(try format.prepare())
        #expect(upgrade.from == 1 && upgrade.to == StateFormat.current && upgrade.steps.first == "stamp")
        #expect(upgrade.backup.lastPathComponent.hasPrefix("format-1-"))
        #expect(try Data(contentsOf: upgrade.backup.appendingPathComponent("scope.json")) == before)
        #expect(FileManager.default.fileExists(atPath: upgrade.backup.appendingPathComponent("pairings/p.json").path))
        #expect(try json(dir, "scope.json")["version"]?.intValue == 1)
        #expect(try json(dir, "scope.json")["rooms"]?["deny"]?[0]?.stringValue == "Bedroom")
        #expect(try json(dir, "pairings/p.json")["version"]?.intValue == 1)
        #expect(try json(dir, "state.json")["format"]?.intValue == StateFormat.current)
        // Done once: the next start changes nothing.
        #expect(try format.prepare() == nil)
        #expect(stamp.runs == 1)
    }

    @Test func anInterruptedMigrationRunsAgainAndKeepsTheFirstBackup() throws {
        let dir = try TemporaryDirectory()
        try formatOne(dir)
        let original = try Data(contentsOf: dir.url.appendingPathComponent("scope.json"))
        let stamp = Stamp()
        stamp.failAfterFirstFile = true
        let format = StateFormat(directory: dir.url, version: "9.9", migrations: stamp.migrations)
        #expect(throws: ModelError.self) { try format.prepare() }
        #expect(!FileManager.default.fileExists(atPath: dir.url.appendingPathComponent("state.json").path))
        // Half migrated: the scope has its version, the pairing not yet.
        #expect(try json(dir, "scope.json")["version"]?.intValue == 1)
        stamp.failAfterFirstFile = false
        let upgrade = try #require(try format.prepare())
        #expect(try json(dir, "pairings/p.json")["version"]?.intValue == 1)
        let backups = try FileManager.default.contentsOfDirectory(
            atPath: dir.url.appendingPathComponent("backups").path)
        #expect(backups.count == 1)
        // The backup is the directory before the first attempt, not the half-migrated one.
        #expect(try Data(contentsOf: upgrade.backup.appendingPathComponent("scope.json")) == original)
    }

    @Test func aNewerDirectoryIsRefusedUntouched() throws {
        let dir = try TemporaryDirectory()
        try formatOne(dir)
        try AtomicFileWriter().write(
            Array(#"{"format": 99, "written-by": "12.0"}"#.utf8), to: dir.url.appendingPathComponent("state.json"))
        let before = try snapshot(dir)
        let stamp = Stamp()
        do {
            try StateFormat(directory: dir.url, version: "9.9", migrations: stamp.migrations).prepare()
            Issue.record("a newer state directory was accepted")
        } catch {
            #expect(error.code == .unsupportedVersion)
            #expect(error.message.contains("format 99, written by HomeMQTT 12.0"))
            #expect(error.message.contains("Nothing in it was changed"))
        }
        #expect(try snapshot(dir) == before)
        #expect(stamp.runs == 0)
    }

    @Test func aNewerFileIsRefusedByName() {
        #expect(throws: ModelError.self) {
            try FileVersion.check(Array(#"{"version": 2}"#.utf8), supported: 1, file: "the scope document")
        }
        #expect((try? FileVersion.check(Array(#"{"rooms": {}}"#.utf8), supported: 1, file: "x")) == 1)
    }

    @Test func onlyTheStateFilesAreBackedUpAndALinkInTheirPlaceIsRefused() throws {
        let dir = try TemporaryDirectory()
        try formatOne(dir)
        // A backup the user wrote into the state directory is not state.
        try AtomicFileWriter().write(Array("{}".utf8), to: dir.url.appendingPathComponent("backup.json"))
        let format = StateFormat(directory: dir.url, version: "9.9", migrations: [])
        #expect(try format.stateFiles() == ["home.json", "pairings/p.json", "scope.json"])
        // A HomeKit bridge's files, one folder per home.
        try AtomicFileWriter().write(Array("{}".utf8), to: dir.url.appendingPathComponent("homekit/h1/ids.json"))
        try AtomicFileWriter().write(Array("{}".utf8), to: dir.url.appendingPathComponent("homekit/h1/.x.json"))
        try AtomicFileWriter().write(Array("{}".utf8), to: dir.url.appendingPathComponent("homekit/top.json"))
        #expect(try format.stateFiles() == ["home.json", "homekit/h1/ids.json", "pairings/p.json", "scope.json"])
        #expect(!StateFormat.isStateFile("homekit/h1/deeper/ids.json"))
        // A standalone accessory's keys and ids are backed up with the bridge's.
        let standalone = dir.url.appendingPathComponent("homekit/h1/standalone/garage")
        try AtomicFileWriter().write(Array("{}".utf8), to: standalone.appendingPathComponent("hap-accessory.json"))
        try AtomicFileWriter().write(Array("{}".utf8), to: standalone.appendingPathComponent(".tmp-x.json"))
        try AtomicFileWriter().write(
            Array("{}".utf8), to: dir.url.appendingPathComponent("homekit/h1/standalone/stray.json"))
        #expect(
            try format.stateFiles() == [
                "home.json", "homekit/h1/ids.json", "homekit/h1/standalone/garage/hap-accessory.json",
                "pairings/p.json", "scope.json",
            ])
        #expect(!StateFormat.isStateFile("homekit/h1/other/garage/ids.json"))
        try FileManager.default.removeItem(at: dir.url.appendingPathComponent("homekit/h1/standalone"))
        let elsewhere = try TemporaryDirectory()
        try FileManager.default.moveItem(
            at: dir.url.appendingPathComponent("pairings"), to: elsewhere.url.appendingPathComponent("pairings"))
        try FileManager.default.createSymbolicLink(
            at: dir.url.appendingPathComponent("pairings"),
            withDestinationURL: elsewhere.url.appendingPathComponent("pairings"))
        #expect(throws: ModelError.self) { try format.stateFiles() }
    }

    @Test func aDirectoryOfAnotherUserIsNotWrittenTo() throws {
        guard geteuid() == 0 else { return } // only root can give a directory away
        let dir = try TemporaryDirectory()
        try formatOne(dir)
        #expect(chown(dir.url.path, 65534, 65534) == 0)
        let before = try snapshot(dir)
        do {
            try StateFormat(directory: dir.url, version: "9.9", migrations: Stamp().migrations).prepare()
            Issue.record("migrated a directory another user owns")
        } catch {
            #expect(error.code == .wrongOwner)
            #expect(error.message.contains("sudo -u"))
        }
        #expect(try snapshot(dir) == before)
    }
}
