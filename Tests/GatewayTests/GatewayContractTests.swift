import Foundation
import Gateway
import HomeModel
import MQTT
import Simulator
import TestSupport
import XCTest

/// The topic contract, with the shipped simulated home: each test runs on every enabled rig
/// (`Rig.enabled`: the broker in memory by default, fast; mosquitto too when `CI=true` or
/// `HOMEMQTT_LIVE=1`), on a gateway of its own, and a failure names the rig it happened on.
/// `InProcessGatewayTests` keeps what only the memory rig can do (hold the broker back, drop
/// one connection while the broker stays).
final class GatewayContractTests: RigTestCase {
    let door = "home/garage/garage-door-opener/garage-door"
    let light = "home/garage/garage-door-opener/garage-light"

    func testStartPublishesStateMetaInfoAvailabilityTreeAndStatus() async throws {
        await onEveryRig { gw in
            let retained = try await gw.retained()
            XCTAssertEqual(retained["home/$gateway/status"], "online")
            XCTAssertEqual(retained["\(door)/target-door-state/state"], "1")
            XCTAssertEqual(retained["\(door)/current-door-state/state"], "1")
            XCTAssertEqual(retained["\(door)/obstruction-detected/state"], "false")
            XCTAssertEqual(retained["\(light)/brightness/state"], "80")
            XCTAssertEqual(retained["\(light)/fade-rate/state"], "1.0")
            XCTAssertEqual(retained["home/garage/garage-door-opener/$availability"], "online")

            let meta = try JSONValue(parsing: XCTUnwrap(retained["\(light)/brightness/meta"]))
            XCTAssertEqual(meta["format"], .string("int"))
            XCTAssertEqual(meta["unit"], .string("percentage"))
            XCTAssertNotNil(meta["min"] ?? meta["minValue"])
            let doorMeta = try JSONValue(parsing: XCTUnwrap(retained["\(door)/target-door-state/meta"])).encoded()
            XCTAssertTrue(doorMeta.contains("open") && doorMeta.contains("closed"), doorMeta)

            let info = try JSONValue(parsing: XCTUnwrap(retained["home/garage/garage-door-opener/$info"]))
            XCTAssertEqual(info["manufacturer"], .string("Kilgo Devices, Inc."))
            XCTAssertEqual(info["bridged"], .bool(false))
            let services = try XCTUnwrap(info["services"]?.arrayValue)
            XCTAssertTrue(
                services.contains {
                    $0["type-name"] == .string("accessory-information") && $0["user-interactive"] == .bool(false)
                })
            XCTAssertTrue(
                services.contains {
                    $0["type-name"] == .string("garage-door-opener") && $0["user-interactive"] == .bool(true)
                })

            let tree = try JSONValue(parsing: XCTUnwrap(retained["home/$gateway/tree"])).encoded()
            XCTAssertTrue(tree.contains("\(door)/target-door-state"), "tree lists every topic")
            // Bridged accessories say so and name their bridge.
            let bridgedInfo = retained.filter { $0.key.hasSuffix("/$info") }.values.compactMap {
                try? JSONValue(parsing: $0)
            }
            .filter { $0["bridged"] == .bool(true) }
            XCTAssertGreaterThanOrEqual(bridgedInfo.count, 2)
            XCTAssertTrue(bridgedInfo.allSatisfy { $0["bridge"]?.stringValue != nil })

            // Under MQTT 5 every publication says what it is.
            let stateMessages = try await gw.retainedMessages("\(light)/brightness/state")
            let state = try XCTUnwrap(stateMessages.values.first)
            XCTAssertEqual(state.properties.contentType, "application/json")
            // A client that sees `online` has seen the whole tree before it.
            let order = gw.seen.elements.map(\.topic)
            let online = try XCTUnwrap(order.firstIndex(of: "home/$gateway/status"))
            XCTAssertEqual(
                order.filter { $0.hasSuffix("/state") }.count, retained.keys.filter { $0.hasSuffix("/state") }.count)
            XCTAssertTrue(order[..<online].contains("\(light)/brightness/state"))
            XCTAssertFalse(order[online...].contains { $0.hasSuffix("/state") }, "a state after online")
            // The gateway's marker went to itself only (No Local does not hold it back from the
            // gateway, and the observer never subscribed where it would see it twice).
            XCTAssertEqual(order.filter { $0 == "home/$gateway/sync" }.count, 1)
        }
    }

    func testSetInEveryPayloadFormThenTheDoorTravels() async throws {
        await onEveryRig { gw in
            // Plain valid-value name.
            var answer = try await gw.request(
                "\(door)/target-door-state/set", "open", answer: "\(door)/target-door-state/result")
            XCTAssertEqual(answer["status"], .string("ok"))
            XCTAssertEqual(answer["op"], .string("set"))
            XCTAssertEqual(answer["value"], .int(0))
            XCTAssertEqual(answer["id"], .null)
            try await gw.next("\(door)/target-door-state/state") { $0 == "0" }
            try await gw.next("\(door)/current-door-state/state") { $0 == "2" } // opening
            await gw.home.advance(by: 13)
            try await gw.next("\(door)/current-door-state/state") { $0 == "0" } // open

            // JSON with an id, valid-value name inside.
            answer = try await gw.request(
                "\(door)/target-door-state/set", #"{"value": "closed", "id": "close-1"}"#,
                answer: "\(door)/target-door-state/result")
            XCTAssertEqual(answer["status"], .string("ok"))
            XCTAssertEqual(answer["id"], .string("close-1"))
            try await gw.next("\(door)/current-door-state/state") { $0 == "3" } // closing

            // Bool words and numbers.
            for (payload, expected) in [
                ("on", "true"), ("0", "false"), ("YES", "true"), (#"{"value": false}"#, "false"),
            ] {
                answer = try await gw.request(
                    "\(light)/power-state/set", payload, answer: "\(light)/power-state/result")
                XCTAssertEqual(answer["status"], .string("ok"), payload)
                try await gw.next("\(light)/power-state/state") { $0 == expected }
            }
            answer = try await gw.request("\(light)/brightness/set", "42", answer: "\(light)/brightness/result")
            XCTAssertEqual(answer["status"], .string("ok"), "\(answer)")
            XCTAssertEqual(answer["op"], .string("set"))
            XCTAssertEqual(answer["value"], .int(42))
            XCTAssertEqual(answer["id"], .null)
            let state = try await gw.next("\(light)/brightness/state") { $0 == "42" }
            XCTAssertFalse(state.retain, "a live state is forwarded without the retain flag")
            let retained = try await gw.retained("\(light)/brightness/state")
            XCTAssertEqual(retained["\(light)/brightness/state"], "42")
            let written = await gw.home.accessories().first { $0.name == "Garage Door Opener" }
            XCTAssertNotNil(written)
            answer = try await gw.request("\(light)/fade-rate/set", "2.5", answer: "\(light)/fade-rate/result")
            XCTAssertEqual(answer["status"], .string("ok"))
            try await gw.next("\(light)/fade-rate/state") { $0 == "2.5" }
        }
    }

    func testEveryErrorIsAnsweredOnResult() async throws {
        await onEveryRig(configure: { $0.scope.readOnly = ["Front Door Lock"] }) { gw in
            let cases: [(String, String, String)] = [
                ("\(light)/brightness/set", "140", "out-of-range"),
                ("\(light)/brightness/set", "", "empty"),
                ("\(light)/brightness/set", "{\"value\": ", "invalid-json"),
                ("\(light)/brightness/set", "{\"id\": \"x\"}", "missing-value"),
                ("\(light)/brightness/set", "{\"value\": 1, \"colour\": 2}", "unknown-field"),
                ("\(light)/brightness/set", "bright", "invalid-type"),
                ("\(light)/power-state/set", "maybe", "invalid-type"),
                ("\(door)/target-door-state/set", "ajar", "not-a-valid-value"),
                ("\(door)/target-door-state/set", "7", "not-a-valid-value"),
                ("\(door)/current-door-state/set", "0", "read-only"),
                ("\(light)/fade-rate/set", "0.3", "not-a-step"),
            ]
            for (topic, payload, code) in cases {
                let answer = try await gw.request(
                    topic, payload, answer: topic.replacingOccurrences(of: "/set", with: "/result"))
                XCTAssertEqual(answer["status"], .string("error"), "\(topic) \(payload)")
                XCTAssertEqual(answer["code"], .string(code), "\(topic) \(payload): \(answer)")
                XCTAssertFalse(answer["message"]?.stringValue?.isEmpty ?? true, "\(answer)")
            }
            // Refused sets change nothing.
            let unchanged = try await gw.retained("home/garage/#")
            XCTAssertEqual(unchanged["\(light)/brightness/state"], "80")
            XCTAssertEqual(unchanged["\(door)/target-door-state/state"], "1")
            XCTAssertFalse(gw.seen.elements.contains { $0.topic.hasSuffix("/state") }, "a state after a refused set")

            let range = try await gw.request(
                "\(light)/brightness/set", "140", answer: "\(light)/brightness/result")
            XCTAssertEqual(range["hap"], .int(-70410))
            XCTAssertTrue(range["message"]?.stringValue?.contains("140") ?? false)

            // The read-only scope list.
            let lockTree = try await gw.retained().keys.first {
                $0.hasSuffix("/lock-target-state/state") || $0.hasSuffix("/target-lock-mechanism-state/state")
            }
            let lockTopic = try XCTUnwrap(lockTree).replacingOccurrences(of: "/state", with: "")
            let scoped = try await gw.request("\(lockTopic)/set", "1", answer: "\(lockTopic)/result")
            XCTAssertEqual(scoped["code"], .string("read-only-scope"))

            // A request for something the home does not have is reported on $gateway/error (and
            // on the result topic it was sent for).
            gw.seen.clear()
            try await gw.publish("home/garage/no-such-thing/x/brightness/set", "1")
            let error = try await gw.next("home/$gateway/error")
            XCTAssertTrue(error.string.contains("unknown-topic"), error.string)
            // A topic that is not a request is another client's business: the gateway does not
            // subscribe to it, and says nothing. Ordered, not timed: the request published after
            // it is answered after anything the gateway would have said about it.
            gw.seen.clear()
            try await gw.publish("\(light)/brightness/sett", "1")
            // Still serving after all that.
            try await gw.publish("\(light)/brightness/set", #"{"value": 10, "id": "after-sett"}"#)
            let ok = try await gw.next("\(light)/brightness/result") { $0.contains("after-sett") }
            XCTAssertTrue(ok.string.contains("\"ok\""), ok.string)
            XCTAssertFalse(
                gw.seen.elements.contains { $0.topic == "home/$gateway/error" }, "answered a non-request")
        }
    }

    func testUnreachableAccessoryAndTimeouts() async throws {
        await onEveryRig { gw in
            let id = try await gw.accessoryID(named: "Garage Door Opener")
            _ = await gw.home.setReachable(id, false)
            try await gw.next("home/garage/garage-door-opener/$availability") { $0 == "offline" }
            let answer = try await gw.request(
                "\(light)/power-state/set", "on", answer: "\(light)/power-state/result")
            XCTAssertEqual(answer["code"], .string("unreachable"))
            XCTAssertEqual(answer["hap"], .int(-70402))
            _ = await gw.home.setReachable(id, true)
            try await gw.next("home/garage/garage-door-opener/$availability") { $0 == "online" }

            await gw.home.setWriteDelay(.seconds(5))
            let late = try await gw.request("\(light)/power-state/set", "on", answer: "\(light)/power-state/result")
            XCTAssertEqual(late["code"], .string("timeout"))
            await gw.home.setWriteDelay(.zero)
            let ok = try await gw.request("\(light)/power-state/set", "off", answer: "\(light)/power-state/result")
            XCTAssertEqual(ok["status"], .string("ok"))
        }
    }

    func testGetReadsTheAccessoryAndToggleFlipsThePrimaryControl() async throws {
        await onEveryRig { gw in
            let id = try await gw.accessoryID(named: "Garage Door Opener")
            let accessories = await gw.home.accessories()
            let brightnessIID = try XCTUnwrap(
                accessories.first { $0.id == id }?.services
                    .flatMap(\.characteristics)
                    .first { $0.type == Catalog.characteristicType(named: "brightness")?.uuid }?
                    .iid)
            // Change the value behind the gateway's back, with notifications off for it.
            _ = await gw.home.setNotifications(
                enabled: false, for: [CharacteristicAddress(accessoryID: id, iid: brightnessIID)])
            try await gw.home.setValue(CharacteristicAddress(accessoryID: id, iid: brightnessIID), .int(33))
            let answer = try await gw.request("\(light)/brightness/get", "", answer: "\(light)/brightness/result")
            XCTAssertEqual(answer["op"], .string("get"))
            XCTAssertEqual(answer["value"], .int(33))
            try await gw.next("\(light)/brightness/state") { $0 == "33" }

            let toggled = try await gw.request("\(light)/$toggle", "", answer: "\(light)/$result")
            XCTAssertEqual(toggled["status"], .string("ok"))
            XCTAssertEqual(toggled["op"], .string("toggle"))
            XCTAssertEqual(toggled["value"], .bool(true))
            try await gw.next("\(light)/power-state/state") { $0 == "true" }
            let back = try await gw.request("\(light)/$toggle", #"{"id": 7}"#, answer: "\(light)/$result")
            XCTAssertEqual(back["value"], .bool(false))
            XCTAssertEqual(back["id"], .int(7))

            let doorToggle = try await gw.request("\(door)/$toggle", "", answer: "\(door)/$result")
            XCTAssertEqual(doorToggle["value"], .int(0), "a closed door toggles open")

            let accessoryTopic = "home/garage/garage-door-opener"
            let identified = try await gw.request(
                "\(accessoryTopic)/$identify", #"{"id": "blink"}"#, answer: "\(accessoryTopic)/$result")
            XCTAssertEqual(identified["status"], .string("ok"))
            XCTAssertEqual(identified["id"], .string("blink"))
            let identifyRequests = await gw.home.identifyRequests()
            XCTAssertEqual(identifyRequests, [id])
        }
    }

    func testNotificationsAreEnabledExactlyForTheScope() async throws {
        let configure: (inout GatewayConfig) -> Void = {
            $0.scope.characteristicTypes = ScopeList(deny: ["brightness"])
            $0.scope.manufacturers = ScopeList(deny: ["Thermal Dynamics Co."])
        }
        await onEveryRig(configure: configure) { gw in
            let accessories = await gw.home.accessories()
            let garage = try XCTUnwrap(accessories.first { $0.name == "Garage Door Opener" })
            let thermostat = try XCTUnwrap(accessories.first { $0.manufacturer == "Thermal Dynamics Co." })
            let brightness = Catalog.characteristicType(named: "brightness")!.uuid
            let power = Catalog.characteristicType(named: "power-state")!.uuid
            func address(_ accessory: Accessory, _ type: String) throws -> CharacteristicAddress {
                let iid = try XCTUnwrap(accessory.services.flatMap(\.characteristics).first { $0.type == type }?.iid)
                return CharacteristicAddress(accessoryID: accessory.id, iid: iid)
            }
            let enabledPower = try address(garage, power)
            try await waitUntil("notifications enabled") {
                await gw.home.notificationsEnabled().contains(enabledPower)
            }
            let enabled = await gw.home.notificationsEnabled()
            XCTAssertFalse(enabled.contains(try address(garage, brightness)))
            XCTAssertFalse(enabled.contains { $0.accessoryID == thermostat.id })
            // Accessory information never notifies: not in scope by default.
            let infoIIDs = Set(garage.services.filter { !$0.isUserInteractive }.flatMap(\.characteristics).map(\.iid))
            XCTAssertFalse(enabled.contains { $0.accessoryID == garage.id && infoIIDs.contains($0.iid) })
            let retained = try await gw.retained()
            XCTAssertNil(retained["\(light)/brightness/state"])
            XCTAssertFalse(retained.keys.contains { $0.contains("thermostat") })

            // Leaving scope at run time turns notifications off again.
            let reply = try await gw.request(
                "home/$gateway/request/scope/set",
                #"{"scope": {"characteristic-types": {"deny": ["power-state", "brightness"]}}}"#,
                answer: "home/$gateway/response/scope/set")
            XCTAssertEqual(reply["status"], .string("ok"), "\(reply)")
            try await waitUntil("power-state notifications off") {
                await !gw.home.notificationsEnabled().contains(enabledPower)
            }
            try await waitUntil("thermostat notifications on") {
                await gw.home.notificationsEnabled().contains { $0.accessoryID == thermostat.id }
            }
        }
    }

    func testCharacteristicsThatCannotNotifyArePolled() async throws {
        await onEveryRig(configure: { $0.pollInterval = 0.2 }) { gw in
            let id = try await gw.accessoryID(named: "Garage Door Opener")
            let accessories = await gw.home.accessories()
            // The light's Name characteristic is readable but has no notify permission.
            let name = try XCTUnwrap(
                accessories.first { $0.id == id }?.services.first { $0.name == "Garage Light" }?
                    .characteristics.first { $0.type == Catalog.characteristicType(named: "name")?.uuid })
            XCTAssertFalse(name.metadata.permissions.contains(.notify))
            let notifying = await gw.home.notificationsEnabled()
            XCTAssertFalse(notifying.contains(CharacteristicAddress(accessoryID: id, iid: name.iid)))
            try await gw.home.setValue(
                CharacteristicAddress(accessoryID: id, iid: name.iid), .string("Workbench Light"))
            try await gw.next("\(light)/name/state", timeout: 5) { $0 == "Workbench Light" }
        }
    }

    /// A retained set is refused and never applied; the gateway does not clear it: another
    /// client published it (the answer says how to clear it).
    func testRetainedRequestsAreRefusedAndLeftToTheirPublisher() async throws {
        await onEveryRig { gw in
            gw.seen.clear()
            try await gw.publish("\(light)/power-state/set", "on", retain: true)
            let answer = try await gw.next("\(light)/power-state/result")
            XCTAssertTrue(answer.string.contains("\"retained\""), answer.string)
            XCTAssertTrue(answer.string.contains("clear this one"), answer.string)
            let retained = try await gw.retained()
            XCTAssertEqual(retained["\(light)/power-state/set"], "on", "another client's retained set was cleared")
            XCTAssertEqual(retained["\(light)/power-state/state"], "false", "and was not applied")
        }
    }

    func testARetainedSetLeftBeforeStartIsNotApplied() async throws {
        let light = self.light
        let before: (any MQTTTransport) async throws -> Void = { publisher in
            try await publisher.publish(
                "\(light)/power-state/set", payload: Array("on".utf8), qos: .atLeastOnce, retain: true)
        }
        await onEveryRig(before: before) { gw in
            try await gw.next("\(light)/power-state/result") { $0.contains("retained") }
            let retained = try await gw.retained()
            XCTAssertEqual(retained["\(light)/power-state/state"], "false")
        }
    }

    /// What an earlier run published (its retained tree says so) and the current home no longer
    /// has is cleared at start; a topic of the same shape that no tree of ours names is another
    /// client's and stays.
    func testStaleRetainedTopicsFromAnEarlierRunAreCleared() async throws {
        let earlierTree = #"""
            {"base":"home","rooms":[{"topic":"home/attic","accessories":[{"topic":"home/attic/old-lamp",
            "info":"home/attic/old-lamp/$info","services":[{"topic":"home/attic/old-lamp/lightbulb",
            "characteristics":[{"topic":"home/attic/old-lamp/lightbulb/power-state","format":"bool"}]}]}]}]}
            """#
        let before: (any MQTTTransport) async throws -> Void = { publisher in
            for (topic, payload) in [
                ("home/$gateway/tree", earlierTree),
                ("home/attic/old-lamp/lightbulb/power-state/state", "true"),
                ("home/attic/old-lamp/lightbulb/power-state/meta", "{}"),
                ("home/attic/old-lamp/$info", "{}"),
                ("home/attic/zigbee-lamp/$info", "{}"),
                ("home/attic/old-lamp/lightbulb/zigbee-level/state", "3"),
            ] {
                try await publisher.publish(topic, payload: Array(payload.utf8), qos: .atLeastOnce, retain: true)
            }
        }
        await onEveryRig(before: before) { gw in
            try await waitUntil("ghosts cleared") {
                let retained = try await gw.retained()
                return !retained.keys.contains {
                    $0.hasPrefix("home/attic/old-lamp/$") || $0.hasPrefix("home/attic/old-lamp/lightbulb/power-state/")
                }
            }
            let retained = try await gw.retained()
            XCTAssertEqual(retained["home/attic/zigbee-lamp/$info"], "{}")
            XCTAssertEqual(retained["home/attic/old-lamp/lightbulb/zigbee-level/state"], "3")
        }
    }

    func testStructuralChangesClearOldTopicsAndAnnounce() async throws {
        await onEveryRig { gw in
            let id = try await gw.accessoryID(named: "Garage Door Opener")
            // Rename through the home database.
            gw.seen.clear()
            try await gw.database.renameAccessory(id: id, to: "Kilgo Door")
            let renamed = try await gw.next("home/$gateway/event") { $0.contains("accessory-renamed") }
            XCTAssertTrue(renamed.string.contains("home/garage/kilgo-door"))
            try await gw.next("home/garage/kilgo-door/garage-door/target-door-state/state")
            try await assertNoGhosts(gw, gone: "home/garage/garage-door-opener/")

            // Move to another room.
            let room = try await gw.database.addRoom(named: "Workshop")
            try await gw.database.assign(accessoryID: id, toRoom: room.id)
            try await gw.next("home/$gateway/event") { $0.contains("accessory-moved") }
            try await assertNoGhosts(gw, gone: "home/garage/kilgo-door/")
            let retained = try await gw.retained()
            XCTAssertNotNil(retained["home/workshop/kilgo-door/garage-door/target-door-state/state"])

            // A source renames, removes and adds accessories.
            _ = await gw.home.rename(
                accessoryID: try await gw.accessoryID(named: "Office Fan Switch"), to: "Desk Switch")
            let lampID = try await gw.accessoryID(named: "Bedroom Lamp")
            _ = await gw.home.remove(accessoryID: lampID)
            try await gw.next("home/$gateway/event") { $0.contains("accessory-removed") && $0.contains(lampID) }
            try await assertNoGhosts(gw, gone: "home/bedroom/bedroom-lamp/")
        }
    }

    /// After a change, a fresh subscriber sees exactly the gateway's tree: nothing under the
    /// old prefix, and every retained topic it sees is one the gateway holds.
    func assertNoGhosts(_ gw: RiggedGateway, gone prefix: String, file: StaticString = #filePath, line: UInt = #line)
        async throws
    {
        try await waitUntil("old topics under \(prefix) cleared") {
            let retained = try await gw.retained()
            return !retained.keys.contains { $0.hasPrefix(prefix) }
        }
        let retained = try await gw.retained()
        let held = Set(await gw.gateway.retainedTopicList)
        let extra = Set(retained.keys).subtracting(held).subtracting(["home/$gateway/status"])
        XCTAssertEqual(extra, [], "retained on the broker but not in the gateway's tree", file: file, line: line)
        let tree = try XCTUnwrap(retained["home/$gateway/tree"])
        XCTAssertFalse(tree.contains(prefix), file: file, line: line)
    }

    func testReconnectRepublishesEverything() async throws {
        await onEveryRig { gw in
            let before = try await gw.retained()
            // A broker without persistence forgets every retained message when it restarts.
            try await gw.restartBroker()
            try await waitUntil("republished after reconnect", timeout: 20) {
                let retained = try await gw.retained()
                return retained["\(door)/target-door-state/state"] == "1"
                    && retained["home/$gateway/status"] == "online" && retained["home/$gateway/tree"] != nil
            }
            // Every topic, each with the payload it had: the republication is made again from the
            // tree (the gateway keeps only digests of what it published). The health document is
            // there too, a reading of now (uptime, counts, the loss just seen), not a copy.
            let after = try await gw.retained()
            XCTAssertEqual(Set(after.keys), Set(before.keys))
            let health = try XCTUnwrap(after["home/$gateway/health"].map { try JSONValue(parsing: Array($0.utf8)) })
            XCTAssertEqual(health["broker"]?["connected"], true)
            XCTAssertNotNil(health["broker"]?["last-error"], "the loss is the last error")
            for (topic, payload) in before where after[topic] != payload && topic != "home/$gateway/health" {
                XCTFail("\(topic) was republished as \(after[topic] ?? "nothing"), not \(payload)")
            }
            // And serves requests again.
            try await waitUntil("serving again", timeout: 10) {
                let answer = try? await gw.request(
                    "\(light)/brightness/set", "55", answer: "\(light)/brightness/result")
                return answer?["status"] == .string("ok")
            }
        }
    }

    /// Stopped as SIGTERM stops it, the gateway says `offline` itself and disconnects cleanly.
    func testStopPublishesOfflineAndDisconnectsCleanly() async throws {
        await onEveryRig { gw in
            let before = try await gw.retained()
            XCTAssertEqual(before["home/$gateway/status"], "online")
            gw.seen.clear()
            await gw.stopGateway()
            XCTAssertEqual(gw.transport.connectionState, .disconnected(nil), "a clean DISCONNECT: no will")
            let retained = try await gw.retained()
            XCTAssertEqual(retained["home/$gateway/status"], "offline")
            let offline = try await gw.seen.waitFor("offline", timeout: 2) { $0.topic == "home/$gateway/status" }
            XCTAssertEqual(offline.string, "offline")
        }
    }

    /// A source can describe an accessory again (a HAP accessory read after a reconnect, a
    /// simulated one replaced) with values no event reported; what is on the broker follows,
    /// even back to a value it had.
    func testANewDescriptionOfAnAccessoryUpdatesItsState() async throws {
        await onEveryRig { gw in
            let id = try await gw.accessoryID(named: "Garage Door Opener")
            let accessories = await gw.home.accessories()
            let described = try XCTUnwrap(accessories.first { $0.id == id })
            let answer = try await gw.request("\(light)/brightness/set", "30", answer: "\(light)/brightness/result")
            XCTAssertEqual(answer["status"], .string("ok"))
            try await waitUntil("brightness 30 on the broker") {
                try await gw.retained("\(light)/brightness/state")["\(light)/brightness/state"] == "30"
            }
            gw.seen.clear()
            await gw.home.add(described)
            try await gw.next("\(light)/brightness/state") { $0 == "80" }
            var retained = try await gw.retained()
            XCTAssertEqual(retained["\(light)/brightness/state"], "80")
            XCTAssertEqual(retained["\(door)/target-door-state/state"], "1")

            // A value no event reported: published like any update, in `$state` too.
            let tree = await gw.gateway.tree
            let node = try XCTUnwrap(tree.characteristic(topic: "\(light)/brightness"))
            var accessory = described
            for si in accessory.services.indices {
                for ci in accessory.services[si].characteristics.indices
                where accessory.services[si].characteristics[ci].iid == node.address.iid {
                    accessory.services[si].characteristics[ci].value = .int(33)
                }
            }
            gw.seen.clear()
            await gw.home.add(accessory)
            try await gw.next("\(light)/brightness/state") { $0 == "33" }
            try await gw.next("home/garage/garage-door-opener/$state") { $0.contains("\"brightness\":33") }
            retained = try await gw.retained("\(light)/brightness/state")
            XCTAssertEqual(retained["\(light)/brightness/state"], "33")
        }
    }

    func testABurstOfTenThousandSetsIsAnsweredInFull() async throws {
        await onEveryRig { gw in
            let count = 10_000
            let counter = try await gw.subscriber("home/+/+/+/+/result")
            let targets = [
                "\(light)/brightness/set", "\(light)/power-state/set",
                "home/bedroom/bedroom-lamp/bedroom-lamp/brightness/set",
            ]
            for i in 0..<count {
                let topic = targets[i % targets.count]
                let payload: String =
                    switch i % 5 {
                    case 0: "\(i % 101)" // valid brightness / invalid bool for power-state
                    case 1: "{\"value\": \(i % 200), \"id\": \(i)}"
                    case 2: "not json {"
                    case 3: ""
                    default: "on"
                    }
                try await gw.publish(topic, payload)
            }
            let results: [MQTTMessage]
            do {
                results = try await counter.seen.waitFor(count: count, "results", timeout: 120)
            } catch {
                await counter.close()
                XCTFail("results missing; the broker dropped: \(gw.brokerDrops)")
                throw error
            }
            await counter.close()
            XCTAssertEqual(gw.brokerDrops, [], "the broker dropped messages")
            XCTAssertEqual(results.count, count)
            XCTAssertTrue(results.contains { $0.string.contains("\"ok\"") })
            XCTAssertTrue(results.contains { $0.string.contains("\"error\"") })
            // Still alive and answering (matched by id: late burst answers share the topic).
            try await gw.publish("\(light)/brightness/set", #"{"value": 12, "id": "after-burst"}"#)
            let ok = try await gw.next("\(light)/brightness/result") { $0.contains("after-burst") }
            XCTAssertTrue(ok.string.contains("\"ok\""), ok.string)
        }
    }
}
