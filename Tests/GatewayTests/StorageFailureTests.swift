import Foundation
import HomeModel
import MQTT
import TestSupport
import XCTest

/// A management request whose change cannot be saved is answered with the failure, and the
/// failure is logged once at error, naming the file and the operating system's reason; the
/// gateway keeps serving. The save is made to fail by putting a directory where the file goes
/// (the atomic rename then fails, for root too). On every enabled rig (`Rig.enabled`); moved
/// from EndToEndTests, where the binary ran it.
final class StorageFailureTests: RigTestCase {
    func request(_ gw: RiggedGateway, _ op: String, _ payload: String) async throws -> [String: JSONValue] {
        try await gw.request("home/$gateway/request/\(op)", payload, answer: "home/$gateway/response/\(op)")
    }

    func testAFailedSaveIsAnsweredAndLoggedNamingTheFile() async throws {
        await onEveryRig { gw in
            let home = gw.state.file("home.json")
            let scope = gw.state.file("scope.json")
            func lines(_ text: String) -> [Substring] {
                gw.log.text.split(separator: "\n").filter { $0.contains(text) }
            }

            // The home database.
            try? FileManager.default.removeItem(atPath: home)
            try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: false)
            let added = try await request(gw, "room/add", #"{"name": "Attic", "id": 1}"#)
            XCTAssertEqual(added["status"], "error", "\(added)")
            XCTAssertEqual(added["code"], "io", "\(added)")
            XCTAssertEqual(added["id"], 1)
            let addedMessage = added["message"]?.stringValue ?? ""
            XCTAssertTrue(addedMessage.contains(home) && addedMessage.contains("Is a directory"), addedMessage)
            try await waitUntil("the home database's failure in the log", timeout: 5) {
                gw.log.text.contains("cannot save the home database")
            }
            let homeLines = lines("cannot save the home database")
            XCTAssertEqual(homeLines.count, 1, gw.log.text)
            XCTAssertTrue(homeLines.first?.hasPrefix("error ") ?? false, "\(homeLines)")
            XCTAssertTrue(homeLines.first?.contains(home) ?? false, "\(homeLines)")
            XCTAssertTrue(homeLines.first?.contains("Is a directory") ?? false, "\(homeLines)")

            // A refused request is answered, not logged: nothing of the home was saved or failed.
            let refused = try await request(gw, "room/add", #"{"name": ""}"#)
            XCTAssertEqual(refused["status"], "error", "\(refused)")
            XCTAssertNotEqual(refused["code"], "io")

            // The run-time scope.
            try FileManager.default.createDirectory(atPath: scope, withIntermediateDirectories: false)
            let scoped = try await request(gw, "scope/set", #"{"scope": {"rooms": {"deny": ["Office"]}}}"#)
            XCTAssertEqual(scoped["code"], "io", "\(scoped)")
            XCTAssertTrue(scoped["message"]?.stringValue?.contains(scope) ?? false, "\(scoped)")
            try await waitUntil("the scope's failure in the log", timeout: 5) {
                gw.log.text.contains("cannot save the scope")
            }
            let scopeLines = lines("cannot save the scope")
            XCTAssertEqual(scopeLines.count, 1, gw.log.text)
            XCTAssertTrue(scopeLines.first?.contains(scope) ?? false, "\(scopeLines)")
            // Only the two failures were logged.
            XCTAssertEqual(lines("cannot save").count, 2, gw.log.text)

            // Still serving; the change that could not be saved was not made.
            let health = try await request(gw, "health", "{}")
            XCTAssertEqual(health["status"], "ok", "\(health)")
            let tree = try await request(gw, "tree", "{}")
            XCTAssertFalse(
                JSONValue.object(tree).encoded().contains("Attic"), "a room that was not saved is in the tree")
            let status = try await gw.retained("home/$gateway/status")
            XCTAssertEqual(status["home/$gateway/status"], "online")
        }
    }
}
