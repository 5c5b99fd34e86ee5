import Foundation
import HomeModel
import TestSupport
import XCTest

/// A management request whose change cannot be saved is answered with the failure, and the
/// failure is logged once at error, naming the file and the operating system's reason; the
/// gateway keeps serving. The real binary and mosquitto; the save is made to fail by putting a
/// directory where the file goes (the atomic rename then fails, for root too).
final class StorageFailureTests: XCTestCase {
    func request(_ broker: MosquittoBroker, _ op: String, _ payload: String) async throws -> JSONValue {
        let topic = "home/$gateway/response/\(op)"
        let sub = try ChildProcess(
            "mosquitto_sub", broker.clientArguments + ["-t", topic, "-C", "1", "-W", "15"])
        try await broker.waitForSubscription(to: topic)
        try await runChecked(
            "mosquitto_pub", broker.clientArguments + ["-q", "1", "-t", "home/$gateway/request/\(op)", "-m", payload])
        let status = try await sub.waitForExit(timeout: 20)
        XCTAssertEqual(status, 0, "no response to \(op): \(sub.standardError)\nBROKER:\n\(broker.log.suffix(4000))")
        return try JSONValue(parsing: Array(sub.standardOutput.utf8))
    }

    func testAFailedSaveIsAnsweredAndLoggedNamingTheFile() async throws {
        let broker = try await MosquittoBroker.start()
        addTeardownBlock { await broker.stop() }
        let setup = try BinaryEndToEndTests.E2EConfig(brokerURL: "mqtt://127.0.0.1:\(broker.port)")
        let gateway = try await BinaryEndToEndTests.startGateway(setup, broker: broker)
        addTeardownBlock { await gateway.terminate(grace: 2) }
        let home = setup.statePath + "/home.json"
        let scope = setup.statePath + "/scope.json"

        // The home database.
        try? FileManager.default.removeItem(atPath: home)
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: false)
        let added = try await request(broker, "room/add", #"{"name": "Attic", "id": 1}"#)
        XCTAssertEqual(added["status"], "error", "\(added)")
        XCTAssertEqual(added["code"], "io", "\(added)")
        XCTAssertEqual(added["id"], 1)
        let addedMessage = added["message"]?.stringValue ?? ""
        XCTAssertTrue(addedMessage.contains(home) && addedMessage.contains("Is a directory"), addedMessage)
        try await waitUntil("the home database's failure in the log", timeout: 5) {
            gateway.standardError.contains("cannot save the home database")
        }
        let homeLines = gateway.standardError.split(separator: "\n").filter {
            $0.contains("cannot save the home database")
        }
        XCTAssertEqual(homeLines.count, 1, gateway.standardError)
        XCTAssertTrue(homeLines.first?.contains("error") ?? false, "\(homeLines)")
        XCTAssertTrue(homeLines.first?.contains(home) ?? false, "\(homeLines)")
        XCTAssertTrue(homeLines.first?.contains("Is a directory") ?? false, "\(homeLines)")

        // A refused request is answered, not logged: nothing of the home was saved or failed.
        let refused = try await request(broker, "room/add", #"{"name": ""}"#)
        XCTAssertEqual(refused["status"], "error", "\(refused)")
        XCTAssertNotEqual(refused["code"], "io")

        // The run-time scope.
        try FileManager.default.createDirectory(atPath: scope, withIntermediateDirectories: false)
        let scoped = try await request(broker, "scope/set", #"{"scope": {"rooms": {"deny": ["Office"]}}}"#)
        XCTAssertEqual(scoped["code"], "io", "\(scoped)")
        XCTAssertTrue(scoped["message"]?.stringValue?.contains(scope) ?? false, "\(scoped)")
        try await waitUntil("the scope's failure in the log", timeout: 5) {
            gateway.standardError.contains("cannot save the scope")
        }
        let scopeLines = gateway.standardError.split(separator: "\n").filter { $0.contains("cannot save the scope") }
        XCTAssertEqual(scopeLines.count, 1, gateway.standardError)
        XCTAssertTrue(scopeLines.first?.contains(scope) ?? false, "\(scopeLines)")
        // Only the two failures were logged.
        XCTAssertEqual(
            gateway.standardError.split(separator: "\n").filter { $0.contains("cannot save") }.count, 2,
            gateway.standardError)

        // Still serving; the change that could not be saved was not made.
        let health = try await request(broker, "health", "{}")
        XCTAssertEqual(health["status"], "ok", "\(health)")
        let tree = try await request(broker, "tree", "{}")
        XCTAssertFalse(tree.encoded().contains("Attic"), "a room that was not saved is in the tree")
        XCTAssertTrue(gateway.isRunning)
    }
}
