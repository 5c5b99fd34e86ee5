import Foundation
import HAP
import HomeModel
import MQTT
import TestSupport
import XCTest

/// HAP's operations over MQTT (`discover`, `pair`, `pairings`, `unpair`, `accessory/remove`)
/// against a real HAP-python bridge, on the gateway in process on the memory broker
/// (`InProcessRun`); the same from the command line, with the binary, is `HAPEndToEndTests`.
final class HAPOverMQTTTests: XCTestCase {
    func testPairUnpairRemoveAndDiscoverOverMQTT() async throws {
        try PeerProcess.requireVenv()
        let directory = try TemporaryDirectory(prefix: "homemqtt-hap-mqtt")
        let peer = try await HAPPeer.start(state: directory.file("peer.state"))
        addTeardownBlock { await peer.stop() }
        let store = HAPPairingStore(directory: URL(fileURLWithPath: directory.file("state/pairings")))
        let config = try InProcessRun.writeConfig(
            in: directory, extra: "request-timeout: 5\nhomeassistant:\n  enabled: false\nlog-level: info")
        try await InProcessRun.run(file: config) { run in
            try await pairUnpairAndRemove(run, peer, store)
        }
    }

    func pairUnpairAndRemove(_ run: InProcessRun, _ peer: HAPPeer, _ store: HAPPairingStore) async throws {

        // discover: a list (on loopback often empty) or an error that says why.
        let discovered = try await run.request("discover", ["timeout": .double(1)])
        if discovered["status"] == .string("ok") {
            XCTAssertNotNil(discovered["data"]?.arrayValue, discovered.encoded())
        } else {
            XCTAssertFalse(discovered["code"]?.stringValue?.isEmpty ?? true, discovered.encoded())
            XCTAssertFalse(discovered["message"]?.stringValue?.isEmpty ?? true, discovered.encoded())
        }

        // A wrong setup code.
        let wrong = try await run.request(
            "pair",
            ["host": .string("127.0.0.1"), "port": .int(Int64(peer.port)), "code": "111-22-333"])
        XCTAssertEqual(wrong["status"], .string("error"), wrong.encoded())
        XCTAssertEqual(wrong["code"], .string("wrong-setup-code"), wrong.encoded())

        // Pairing: the new accessories' topics appear and are announced.
        let pairingID = try await pairOverMQTT(run, peer, store)
        let stateTopic = try await waitForBrightnessState(run)
        let accessory = HAPEndToEndTests.accessoryTopic(of: stateTopic)
        try await run.seen.waitFor("accessory-added", timeout: 10) {
            guard $0.topic == "home/$gateway/event", let event = try? JSONValue(parsing: $0.payload) else {
                return false
            }
            return event["event"] == .string("accessory-added") && event["accessory"]?["name"] == .string("Peer Light")
        }
        XCTAssertEqual(try store.all().map(\.accessoryPairingID), [pairingID])
        let before = try await run.retained("\(accessory)/#")
        XCTAssertNotNil(before["\(accessory)/$info"])
        // The pairings as MQTT lists them: the one pairing, its address, no keys.
        run.seen.clear()
        let listed = try await run.request("pairings", [:])
        XCTAssertEqual(listed["status"], "ok", listed.encoded())
        let pairings = listed["data"]?["pairings"]?.arrayValue ?? []
        XCTAssertEqual(pairings.compactMap { $0["pairing"]?.stringValue }, [pairingID])
        XCTAssertNotNil(pairings.first?["port"]?.int64Value)
        XCTAssertFalse(listed.encoded().contains("LTSK") || listed.encoded().contains("ltsk"), "no keys")

        // Unpairing clears them.
        run.seen.clear()
        let unpaired = try await run.request("unpair", ["pairing": .string(pairingID)])
        XCTAssertEqual(unpaired["status"], .string("ok"), unpaired.encoded())
        try await run.seen.waitFor("accessory-removed", timeout: 10) {
            guard $0.topic == "home/$gateway/event", let event = try? JSONValue(parsing: $0.payload) else {
                return false
            }
            return event["event"] == .string("accessory-removed")
                && event["accessory"]?["name"] == .string("Peer Light")
        }
        try await run.seen.waitFor("the state cleared", timeout: 10) {
            $0.topic == stateTopic && $0.payload.isEmpty
        }
        let afterUnpair = try await run.retained("\(accessory)/#")
        XCTAssertEqual(afterUnpair, [:])
        XCTAssertEqual(try store.all().count, 0)
        let peerPairings = try await peer.command("pairings")
        XCTAssertEqual(peerPairings, "PAIRINGS 0")

        // Pair again, then remove one of the bridge's accessories: it leaves the home, and
        // the bridge with its other accessories stays paired.
        _ = try await pairOverMQTT(run, peer, store)
        _ = try await waitForBrightnessState(run)
        run.seen.clear()
        let removed = try await run.request("accessory/remove", ["accessory": .string("Peer Light")])
        XCTAssertEqual(removed["status"], .string("ok"), removed.encoded())
        try await run.seen.waitFor("the state cleared", timeout: 10) {
            $0.topic == stateTopic && $0.payload.isEmpty
        }
        let afterRemove = try await run.retained("\(accessory)/#")
        XCTAssertEqual(afterRemove, [:])
        XCTAssertEqual(try store.all().count, 1)
        let peerPairingsAfterRemove = try await peer.command("pairings")
        XCTAssertEqual(peerPairingsAfterRemove, "PAIRINGS 1")

        // Unpairing the bridge removes the rest.
        let unpairedBridge = try await run.request("unpair", ["pairing": .string(pairingID)])
        XCTAssertEqual(unpairedBridge["status"], .string("ok"), unpairedBridge.encoded())
        XCTAssertEqual(try store.all().count, 0)
        let peerPairingsAfterUnpair = try await peer.command("pairings")
        XCTAssertEqual(peerPairingsAfterUnpair, "PAIRINGS 0")

        // Unpairing what is not paired names the problem.
        let unknown = try await run.request("unpair", ["pairing": .string(pairingID)])
        XCTAssertEqual(unknown["status"], .string("error"), unknown.encoded())
        XCTAssertEqual(unknown["code"], .string("unknown-pairing"), unknown.encoded())
    }

    /// `pair` over MQTT with the right code, retried only on HAP-python's SRP failure; returns the pairing id.
    func pairOverMQTT(_ run: InProcessRun, _ peer: HAPPeer, _ store: HAPPairingStore) async throws -> String {
        var last: JSONValue = .null
        for _ in 0..<4 {
            run.seen.clear()
            let response = try await run.request(
                "pair",
                [
                    "host": .string("127.0.0.1"), "port": .int(Int64(peer.port)),
                    "code": .string(HAPPeer.defaultSetupCode),
                    "name": .string("Peer Bridge"),
                ])
            if response["status"] == .string("ok") {
                let data = try XCTUnwrap(response["data"])
                XCTAssertEqual(data["accessories"]?.arrayValue?.count, 5, data.encoded())
                XCTAssertEqual(data["name"], .string("Peer Bridge"))
                let id = try XCTUnwrap(data["pairing"]?.stringValue)
                let saved = try XCTUnwrap(try store.pairing(id: id))
                XCTAssertFalse(response.encoded().contains(saved.controllerLTSK), "the response carries the secret key")
                return id
            }
            last = response
            guard let code = response["code"]?.stringValue, HAPEndToEndTests.isSpuriousSRPFailure(code) else { break }
        }
        XCTFail("pair over MQTT failed: \(last.encoded())")
        throw ProcessError("pairing failed")
    }

    func waitForBrightnessState(_ run: InProcessRun) async throws -> String {
        let message = try await run.seen.waitFor("the Peer Light's brightness state", timeout: 20) {
            $0.topic.contains("/peer-light/") && $0.topic.hasSuffix("/brightness/state") && !$0.payload.isEmpty
        }
        return message.topic
    }
}
