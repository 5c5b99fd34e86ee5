import HomeMQTTApp
import Foundation
import Gateway
import HomeModel
import MQTT
import TestSupport
import TopicAPI
import XCTest

/// One JSON document per accessory: `$state` (retained, one message per burst of changes) and
/// `$set` (several characteristics at once, one `$result` with an entry each).
/// On every enabled rig (`Rig.enabled`).
final class AccessoryStateTests: RigTestCase {
    let opener = "home/garage/garage-door-opener"

    func document(_ message: MQTTMessage) throws -> JSONValue { try JSONValue(parsing: message.payload) }

    func testStateIsRetainedAndABurstOfChangesIsOneMessage() async throws {
        await onEveryRig { gw in
            let retained = try await gw.retained("\(opener)/$state")
            let first = try JSONValue(parsing: Array(try XCTUnwrap(retained["\(opener)/$state"]).utf8))
            XCTAssertNotNil(first["garage-light"]?["brightness"]?.intValue, "\(first)")
            XCTAssertNotNil(first["garage-door"]?["current-door-state"]?.intValue, "\(first)")

            // Five changes from the device side, as fast as they come: five `state`, one `$state`.
            let id = try await gw.accessoryID(named: "Garage Door Opener")
            let all = await gw.home.accessories()
            let accessory = try XCTUnwrap(all.first { $0.id == id })
            let light = try XCTUnwrap(accessory.services.first { $0.name == "Garage Light" })
            let brightness = try XCTUnwrap(light.characteristics.first { $0.type == StandardUUID.longForm("8") })
            let address = CharacteristicAddress(accessoryID: id, iid: brightness.iid)
            gw.seen.clear()
            for value: Int64 in 61...65 { try await gw.home.setValue(address, .int(value)) }
            try await gw.next("\(opener)/$state", timeout: 5) { $0.contains("\"brightness\":65") }
            try await Task.sleep(for: .milliseconds(300))
            let states = gw.seen.elements.filter { $0.topic == "\(opener)/garage-light/brightness/state" }
            let documents = gw.seen.elements.filter { $0.topic == "\(opener)/$state" }
            print(
                "figure: 5 changes in a burst gave \(states.count) state messages and \(documents.count) $state message(s)"
            )
            XCTAssertEqual(states.map(\.string), ["61", "62", "63", "64", "65"])
            XCTAssertEqual(documents.count, 1, documents.map(\.string).joined(separator: "\n"))
            XCTAssertEqual(try document(try XCTUnwrap(documents.last))["garage-light"]?["brightness"], 65)
            let after = try await gw.retained("\(opener)/$state")
            XCTAssertEqual(after["\(opener)/$state"], documents.last?.string, "the broker keeps the last document")
        }
    }

    func testSetOfSeveralCharacteristicsIsAnsweredForEach() async throws {
        await onEveryRig { gw in
            let answer = try await gw.request(
                "\(opener)/$set",
                #"{"id": "s1", "garage-light": {"power-state": true, "brightness": 70, "hue": 999, "colour": 1}}"#,
                answer: "\(opener)/$result")
            XCTAssertEqual(answer["id"], "s1")
            XCTAssertEqual(answer["op"], "set")
            XCTAssertEqual(answer["status"], "error", "one entry failed, so the whole says error")
            let results = try XCTUnwrap(answer["results"]?["garage-light"]?.objectValue, "\(answer)")
            XCTAssertEqual(results["power-state"]?["status"], "ok")
            XCTAssertEqual(results["brightness"]?["value"], 70)
            XCTAssertEqual(results["hue"]?["code"], "out-of-range")
            XCTAssertEqual(results["colour"]?["code"], "unknown-field")
            try await gw.next("\(opener)/garage-light/brightness/state") { $0 == "70" }

            let ok = try await gw.request(
                "\(opener)/$set",
                #"{"garage-light": {"brightness": 30}, "garage-door": {"target-door-state": "open"}}"#,
                answer: "\(opener)/$result")
            XCTAssertEqual(ok["status"], "ok", "\(ok)")
            XCTAssertEqual(ok["results"]?["garage-door"]?["target-door-state"]?["status"], "ok")

            for (payload, code) in [
                ("[1]", "invalid-json"), (#"{"attic": {"x": 1}}"#, "unknown-service"), ("{}", "empty"),
            ] {
                let refused = try await gw.request("\(opener)/$set", payload, answer: "\(opener)/$result")
                XCTAssertEqual(refused["code"]?.stringValue, code, payload)
            }
        }
    }

    func testTheDocumentsCanBeSwitchedOff() async throws {
        await onEveryRig(configure: { $0[AccessoryStateConfig.self].enabled = false }) { gw in
            let retained = try await gw.retained()
            XCTAssertTrue(retained.keys.filter { $0.hasSuffix("/$state") }.isEmpty)
            let parsed = try HomeMQTTApp.parseConfig("accessory-state: false\n", file: "gateway.yml", environment: [:])
            XCTAssertFalse(parsed[AccessoryStateConfig.self].enabled)
            XCTAssertTrue(
                try HomeMQTTApp.parseConfig("base-topic: home\n", file: "gateway.yml", environment: [:])[
                    AccessoryStateConfig.self
                ].enabled)
        }
    }
}
