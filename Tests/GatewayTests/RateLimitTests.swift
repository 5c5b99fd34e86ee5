import Foundation
import Gateway
import HomeModel
import MQTT
import TestSupport
import XCTest

/// `scope.rate-limits` as a subscriber sees them: a chatty sensor's `state` at most once per
/// `min-interval`, the latest value always there when the window closes; a dead band
/// (`min-change`) measured from the value on the broker; a button's presses, a `get`'s value and
/// a `set`'s never held back. Time is the gateway's manual clock: no test sleeps for a window.
final class RateLimitTests: RigTestCase {
    func testAChattySensorPublishesOncePerWindowAndTheLastValueOfEach() async {
        let manual = ManualGatewayClock()
        await onEveryRig(
            configure: {
                $0.scope.rateLimits = [RateLimit(characteristicTypes: ["current-temperature"], minInterval: 1)]
            }, clock: .manual(manual)
        ) { gw in
            let temperature = try await gw.characteristic("Bedroom Climate Sensor", "current-temperature")
            let state = temperature.topic + "/state"
            let metadata = temperature.characteristic.metadata
            @Sendable func text(_ value: Double) -> String { ValueCodec.text(.float(value), metadata: metadata) }
            // The first change goes out at once and opens a window.
            gw.seen.clear()
            try await gw.home.setValue(temperature.address, .float(10))
            let first = text(10)
            try await gw.next(state) { $0 == first }

            for window in 1...6 {
                gw.seen.clear()
                // 100 changes in 0.9 s of the gateway's time: all held.
                var last = 0.0
                for change in 0..<100 {
                    last = 10 + Double((window * 100 + change) % 400) / 10
                    try await gw.home.setValue(temperature.address, .float(last))
                    manual.advance(by: .milliseconds(9))
                }
                let expected = text(last)
                try await waitUntil("window \(window)'s last change taken by the gateway") {
                    await gw.gateway.value(of: temperature.address).map {
                        ValueCodec.text($0, metadata: temperature.characteristic.metadata)
                    } == expected
                }
                // The window closes a second after it opened.
                manual.advance(by: .milliseconds(100))
                let published = try await gw.next(state)
                XCTAssertEqual(published.string, expected, "window \(window): the last value of the window")
                let inWindow = gw.seen.elements.filter { $0.topic == state }.map(\.string)
                XCTAssertEqual(inWindow, [expected], "window \(window): one state message for 100 changes")
            }
            let retained = try await gw.retained(state)
            XCTAssertEqual(retained[state], text(10 + Double((6 * 100 + 99) % 400) / 10), "the broker keeps the last")
        }
    }

    func testADeadBandDropsSmallChangesMeasuredFromTheBrokersValue() async {
        await onEveryRig(configure: {
            $0.scope.rateLimits = [RateLimit(characteristicTypes: ["current-temperature"], minChange: 0.5)]
        }) { gw in
            let temperature = try await gw.characteristic("Bedroom Climate Sensor", "current-temperature")
            let humidity = try await gw.characteristic("Bedroom Climate Sensor", "current-relative-humidity")
            let state = temperature.topic + "/state"
            // The shipped sensor starts at 20.5.
            var marker: Int64 = 40
            /// Sets the temperature, then an unlimited value after it: once that is seen, what
            /// the temperature's change gave has been seen too (one connection, in order).
            func change(to value: Double) async throws -> [String] {
                gw.seen.clear()
                try await gw.home.setValue(temperature.address, .float(value))
                marker += 1
                try await gw.home.setValue(humidity.address, .float(Double(marker)))
                let expected = ValueCodec.text(.float(Double(marker)), metadata: humidity.characteristic.metadata)
                try await gw.next(humidity.topic + "/state") { $0 == expected }
                return gw.seen.elements.filter { $0.topic == state }.map(\.string)
            }
            let changes = [(20.9, false), (21.1, true), (21.5, false), (20.7, false), (21.7, true), (21.2, true)]
            for (value, passes) in changes {
                let seen = try await change(to: value)
                XCTAssertEqual(
                    seen, passes ? [ValueCodec.text(.float(value), metadata: temperature.characteristic.metadata)] : [],
                    "\(value): \(passes ? "0.5 or more" : "less than 0.5") from the value on the broker")
            }
            let retained = try await gw.retained(state)
            XCTAssertEqual(retained[state], "21.2")
        }
    }

    func testAButtonsPressesAreNeverHeldBack() async {
        let manual = ManualGatewayClock()
        // No selector: every characteristic, for a minute.
        await onEveryRig(configure: { $0.scope.rateLimits = [RateLimit(minInterval: 60)] }, clock: .manual(manual)) {
            gw in
            let press = try XCTUnwrap(Catalog.characteristicType(named: "input-event"))
            let switchType = try XCTUnwrap(Catalog.serviceType(named: "stateless-programmable-switch"))
            let button = Accessory(
                id: "sim:hue-dimmer", name: "Hue Dimmer", manufacturer: "Signify", model: "RWL021",
                serialNumber: "D1", firmwareRevision: "1.0",
                services: [
                    AccessoryService(
                        iid: 9, type: switchType.uuid, name: "On button",
                        characteristics: [
                            Characteristic(iid: 10, type: press.uuid, value: nil, metadata: press.metadata)
                        ])
                ],
                suggestedRoom: "Hallway")
            await gw.home.add(button)
            let topic = "home/hallway/hue-dimmer/on-button/input-event/state"
            try await gw.next("home/hallway/hue-dimmer/on-button/input-event/meta")
            let address = CharacteristicAddress(accessoryID: button.id, iid: 10)
            try await waitUntil("notifications on for the button") {
                await gw.home.notificationsEnabled().contains(address)
            }
            gw.seen.clear()
            for value: Int64 in [0, 0, 2, 1, 0] { try await gw.home.setValue(address, .int(value)) }
            try await waitUntil("five presses on \(topic), the clock standing still") {
                gw.seen.elements.filter { $0.topic == topic }.count >= 5
            }
            XCTAssertEqual(gw.seen.elements.filter { $0.topic == topic }.map(\.string), ["0", "0", "2", "1", "0"])
        }
    }

    func testAGetOrASetIsNeverHeldBack() async {
        let manual = ManualGatewayClock()
        await onEveryRig(
            configure: {
                $0.scope.rateLimits = [
                    RateLimit(characteristicTypes: ["current-temperature", "brightness"], minInterval: 60)
                ]
            }, clock: .manual(manual)
        ) { gw in
            let temperature = try await gw.characteristic("Bedroom Climate Sensor", "current-temperature")
            let state = temperature.topic + "/state"
            gw.seen.clear()
            try await gw.home.setValue(temperature.address, .float(21))
            let opened = ValueCodec.text(.float(21), metadata: temperature.characteristic.metadata)
            try await gw.next(state) { $0 == opened }
            try await gw.home.setValue(temperature.address, .float(21.3))
            try await waitUntil("21.3 taken and held") {
                await gw.gateway.value(of: temperature.address) == .float(21.3)
            }
            XCTAssertFalse(gw.seen.elements.contains { $0.topic == state && $0.string == "21.3" }, "not held")

            // A `get` answers the latest value, and `state` shows it at once.
            let answer = try await gw.request(temperature.topic + "/get", "", answer: temperature.topic + "/result")
            XCTAssertEqual(answer["status"], "ok")
            XCTAssertEqual(answer["value"], .double(21.3))
            try await gw.next(state) { $0 == "21.3" }

            // A `set` of a limited characteristic: its `state` follows each write, a minute or not.
            let brightness = try await gw.characteristic("Bedroom Lamp", "brightness")
            for value in [30, 31, 32] {
                let result = try await gw.request(
                    brightness.topic + "/set", "\(value)", answer: brightness.topic + "/result")
                XCTAssertEqual(result["status"], "ok")
                try await gw.next(brightness.topic + "/state") { $0 == "\(value)" }
            }
        }
    }

    func testAGracefulStopPublishesTheValueHeld() async {
        let manual = ManualGatewayClock()
        await onEveryRig(
            configure: {
                $0.scope.rateLimits = [RateLimit(characteristicTypes: ["current-temperature"], minInterval: 3600)]
            }, clock: .manual(manual)
        ) { gw in
            let temperature = try await gw.characteristic("Bedroom Climate Sensor", "current-temperature")
            let state = temperature.topic + "/state"
            let metadata = temperature.characteristic.metadata
            gw.seen.clear()
            try await gw.home.setValue(temperature.address, .float(23))
            let opened = ValueCodec.text(.float(23), metadata: metadata)
            try await gw.next(state) { $0 == opened }
            try await gw.home.setValue(temperature.address, .float(24.5))
            try await waitUntil("24.5 taken and held") {
                await gw.gateway.value(of: temperature.address) == .float(24.5)
            }
            await gw.stopGateway()
            let retained = try await gw.retained(state)
            XCTAssertEqual(retained[state], ValueCodec.text(.float(24.5), metadata: metadata), "the latest, not lost")
        }
    }

    /// A reconnect republishes the latest value of a characteristic whose window is still open
    /// (the broker may have lost what it had): that is its publication, and nothing of it is held
    /// any more. It went out twice before: again when the window closed, or at the stop.
    func testAReconnectPublishesAHeldValueOnce() async {
        let manual = ManualGatewayClock()
        await onEveryRig(
            configure: {
                $0.scope.rateLimits = [RateLimit(characteristicTypes: ["current-temperature"], minInterval: 3600)]
            }, clock: .manual(manual)
        ) { gw in
            let temperature = try await gw.characteristic("Bedroom Climate Sensor", "current-temperature")
            let state = temperature.topic + "/state"
            let metadata = temperature.characteristic.metadata
            gw.seen.clear()
            try await gw.home.setValue(temperature.address, .float(23))
            let opened = ValueCodec.text(.float(23), metadata: metadata)
            try await gw.next(state) { $0 == opened }
            try await gw.home.setValue(temperature.address, .float(24.5))
            try await waitUntil("24.5 taken and held") {
                await gw.gateway.value(of: temperature.address) == .float(24.5)
            }
            let latest = ValueCodec.text(.float(24.5), metadata: metadata)
            try await gw.restartBroker()
            try await waitUntil("republished after the broker's restart", timeout: 20) {
                try await gw.retained()["home/$gateway/status"] == "online"
            }
            let retained = try await gw.retained(state)
            XCTAssertEqual(retained[state], latest, "the republication has the latest value")
            // A stop publishes every value still held, before `offline`: none is.
            gw.seen.clear()
            await gw.stopGateway()
            try await gw.next("home/$gateway/status") { $0 == "offline" }
            XCTAssertEqual(gw.seen.elements.filter { $0.topic == state }.map(\.string), [], "24.5 went out once")
        }
    }

    func testAScopeSetWithABadRateLimitIsRefusedAndAGoodOneIsInForce() async {
        await onEveryRig { gw in
            let bad = try await gw.request(
                "home/$gateway/request/scope/set",
                #"{"scope": {"rate-limits": [{"characteristic-types": "current-temperature", "min-interval": "soon"}]}}"#,
                answer: "home/$gateway/response/scope/set")
            XCTAssertEqual(bad["status"], "error")
            XCTAssertEqual(bad["code"], "invalid-field")
            let message = bad["message"]?.stringValue ?? ""
            XCTAssertTrue(message.contains("scope.rate-limits[0].min-interval"), message)
            XCTAssertTrue(message.contains("500ms"), "says what a duration looks like: \(message)")

            let unknown = try await gw.request(
                "home/$gateway/request/scope/set",
                #"{"scope": {"rate-limits": [{"characteristic-types": ["temprature"], "min-change": 0.5}]}}"#,
                answer: "home/$gateway/response/scope/set")
            XCTAssertEqual(unknown["code"], "invalid-scope")
            XCTAssertTrue(
                (unknown["message"]?.stringValue ?? "").contains("scope.rate-limits[0].characteristic-types"),
                "\(unknown)")

            // The gateway still serves, and takes a good one.
            let good = try await gw.request(
                "home/$gateway/request/scope/set",
                #"{"scope": {"rate-limits": [{"topics": ["home/bedroom/#"], "min-interval": "30s", "min-change": 1}]}}"#,
                answer: "home/$gateway/response/scope/set")
            XCTAssertEqual(good["status"], "ok", "\(good)")
            let scope = try await gw.request(
                "home/$gateway/request/scope/get", "{}", answer: "home/$gateway/response/scope/get")
            XCTAssertEqual(
                scope["data"]?["rate-limits"],
                .array([.object(["topics": .array(["home/bedroom/#"]), "min-interval": 30, "min-change": 1])]))
        }
    }
}

/// Bad `scope.rate-limits` in the config file: an error naming the file and the key.
final class RateLimitConfigTests: XCTestCase {
    private func error(_ entry: String) -> String {
        let text = "scope:\n  rate-limits:\n    - \(entry)\n"
        do {
            let config = try GatewayConfig.parse(text, file: "gateway.yml")
            _ = try ScopeFilter(config.scope, file: config.file)
            return "accepted"
        } catch {
            return error.description
        }
    }

    func testBadValuesAreErrorsNamingTheFileAndKey() {
        let cases: [(String, String)] = [
            (
                "{characteristic-types: current-temperature, min-interval: fast}",
                "gateway.yml: scope.rate-limits[0].min-interval: expected a duration: seconds (30) or a number "
                    + "with ms, s, m or h (500ms, 30s, 5m), got 'fast'"
            ),
            (
                "{min-interval: 0}",
                "gateway.yml: scope.rate-limits[0].min-interval: must be more than 0 and at most a day (86400 s), "
                    + "got 0.0 s"
            ),
            (
                "{min-interval: 2d}",
                "gateway.yml: scope.rate-limits[0].min-interval: expected a duration: seconds (30) or a number "
                    + "with ms, s, m or h (500ms, 30s, 5m), got '2d'"
            ),
            (
                "{min-change: -1}",
                "gateway.yml: scope.rate-limits[0].min-change: must be greater than 0, got -1.0"
            ),
            (
                "{accessories: [Lamp]}",
                "gateway.yml: scope.rate-limits[0]: needs min-interval, min-change or both"
            ),
            (
                "{characteristic-types: [temprature], min-interval: 1s}",
                "gateway.yml: scope.rate-limits[0].characteristic-types: unknown type 'temprature'"
            ),
            (
                "{topics: ['home/#/x'], min-interval: 1s}",
                "gateway.yml: scope.rate-limits[0].topics: 'home/#/x' is not a topic filter: levels split by /, "
                    + "+ for one level, # last"
            ),
            (
                "{max-rate: 5, min-interval: 1s}",
                "gateway.yml: scope.rate-limits[0].max-rate: unknown key; allowed here: characteristic-types, "
                    + "accessories, topics, min-interval, min-change"
            ),
        ]
        for (entry, expected) in cases {
            XCTAssertEqual(error(entry), expected, entry)
        }
    }

    func testEntriesThatMatchNothingAreWarnings() async throws {
        var scope = ScopeConfig()
        scope.rateLimits = [
            RateLimit(characteristicTypes: ["brightness", "current-temperature"], minInterval: 5),
            RateLimit(accessories: ["Lamp", "Lampe"], minChange: 1),
        ]
        let lamp = TopicTreeTests.lamp(id: "sim:lamp", name: "Lamp")
        let database = HomeDatabase.inMemory()
        try await database.adopt([lamp])
        let home = await database.home
        XCTAssertEqual(
            try ScopeFilter(scope).unmatchedEntries(accessories: [lamp], home: home),
            [
                "scope.rate-limits[0].characteristic-types: 'current-temperature' matches no characteristic of the home",
                "scope.rate-limits[1].accessories: 'Lampe' matches no accessory",
            ])
    }

    func testDurationsReadInEveryUnit() throws {
        let text = """
            scope:
              rate-limits:
                - {characteristic-types: [current-temperature, CurrentRelativeHumidity], min-interval: 500ms}
                - {accessories: Hallway Motion Sensor, min-interval: 30s, min-change: 0.5}
                - {topics: "home/garage/#", min-interval: 5m}
                - {min-interval: 1h}
                - {min-interval: 2.5}
            """
        let config = try GatewayConfig.parse(text, file: "gateway.yml")
        XCTAssertEqual(config.scope.rateLimits?.map(\.minInterval), [0.5, 30, 300, 3600, 2.5])
        XCTAssertEqual(config.scope.rateLimits?[1].accessories, ["Hallway Motion Sensor"])
        XCTAssertEqual(config.scope.rateLimits?[1].minChange, 0.5)
        XCTAssertNoThrow(try ScopeFilter(config.scope, file: config.file))
        // None set: the scope says nothing of them (`scope/get`, the stored scope).
        let plain = try GatewayConfig.parse("scope:\n  rooms: {deny: [Attic]}\n", file: "gateway.yml")
        XCTAssertNil(plain.scope.rateLimits)
        let encoded = String(decoding: try JSONEncoder().encode(plain.scope), as: UTF8.self)
        XCTAssertFalse(encoded.contains("rate-limits"), encoded)
    }
}

extension RiggedGateway {
    /// A characteristic of the shipped home's accessory `accessory`, by type name.
    func characteristic(_ accessory: String, _ type: String) async throws -> TopicTree.CharacteristicNode {
        let tree = await gateway.tree
        let node = tree.accessories.first { $0.accessory.name == accessory }
        let found = node?.services.lazy.flatMap(\.characteristics).first { $0.typeName == type }
        return try XCTUnwrap(found, "no \(type) of \(accessory) in the tree")
    }
}
