import Foundation
import Gateway
@testable import HomeAssistant
import HomeModel
import MQTT
import TestSupport
import XCTest

/// Issue 43, item 9, through the broker: an accessory moved between the homes of one running
/// gateway (each home on its own base topic and its own connection) keeps its discovery config
/// topic and every unique id, and the config is never cleared on the way: the home it left
/// leaves the topic to the home that holds it now, which publishes it, or clears it when the
/// accessory is outside its scope. HomeAssistantIdentityTests (HomeAssistantTests) has the ids
/// themselves. On every enabled rig.
final class HomeAssistantIdentityMQTTTests: RigTestCase {
    static let configs = "homeassistant/device/+/config"

    /// `op` on the first home's request topic, answered `ok`; its `data`.
    @discardableResult
    func operation(_ gw: RiggedGateway, _ op: String, _ fields: [String: JSONValue] = [:]) async throws -> JSONValue {
        let answer = try await gw.request(
            "home/$gateway/request/\(op)", JSONValue.object(fields).encoded(), answer: "home/$gateway/response/\(op)")
        XCTAssertEqual(answer["status"], "ok", "\(op) \(fields): \(answer)")
        return answer["data"] ?? .null
    }

    /// Adds the home Cabin (on `home-cabin/`) and returns once it is online.
    func addCabin(_ gw: RiggedGateway) async throws {
        let status = try await gw.subscriber("home-cabin/$gateway/status")
        do {
            try await operation(gw, "home/add", ["name": "Cabin"])
            try await status.seen.waitFor("the cabin online", timeout: 10) { $0.string == "online" }
        } catch {
            await status.close()
            throw error
        }
        await status.close()
    }

    /// A health request answered on each base: what either home's gateway queued before reached
    /// the broker before its answer (one connection each, in order).
    func barrier(_ gw: RiggedGateway, bases: [String] = ["home", "home-cabin"]) async throws {
        let answers = try await gw.subscriber("+/$gateway/response/health")
        do {
            for base in bases {
                try await gw.publish("\(base)/$gateway/request/health", "{}")
                try await answers.seen.waitFor("\(base)'s health answer", timeout: 10) {
                    $0.topic == "\(base)/$gateway/response/health"
                }
            }
        } catch {
            await answers.close()
            throw error
        }
        await answers.close()
    }

    /// The config's unique ids and the gateway status topic its availability names.
    static func identity(_ payload: String) throws -> (uniqueIDs: [String], status: String?) {
        let document = try JSONValue(parsing: payload)
        let components = try XCTUnwrap(document["components"]?.objectValue, payload)
        let statuses = document["availability"]?.arrayValue?.compactMap { $0["topic"]?.stringValue } ?? []
        return (
            components.values.compactMap { $0["unique_id"]?.stringValue }.sorted(),
            statuses.first { $0.hasSuffix("/$gateway/status") }
        )
    }

    /// Waits until `topic`'s retained config is the one `base`'s gateway publishes.
    func waitForConfig(_ gw: RiggedGateway, _ topic: String, on base: String) async throws -> String {
        var payload = ""
        do {
            try await waitUntil("\(topic) published by \(base)'s gateway", timeout: 10) {
                payload = try await gw.retained(Self.configs)[topic] ?? ""
                return try !payload.isEmpty && Self.identity(payload).status == "\(base)/$gateway/status"
            }
        } catch {
            XCTFail("retained: \(payload.prefix(300)); log: \(gw.log.text.suffix(3000))")
            throw error
        }
        return payload
    }

    func testAnAccessoryMovedToAnotherHomeAndBackKeepsItsConfigTopicAndUniqueIDs() async throws {
        await onEveryRig { gw in
            let id = try await gw.accessoryID(named: "Garage Door Opener")
            let topic = "homeassistant/device/\(HomeAssistantDiscovery.nodeID(accessoryID: id))/config"
            try await addCabin(gw)
            let before = try await gw.retained(Self.configs)
            let original = try Self.identity(try XCTUnwrap(before[topic], "\(before.keys.sorted())"))
            XCTAssertEqual(original.status, "home/$gateway/status")
            XCTAssertGreaterThan(original.uniqueIDs.count, 2)
            let listener = try await gw.subscriber(topic)
            do {
                for (home, base) in [("Cabin", "home-cabin"), (Home.defaultName, "home")] {
                    listener.seen.clear()
                    try await operation(gw, "accessory/home", ["accessory": .string(id), "home": .string(home)])
                    let payload = try await waitForConfig(gw, topic, on: base)
                    // The first home's pass is over once its published tree has the move.
                    try await waitUntil("the first home's tree after the move", timeout: 10) {
                        await (gw.gateway.publishedTopicTree.accessory(id: id) != nil) == (base == "home")
                    }
                    try await barrier(gw)
                    let seen = listener.seen.elements
                    XCTAssertEqual(
                        seen.filter { $0.payload.isEmpty }.count, 0, "never cleared on the way to \(home)")
                    XCTAssertEqual(seen.last?.string, payload, "the last word on the topic is \(base)'s")
                    let retained = try await gw.retained(Self.configs)
                    XCTAssertEqual(retained[topic], payload)
                    XCTAssertEqual(try Self.identity(payload).uniqueIDs, original.uniqueIDs, "in \(home)")
                }
            } catch {
                await listener.close()
                throw error
            }
            await listener.close()
            let after = try await gw.retained(Self.configs)
            XCTAssertEqual(Set(after.keys), Set(before.keys), "no config left behind, none missing")
        }
    }

    /// Moved while the gateway was stopped (as `homemqtt accessory home` does offline): at the
    /// next start the home it left finds its config among what it published and leaves it to the
    /// cabin, which publishes it. A gateway of its own (the rig's keeps its state directory locked).
    func testAnAccessoryMovedWhileStoppedKeepsItsIdsAndItsConfigIsNotCleared() async throws {
        await onEveryRig { gw in
            let id = try await gw.accessoryID(named: "Garage Door Opener")
            let topic = "homeassistant/device/\(HomeAssistantDiscovery.nodeID(accessoryID: id))/config"
            let stopped = await gw.stopGateway()
            XCTAssertNil(stopped)
            let state = try TemporaryDirectory(prefix: "homemqtt-ha-moved")
            func run(_ body: () async throws -> Void) async throws {
                let gateway = try await gw.another(clientID: "gateway-under-test", state: state)
                do { try await body() } catch {
                    await gateway.stop()
                    throw error
                }
                let stopped = await gateway.stop()
                XCTAssertNil(stopped)
            }
            var before: [String: String] = [:]
            try await run {
                try await addCabin(gw)
                before = try await gw.retained(Self.configs)
            }
            let original = try Self.identity(try XCTUnwrap(before[topic]))
            XCTAssertEqual(original.status, "home/$gateway/status")
            // Offline, as the command does when no gateway runs.
            func move() async throws {
                let database = try HomeDatabase(directory: state.url, exclusive: false)
                let cabin = try XCTUnwrap(database.homesNow.first { $0.name == "Cabin" })
                try await database.moveAccessory(id: id, toHome: cabin.id)
            }
            try await move()
            let listener = try await gw.subscriber(topic)
            do {
                try await run {
                    let payload = try await waitForConfig(gw, topic, on: "home-cabin")
                    try await barrier(gw)
                    XCTAssertEqual(try Self.identity(payload).uniqueIDs, original.uniqueIDs)
                    let after = try await gw.retained(Self.configs)
                    XCTAssertEqual(Set(after.keys), Set(before.keys))
                }
                XCTAssertEqual(listener.seen.elements.filter { $0.payload.isEmpty }.count, 0, "never cleared")
            } catch {
                await listener.close()
                throw error
            }
            await listener.close()
        }
    }

    /// Moved into a home whose scope leaves it out: that home's gateway clears the config the
    /// first home left, once.
    func testAnAccessoryMovedOutOfItsNewHomesScopeHasItsConfigClearedOnce() async throws {
        await onEveryRig { gw in
            let id = try await gw.accessoryID(named: "Garage Door Opener")
            let topic = "homeassistant/device/\(HomeAssistantDiscovery.nodeID(accessoryID: id))/config"
            try await addCabin(gw)
            let before = try await gw.retained(Self.configs)
            XCTAssertNotNil(before[topic])
            let answers = try await gw.subscriber("home-cabin/$gateway/response/#")
            try await gw.publish(
                "home-cabin/$gateway/request/scope/set",
                #"{"scope": {"manufacturers": {"deny": ["Kilgo Devices, Inc."]}}}"#)
            let answer = try await answers.seen.waitFor("the cabin's scope set", timeout: 10) {
                $0.topic == "home-cabin/$gateway/response/scope/set"
            }
            await answers.close()
            XCTAssertEqual(try JSONValue(parsing: answer.payload)["status"], "ok", answer.string)
            let listener = try await gw.subscriber(topic)
            do {
                try await operation(gw, "accessory/home", ["accessory": .string(id), "home": "Cabin"])
                try await waitUntil("the config cleared", timeout: 10) {
                    try await gw.retained(Self.configs)[topic] == nil
                }
                try await waitUntil("the first home's tree without it", timeout: 10) {
                    await gw.gateway.publishedTopicTree.accessory(id: id) == nil
                }
                try await barrier(gw)
                let seen = listener.seen.elements.filter { !$0.retain }
                XCTAssertEqual(seen.map(\.payload.isEmpty), [true], "cleared once, nothing after")
                let after = try await gw.retained(Self.configs)
                XCTAssertEqual(Set(after.keys), Set(before.keys).subtracting([topic]))
            } catch {
                await listener.close()
                throw error
            }
            await listener.close()
        }
    }
}
