import Foundation
import Gateway
import HAP
import HomeModel
import TestSupport
import XCTest

/// Everything the gateway writes goes through `AtomicFileWriter`: the state directory is 0700
/// and every file in it 0600, whichever writer comes first and whatever the umask.
final class StateFileModeTests: XCTestCase {
    enum Writer: CaseIterable { case database, pairing, scope }

    func write(_ writer: Writer, in state: URL) async throws {
        switch writer {
        case .database:
            let database = try HomeDatabase(directory: state, exclusive: true)
            try await database.addRoom(named: "Room \(UUID().uuidString.prefix(8))")
        case .pairing:
            let key = String(repeating: "ab", count: 32)
            try HAPPairingStore(directory: state.appendingPathComponent("pairings")).save(
                HAPPairing(
                    accessoryPairingID: "AA:BB:CC:DD:EE:01", accessoryLTPK: key, controllerPairingID: UUID().uuidString,
                    controllerLTSK: key, controllerLTPK: key, host: "127.0.0.1", port: 51826))
        case .scope:
            var scope = ScopeConfig()
            scope.rooms = ScopeList(deny: ["Bedroom"])
            try ScopeStore(directory: state).save(scope)
        }
    }

    /// umask 0 would make a plain `open(…, 0644)` world-readable and a plain `mkdir` 0777; the
    /// modes must not depend on it.
    func testOwnerOnlyModesWhicheverWriterCreatesTheDirectory() async throws {
        let previous = umask(0)
        defer { umask(previous) }
        for first in Writer.allCases {
            let root = try TemporaryDirectory(prefix: "homemqtt-modes")
            // Two missing levels: parents made on the way are 0700 too.
            let state = URL(fileURLWithPath: root.file("var/state"))
            let order = [first] + Writer.allCases.filter { $0 != first }
            for writer in order { try await write(writer, in: state) }
            // And each again, now that the files exist: a replacement keeps the mode.
            for writer in order { try await write(writer, in: state) }

            XCTAssertEqual(try mode(root.file("var")), 0o700, "\(first) first")
            XCTAssertEqual(try mode(state.path), 0o700, "\(first) first")
            XCTAssertEqual(try mode(state.appendingPathComponent("pairings").path), 0o700, "\(first) first")
            let files = try regularFiles(under: state)
            XCTAssertEqual(
                Set(files.map(\.lastPathComponent)),
                ["home.json", "home.lock", "scope.json", "hap-pairing-AA-BB-CC-DD-EE-01.json"],
                "no temporaries left either (\(first) first)")
            for file in files {
                XCTAssertEqual(try mode(file.path), 0o600, "\(file.lastPathComponent), \(first) first")
            }
        }
    }

    /// An existing directory keeps the mode its owner gave it; the files written in it are 0600.
    func testExistingDirectoryIsLeftAsItIs() async throws {
        let root = try TemporaryDirectory(prefix: "homemqtt-modes")
        let state = URL(fileURLWithPath: root.file("state"))
        try FileManager.default.createDirectory(
            at: state, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o750])
        for writer in Writer.allCases { try await write(writer, in: state) }
        XCTAssertEqual(try mode(state.path), 0o750)
        for file in try regularFiles(under: state) {
            XCTAssertEqual(try mode(file.path), 0o600, file.lastPathComponent)
        }
    }

    /// The scope store makes nothing outside its own directory: a Foundation `.atomic` write may
    /// make a `TemporaryDirectory.*` in the temporary directory and leave it there.
    func testScopeWritesMakeNothingOutsideTheStateDirectory() throws {
        let temporary = try TemporaryDirectory(prefix: "homemqtt-tmpdir")
        let state = try TemporaryDirectory(prefix: "homemqtt-scope")
        let previous = ProcessInfo.processInfo.environment["TMPDIR"]
        setenv("TMPDIR", temporary.path, 1)
        defer {
            if let previous { setenv("TMPDIR", previous, 1) } else { unsetenv("TMPDIR") }
        }
        XCTAssertTrue(NSTemporaryDirectory().hasPrefix(temporary.path), "the probe: Foundation reads TMPDIR")
        let store = ScopeStore(directory: URL(fileURLWithPath: state.path))
        for room in ["Attic", "Cellar", "Loft"] {
            var scope = ScopeConfig()
            scope.rooms = ScopeList(deny: [room])
            try store.save(scope)
        }
        XCTAssertEqual(try store.load()?.rooms.deny, ["Loft"])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: temporary.path), [])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: state.path), ["scope.json"])
    }

    func mode(_ path: String) throws -> mode_t {
        var info = stat()
        guard stat(path, &info) == 0 else { throw ProcessError("stat \(path): \(String(cString: strerror(errno)))") }
        return info.st_mode & 0o7777
    }

    func regularFiles(under directory: URL) throws -> [URL] {
        var out: [URL] = []
        for name in try FileManager.default.contentsOfDirectory(atPath: directory.path) {
            let url = directory.appendingPathComponent(name)
            var isDirectory: ObjCBool = false
            _ = FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory)
            if isDirectory.boolValue { out += try regularFiles(under: url) } else { out.append(url) }
        }
        return out
    }
}
