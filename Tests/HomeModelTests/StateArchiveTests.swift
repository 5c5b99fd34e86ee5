import Foundation
import Testing
import TestSupport
@testable import HomeModel

// Backup archives of the state directory (StateArchive); `formatOne` and `json` are in
// StateFormatTests.swift.

@Suite struct StateArchiveTests {
    private func format(_ dir: URL) -> StateFormat { StateFormat(directory: dir, version: "9.9", migrations: []) }

    @Test func aBackupRestoresEveryFileIntoAnEmptyDirectory() throws {
        let source = try TemporaryDirectory()
        try formatOne(source)
        try AtomicFileWriter().write(Array(#"{"format": 2}"#.utf8), to: source.url.appendingPathComponent("state.json"))
        try AtomicFileWriter().write(Array("{}".utf8), to: source.url.appendingPathComponent("homekit/h1/ids.json"))
        let standalone = "homekit/h1/standalone/garage/hap-accessory.json"
        try AtomicFileWriter().write(Array(#"{"k": 1}"#.utf8), to: source.url.appendingPathComponent(standalone))
        // Home Assistant's node ids (issue 43, item 9): a restore keeps every entity id.
        let nodeIDs = "homeassistant/identity.json"
        try AtomicFileWriter().write(Array(#"{"version": 1}"#.utf8), to: source.url.appendingPathComponent(nodeIDs))
        let bytes = try StateArchive.make(of: format(source.url)).encoded
        let target = try TemporaryDirectory()
        let archive = try StateArchive(reading: bytes, file: "b.json")
        #expect(
            Set(archive.files.keys) == [
                "home.json", "scope.json", "pairings/p.json", "state.json", "homekit/h1/ids.json", standalone,
                nodeIDs,
            ]
        )
        #expect(try archive.restore(into: format(target.url), replacing: false) == nil)
        for file in archive.files.keys {
            let restored = target.url.appendingPathComponent(file)
            #expect(try Data(contentsOf: restored) == Data(contentsOf: source.url.appendingPathComponent(file)))
            var info = stat()
            #expect(stat(restored.path, &info) == 0 && info.st_mode & 0o777 == 0o600)
        }
    }

    @Test func aRestoreIsRefusedWhileAGatewayHoldsTheState() throws {
        let dir = try TemporaryDirectory()
        let database = try HomeDatabase(directory: dir.url, exclusive: true)
        let archive = try StateArchive.make(of: format(dir.url))
        do {
            try archive.restore(into: format(dir.url), replacing: true)
            Issue.record("restored while a gateway holds the state")
        } catch {
            #expect(error.code == .locked)
            #expect(error.message.contains("stop it first"))
        }
        _ = database
    }

    @Test func aNonEmptyDirectoryNeedsReplaceAndKeepsWhatWasThere() throws {
        let dir = try TemporaryDirectory()
        try formatOne(dir)
        let archive = try StateArchive(
            format: 2, writtenBy: "9.9", created: "now", files: ["home.json": Array(#"{"version": 1}"#.utf8)])
        do {
            try archive.restore(into: format(dir.url), replacing: false)
            Issue.record("restored over existing state")
        } catch {
            #expect(error.code == .stateNotEmpty)
        }
        let aside = try #require(try archive.restore(into: format(dir.url), replacing: true))
        #expect(FileManager.default.fileExists(atPath: aside.appendingPathComponent("scope.json").path))
        #expect(!FileManager.default.fileExists(atPath: dir.url.appendingPathComponent("scope.json").path))
        #expect(try json(dir, "home.json")["version"]?.intValue == 1)
    }

    @Test(arguments: [
        "../etc/passwd", "/etc/passwd", "backups/x.json", "home.lock", ".hidden", "a//b", "pairings/../../x",
        "backup.json", "pairings/a/b.json", "pairings/.x.json", "published/x.json.tmp-1",
    ])
    func anArchiveWithAPathOutsideTheStateIsRefused(path: String) {
        let text = #"{"homemqtt-backup": 1, "format": 2, "files": {"home.json": "e30=", "\#(path)": "e30="}}"#
        #expect(throws: ModelError.self) { try StateArchive(reading: Array(text.utf8), file: "b.json") }
    }

    @Test func anArchiveOfANewerFormatIsRefusedBeforeAnythingIsWritten() throws {
        let dir = try TemporaryDirectory()
        let text = #"{"homemqtt-backup": 1, "format": 99, "written-by": "12.0", "files": {"home.json": "e30="}}"#
        let archive = try StateArchive(reading: Array(text.utf8), file: "b.json")
        #expect(throws: ModelError.self) {
            try archive.restore(into: format(dir.url.appendingPathComponent("s")), replacing: true)
        }
        #expect(!FileManager.default.fileExists(atPath: dir.url.appendingPathComponent("s").path))
    }

    @Test func anArchiveWithoutAHomeDatabaseIsRefused() {
        let text = #"{"homemqtt-backup": 1, "format": 2, "files": {"scope.json": "e30="}}"#
        #expect(throws: ModelError.self) { try StateArchive(reading: Array(text.utf8), file: "b.json") }
    }
}
