import Foundation
import TestSupport
import XCTest
@testable import HAP

final class PairingStoreTests: XCTestCase {
    func sample(_ id: String) -> HAPPairing {
        HAPPairing(
            accessoryPairingID: id, accessoryLTPK: HAPCrypto.randomBytes(32).hexString,
            controllerPairingID: UUID().uuidString,
            controllerLTSK: HAPCrypto.randomBytes(32).hexString, controllerLTPK: HAPCrypto.randomBytes(32).hexString,
            host: "127.0.0.1", port: 51826, name: "Lamp", category: 5)
    }

    func testSaveLoadReplaceRemove() throws {
        let temporary = try TemporaryDirectory()
        let dir = temporary.url
        let store = HAPPairingStore(directory: dir.appendingPathComponent("state"))
        XCTAssertEqual(try store.all(), [])
        var a = sample("AA:BB:CC:DD:EE:01")
        let b = sample("AA:BB:CC:DD:EE:02")
        try store.save(a)
        try store.save(b)
        a.host = "10.0.0.9"
        try store.save(a)
        XCTAssertEqual(try store.all().sorted { $0.accessoryPairingID < $1.accessoryPairingID }, [a, b])
        let names = try FileManager.default.contentsOfDirectory(atPath: store.directory.path)
        XCTAssertEqual(names.count, 2, "no temporary files are left behind: \(names)")
        for n in names {
            let attrs = try FileManager.default.attributesOfItem(atPath: store.directory.appendingPathComponent(n).path)
            XCTAssertEqual((attrs[.posixPermissions] as? NSNumber)?.intValue, 0o600)
        }
        try store.remove(id: a.accessoryPairingID)
        try store.remove(id: a.accessoryPairingID)
        XCTAssertEqual(try store.all(), [b])
    }

    func testCorruptFileIsANamedError() throws {
        let temporary = try TemporaryDirectory()
        let dir = temporary.url
        let store = HAPPairingStore(directory: dir)
        try Data("{\"accessoryPairingID\": 1".utf8).write(to: store.fileURL(for: "X"))
        XCTAssertThrowsError(try store.all()) { error in
            XCTAssertEqual((error as? HAPError)?.code.rawValue, "bad-pairing-file")
            XCTAssertTrue((error as? HAPError)?.message.contains("hap-pairing-X.json") ?? false)
        }
        var bad = sample("Y")
        bad.accessoryLTPK = "zz"
        try store.save(bad)
        XCTAssertThrowsError(try store.pairing(id: "Y")) {
            XCTAssertEqual(($0 as? HAPError)?.code.rawValue, "bad-pairing-file")
        }
    }

    /// A pairing file written before HAP over Thread (no `transport`) still loads, as IP's; a
    /// Thread pairing keeps its transport through the file.
    func testAPairingFileWithoutATransportIsIPs() throws {
        let temporary = try TemporaryDirectory()
        let store = HAPPairingStore(directory: temporary.url)
        let key = String(repeating: "ab", count: 32)
        let old = """
            {"accessoryLTPK": "\(key)", "accessoryPairingID": "AA:BB:CC:DD:EE:03", "category": 5,
             "controllerLTPK": "\(key)", "controllerLTSK": "\(key)", "controllerPairingID": "C1",
             "host": "192.168.1.20", "name": "Lamp", "port": 51826, "version": 1}
            """
        try Data(old.utf8).write(to: store.fileURL(for: "AA:BB:CC:DD:EE:03"))
        let loaded = try XCTUnwrap(try store.pairing(id: "AA:BB:CC:DD:EE:03"))
        XCTAssertNil(loaded.transport)
        XCTAssertFalse(loaded.isThread)
        XCTAssertEqual(loaded.host, "192.168.1.20")
        XCTAssertEqual(loaded.port, 51826)
        XCTAssertEqual(loaded.name, "Lamp")

        var thread = sample("AA:BB:CC:DD:EE:04")
        thread.transport = .thread
        try store.save(thread)
        let text = try String(contentsOf: store.fileURL(for: thread.accessoryPairingID), encoding: .utf8)
        XCTAssertTrue(text.contains("\"transport\": \"thread\""), text)
        XCTAssertEqual(try store.pairing(id: thread.accessoryPairingID)?.isThread, true)
    }
}
