import Crypto
import Foundation
import HomeModel
import MQTT
import TestSupport
import XCTest

/// Moving an accessory from Home Assistant's HomeKit Controller to HomeMQTT without a reset, with
/// real parts: a HAP-python bridge paired by aiohomekit (PyPI, as Home Assistant uses it), the
/// pairing stored as Home Assistant stores it, `homemqtt import-pairing`, a mosquitto and the
/// gateway; and the accessory's controllers managed through HomeMQTT's admin pairing.
final class PairingTransferTests: XCTestCase {
    static let tool = HAPPeer.repositoryRoot.appendingPathComponent("Tests/HAPTests/peer/aiohomekit_controller.py").path

    func aiohomekit(_ arguments: [String]) async throws -> String {
        let result = try await runProcess(HAPPeer.python.path, [Self.tool] + arguments, timeout: 60)
        XCTAssertEqual(result.status, 0, "aiohomekit \(arguments.first ?? ""): \(result.standardError)")
        return result.standardOutput
    }

    func homemqtt(_ arguments: [String]) async throws -> ProcessResult {
        try await runProcess(try builtProduct("homemqtt"), arguments, timeout: 60)
    }

    func testAnAccessoryPairedByHomeAssistantIsImportedAndBothControllersKeepWorking() async throws {
        if let reason = HAPPeer.unavailableReason {
            if HAPPeer.isRequired { throw ProcessError("\(reason) (CI=true: the HAP tests must run)") }
            throw XCTSkip(reason)
        }
        let directory = try TemporaryDirectory(prefix: "homemqtt-pairing-transfer")
        let broker = try await MosquittoBroker.start()
        let peer = try await HAPPeer.start(state: directory.file("peer.json"))
        addTeardownBlock {
            await peer.stop()
            await broker.stop()
        }
        let config = directory.file("gateway.yml")
        try """
        broker:
          url: \(broker.url)
        state-directory: \(directory.file("state"))
        poll-interval: 0
        log-level: debug
        sources:
          - type: hap
        homeassistant:
          enabled: false
        """.write(toFile: config, atomically: true, encoding: .utf8)

        // Home Assistant's side: aiohomekit pairs and the pairing is kept in its config entries.
        let entries = directory.file("core.config_entries")
        // HAP-python refuses a correct SRP proof about once in 80 pairings (it drops leading
        // zeros), whoever the controller: aiohomekit's pairing is retried on that refusal alone,
        // as HomeMQTT's are (HAPEndToEndTests.pairWithCLI).
        var paired = ""
        for attempt in 1...4 {
            let result = try await runProcess(
                HAPPeer.python.path,
                [
                    Self.tool, "pair", "--host", "127.0.0.1", "--port", String(peer.port), "--pin",
                    HAPPeer.defaultSetupCode, "--out", entries, "--title", "Peer Bridge",
                ], timeout: 60)
            if result.status == 0 {
                paired = result.standardOutput
                break
            }
            guard attempt < 4, result.standardError.contains("AuthenticationError") else {
                return XCTFail("aiohomekit pair: \(result.standardError)")
            }
        }
        let parts = paired.split(separator: " ").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
        guard parts.count == 3, parts[0] == "PAIRED" else { return XCTFail("aiohomekit pair printed '\(paired)'") }
        let accessoryID = parts[1]
        let theirID = parts[2]
        let theirKey = try XCTUnwrap(
            try JSONValue(parsing: Array(try Data(contentsOf: URL(fileURLWithPath: entries))))["data"]?["entries"]?[0]?[
                "data"]?["iOSDeviceLTSK"]?.stringValue)

        // With --verbose, so that the log lines are checked for keys too.
        let imported = try await homemqtt(["import-pairing", "--verbose", "--config", config, entries])
        XCTAssertEqual(imported.status, 0, imported.standardError)
        XCTAssertTrue(
            imported.standardOutput.contains("added HomeMQTT's pairing to \(accessoryID)"), imported.standardOutput)
        XCTAssertFalse((imported.standardOutput + imported.standardError).contains(theirKey))
        // Only HomeMQTT's own keys are saved.
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.file("state/pairings"))
        XCTAssertEqual(files.count, 1, "\(files)")
        let saved = try String(contentsOfFile: directory.file("state/pairings/\(files[0])"), encoding: .utf8)
        XCTAssertFalse(saved.contains(theirKey))
        XCTAssertFalse(saved.contains(theirID))

        // The accessory now knows both controllers, both admins.
        let listed = try await homemqtt(["accessory-pairings", "--config", config, accessoryID])
        XCTAssertEqual(listed.status, 0, listed.standardError)
        let lines = listed.standardOutput.split(separator: "\n")
        XCTAssertEqual(lines.count, 2, listed.standardOutput)
        XCTAssertTrue(lines.contains { $0.hasPrefix("\(theirID)  admin") }, listed.standardOutput)
        XCTAssertTrue(lines.contains { $0.contains("admin") && $0.hasSuffix("(HomeMQTT)") }, listed.standardOutput)
        let ours = try XCTUnwrap(lines.first { $0.hasSuffix("(HomeMQTT)") }?.split(separator: " ").first).description

        // HomeMQTT controls the accessory with its own pairing…
        let observer = try await MQTTTestSubscriber.start(
            broker: broker, filter: "home/#", clientID: "transfer-observer")
        addTeardownBlock { await observer.stop() }
        TestCensus.record(.binary)
        let gateway = try ChildProcess(try builtProduct("homemqtt"), ["run", "--config", config])
        addTeardownBlock { await gateway.terminate(grace: 5) }
        let state = try await observer.waitForMessage("the Peer Light's brightness", timeout: 30) {
            $0.topic.contains("/peer-light/") && $0.topic.hasSuffix("/brightness/state")
        }
        let brightness = String(state.topic.dropLast("/state".count))
        try await runChecked(
            "mosquitto_pub", broker.clientArguments + ["-q", "1", "-t", "\(brightness)/set", "-m", "37"])
        let answer = try await observer.waitForMessage("the set's result", timeout: 20) {
            $0.topic == "\(brightness)/result"
        }
        XCTAssertTrue(
            answer.string.contains("\"status\":\"ok\""),
            answer.string + "\n" + gateway.standardError + "\nthe accessory's log:\n" + peer.standardError)
        let inside = try await peer.value(aid: 2, iid: 10)
        XCTAssertEqual(inside, "37")
        // …and aiohomekit still does with its own, and sees HomeMQTT beside it.
        let read = try await aiohomekit(["read", "--file", entries, "--aid", "2", "--iid", "10"])
        XCTAssertEqual(read.trimmingCharacters(in: .whitespacesAndNewlines), "VALUE 37")
        let theirList = try await aiohomekit(["pairings", "--file", entries])
        XCTAssertTrue(theirList.contains("PAIRING \(ours) admin"), theirList)
        XCTAssertTrue(theirList.contains("PAIRING \(theirID) admin"), theirList)

        // A third controller added as a user through HomeMQTT, then removed; HomeMQTT's own
        // pairing is not removable this way.
        let third = UUID().uuidString
        let key = String(repeating: "ab", count: 32)
        let added = try await homemqtt([
            "add-pairing", "--config", config, accessoryID, "--controller-id", third, "--public-key", key,
        ])
        XCTAssertEqual(added.status, 0, added.standardError)
        let withThird = try await homemqtt(["accessory-pairings", "--config", config, accessoryID])
        XCTAssertTrue(withThird.standardOutput.contains("\(third)  user "), withThird.standardOutput)
        let removed = try await homemqtt(["remove-pairing", "--config", config, accessoryID, "--controller-id", third])
        XCTAssertEqual(removed.status, 0, removed.standardError)
        let afterRemoval = try await homemqtt(["accessory-pairings", "--config", config, accessoryID])
        XCTAssertFalse(afterRemoval.standardOutput.contains(third), afterRemoval.standardOutput)
        let own = try await homemqtt(["remove-pairing", "--config", config, accessoryID, "--controller-id", ours])
        XCTAssertNotEqual(own.status, 0)
        XCTAssertTrue(own.standardError.contains("unpair"), own.standardError)

        // A pairing that is not an admin cannot import: the accessory says so, and nothing is added.
        let userKey = Curve25519.Signing.PrivateKey()
        let user = UUID().uuidString
        let addedUser = try await homemqtt([
            "add-pairing", "--config", config, accessoryID, "--controller-id", user, "--public-key",
            userKey.publicKey.rawRepresentation.map { String(format: "%02x", $0) }.joined(),
        ])
        XCTAssertEqual(addedUser.status, 0, addedUser.standardError)
        var userPairing = try XCTUnwrap(
            try JSONValue(parsing: Array(try Data(contentsOf: URL(fileURLWithPath: entries))))["data"]?["entries"]?[0]?[
                "data"]?.objectValue)
        userPairing["iOSPairingId"] = .string(user)
        userPairing["iOSDeviceLTSK"] = .string(userKey.rawRepresentation.map { String(format: "%02x", $0) }.joined())
        userPairing["iOSDeviceLTPK"] = .string(
            userKey.publicKey.rawRepresentation.map { String(format: "%02x", $0) }.joined())
        let userFile = directory.file("user-pairing.json")
        try JSONValue.object(userPairing).encoded().write(toFile: userFile, atomically: true, encoding: .utf8)
        let otherState = directory.file("other-state")
        let refused = try await homemqtt([
            "import-pairing", "--config", config, "--state-directory", otherState, userFile,
        ])
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.standardError.contains("only an admin controller"), refused.standardError)
        // HomeMQTT, aiohomekit and that user: no second pairing of HomeMQTT's (ids in either case).
        let afterRefusal = try await homemqtt(["accessory-pairings", "--config", config, accessoryID.lowercased()])
        XCTAssertEqual(afterRefusal.standardOutput.split(separator: "\n").count, 3, afterRefusal.standardOutput)

        // Importing again is refused while HomeMQTT has a pairing with the accessory.
        let again = try await homemqtt(["import-pairing", "--config", config, entries])
        XCTAssertNotEqual(again.status, 0)
        XCTAssertTrue(again.standardError.contains("already has a pairing"), again.standardError)
    }

    func testAFileWithoutAnIPPairingIsAnsweredWithWhatWasExpected() async throws {
        let directory = try TemporaryDirectory(prefix: "homemqtt-pairing-transfer")
        let file = directory.file("entries.json")
        try #"{"data": {"entries": [{"domain": "hue", "data": {}}]}}"#.write(
            toFile: file, atomically: true, encoding: .utf8)
        let config = directory.file("gateway.yml")
        try "state-directory: \(directory.file("state"))\n".write(toFile: config, atomically: true, encoding: .utf8)
        let result = try await homemqtt(["import-pairing", "--config", config, file])
        XCTAssertEqual(result.status, 2)
        XCTAssertTrue(result.standardError.contains("holds no HAP over IP pairing"), result.standardError)
        let broken = directory.file("broken.json")
        try #"{"AccessoryPairingID": "AA:BB", "AccessoryLTPK": "00"}"#.write(
            toFile: broken, atomically: true, encoding: .utf8)
        let missing = try await homemqtt(["import-pairing", "--config", config, broken])
        XCTAssertEqual(missing.status, 2)
        XCTAssertTrue(missing.standardError.contains("AccessoryLTPK is not 32 bytes of hex"), missing.standardError)
    }
}
