import Foundation
import HomeKitBridgeTestSupport
import HomeModel
import TestSupport
import XCTest

/// A hundred wrong setup codes from aiohomekit 4.0.1 lock the running gateway's bridge: the
/// right code is refused too (MaxTries), until `homekit-reset` on MQTT, after which it pairs.
/// `PairingStateMachineTests` holds the state machine to the same count.
final class HomeKitBridgeMaxTriesTests: XCTestCase {
    typealias AioHomeKit = HAPBridgeServerTests.AioHomeKit
    static let wrong = "123-45-678"

    func testAHundredWrongCodesLockPairSetupUntilAReset() async throws {
        if let reason = HAPPeer.unavailableReason {
            if HAPPeer.isRequired { throw ProcessError("\(reason) (CI=true: the HAP tests must run)") }
            throw XCTSkip(reason)
        }
        XCTAssertNotEqual(Self.wrong, BridgedGateway.code)
        let state = try TemporaryDirectory(prefix: "homekit-max-tries")
        let aio = try await AioHomeKit()
        addTeardownBlock { await aio.stop() }
        try await BridgedGateway.run(state: state) { gw in
            func pair(_ code: String, _ n: Int) async throws -> JSONValue {
                try await aio.send(
                    "pair",
                    [
                        "host": "127.0.0.1", "port": .int(Int64(gw.bridge.listeningPort ?? gw.port)),
                        "pin": .string(code), "file": .string(state.file("pairing-\(n).json")),
                    ])
            }
            // Each wrong code is refused as wrong (aiohomekit's AuthenticationError), a hundred times.
            var refusals: [String: Int] = [:]
            for n in 0..<100 {
                let answer = try await pair(Self.wrong, n)
                XCTAssertEqual(answer["ok"], false, "try \(n + 1) paired")
                refusals[answer["error"]?.stringValue ?? "?", default: 0] += 1
            }
            XCTAssertEqual(refusals, ["AuthenticationError": 100])
            XCTAssertTrue(
                gw.logs.lines.contains { $0.contains("pair-setup refused") && $0.contains("100 of 100 tries used") })
            XCTAssertFalse(gw.logs.lines.contains { $0.contains(Self.wrong) }, "a tried code was logged")

            // Now the right code is refused as well, and the bridge is still unpaired.
            for n in 100..<102 {
                let locked = try await pair(BridgedGateway.code, n)
                XCTAssertEqual(locked["ok"], false)
                XCTAssertEqual(locked["error"], "MaxTriesError", "\(locked.encoded())")
            }
            let lockedStatus = await gw.bridge.status()
            XCTAssertEqual(lockedStatus.isPaired, false)
            XCTAssertEqual(lockedStatus.pairings, [])

            // `homekit-reset` as an MQTT client asks for it; then the right code pairs.
            try await gw.publish("home/$gateway/request/homekit-reset", "{}")
            let reset = try await gw.seen.waitFor("the reset's answer", timeout: 20) {
                $0.topic == "home/$gateway/response/homekit-reset"
            }
            let answer = try JSONValue(parsing: reset.payload)
            XCTAssertEqual(answer["status"], "ok", reset.string)
            let file = state.file("pairing-after-reset.json")
            let paired = try await aio.ok(
                "pair",
                [
                    "host": "127.0.0.1", "port": .int(Int64(try XCTUnwrap(gw.bridge.listeningPort))),
                    "pin": .string(BridgedGateway.code), "file": .string(file),
                ])
            let status = await gw.bridge.status()
            XCTAssertEqual(status.isPaired, true)
            XCTAssertEqual(paired["accessory"]?.stringValue, status.pairingID)
            // The pairing works: aiohomekit lists the bridge.
            _ = try await aio.ok("open", ["name": "a", "file": .string(file)])
            let document = try await aio.ok("accessories", ["name": "a"])
            XCTAssertEqual(document["accessories"]?.arrayValue?.first?["aid"], 1)
            _ = try await aio.ok("close", ["name": "a"])
        }
    }
}
