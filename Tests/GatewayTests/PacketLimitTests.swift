import Foundation
import Gateway
import HomeAssistant
import HomeModel
import MQTT
import TestSupport
import XCTest

/// The gateway under a broker's maximum packet size, on a rig (the memory broker by default,
/// mosquitto with `max_packet_size` too under CI): MQTT 5 is told the limit in the CONNACK
/// (the memory broker's `limits`), 3.1.1 needs `broker.max-packet-size`. A 100-lamp home's tree
/// (about 150 KB) fits whole under neither 4 KB nor 64 KB. Moved from EndToEndTests, every
/// assertion kept: the binary's exit status is the service group's clean stop, its stderr the
/// rig's log, mosquitto's log of connections the rig's count. A limit the broker never told
/// (`testAnUntoldLimitOnMQTT311IsNamedInTheLog`): the MQTT client learns it from mosquitto
/// dropping the connection, and the memory transport from the memory broker doing the same.
final class PacketLimitTests: RigTestCase {
    static let lamps = 100

    /// `count` colour lamps in 10 rooms, as simulator accessory files.
    static func writeLamps(_ count: Int, to directory: String) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for index in 1...count {
            let number = String(format: "%03d", index)
            try """
            name: Limit Lamp \(number)
            manufacturer: HomeMQTT Tests
            model: LL-1
            serial: LL-\(number)
            firmware: 1.0.0
            room: Room \((index - 1) % 10 + 1)
            services:
              - type: lightbulb
                name: Lamp
                behaviour: none
                characteristics:
                  power-state: false
                  brightness: 50
                  hue: 0
                  saturation: 0
                  color-temperature: 200

            """.write(toFile: "\(directory)/lamp-\(number).yml", atomically: false, encoding: .utf8)
        }
    }

    /// A directory of `count` lamps, removed after the test.
    func lampHome(_ count: Int) throws -> URL {
        let directory = try TemporaryDirectory(prefix: "homemqtt-limits")
        addTeardownBlock { _ = directory }
        try Self.writeLamps(count, to: directory.path)
        return directory.url
    }

    /// The config these tests ran the binary with: Home Assistant's discovery off.
    static func config(_ config: inout GatewayConfig) {
        config[HomeAssistantConfig.self].enabled = false
    }

    /// The same on MQTT 3.1.1 with `broker.max-packet-size: size` (and no fallback: `protocol`
    /// is set).
    static func mqtt311(maximumPacketSize size: Int?) -> (inout GatewayConfig) -> Void {
        { config in
            Self.config(&config)
            config.mqtt.protocolVersion = .v311
            config.mqtt.fallBackToMQTT311 = false
            config.mqtt.maximumPacketSize = size
        }
    }

    func testA4KBLimitOnMQTT5() async throws { try await runLamps(maxPacketSize: 4096, mqtt311: false) }
    func testA64KBLimitOnMQTT5() async throws { try await runLamps(maxPacketSize: 65536, mqtt311: false) }
    func testA4KBLimitOnMQTT311() async throws { try await runLamps(maxPacketSize: 4096, mqtt311: true) }
    func testA64KBLimitOnMQTT311() async throws { try await runLamps(maxPacketSize: 65536, mqtt311: true) }

    /// EMQX's default maximum packet size (1 MB) and a 1,000-accessory home (about 1.5 MB).
    func testAThousandAccessoriesUnderEMQXsDefaultLimit() async throws {
        try await runLamps(maxPacketSize: 1_048_576, mqtt311: false, lamps: 1000)
    }

    /// 100 lamps behind the broker's maximum packet size: online with one connection, the tree
    /// readable in pages that each fit, every lamp in them, 10 sets answered, the `tree`
    /// request answered with the index, and a stop without a flood of warnings.
    func runLamps(maxPacketSize: Int, mqtt311: Bool, lamps: Int = PacketLimitTests.lamps) async throws {
        let home = try lampHome(lamps)
        await onEveryRig(
            broker: .init(maximumPacketSize: maxPacketSize), timeout: 60,
            configure: mqtt311 ? Self.mqtt311(maximumPacketSize: maxPacketSize) : Self.config, accessories: home
        ) { gw in
            // The index, then every page it lists; each fits the limit, and together they hold every lamp.
            let indexMessage = try await gw.seen.waitFor("the index") { $0.topic == "home/$gateway/tree" }
            let index = try JSONValue(parsing: indexMessage.payload)
            XCTAssertEqual(index["paged"], .bool(true), indexMessage.string)
            XCTAssertEqual(index["accessories"], .int(Int64(lamps)))
            guard case .array(let pageTopics)? = index["pages"] else {
                return XCTFail("no pages: \(indexMessage.string)")
            }
            let topics = pageTopics.compactMap { value -> String? in if case .string(let s) = value { s } else { nil } }
            XCTAssertGreaterThan(topics.count, 1)
            var accessories: [JSONValue] = []
            for topic in topics {
                let page = try await gw.seen.waitFor(topic) { $0.topic == topic && !$0.payload.isEmpty }
                XCTAssertLessThanOrEqual(page.payload.count, maxPacketSize, topic)
                guard case .array(let rooms)? = try JSONValue(parsing: page.payload)["rooms"] else {
                    return XCTFail("no rooms on \(topic)")
                }
                for room in rooms {
                    if case .array(let list)? = room["accessories"] { accessories += list }
                }
            }
            XCTAssertEqual(Set(accessories.compactMap { $0["id"] }).count, lamps)
            for accessory in accessories {
                XCTAssertNotNil(accessory["topic"])
                XCTAssertNotNil(accessory["info"])
                XCTAssertNotNil(accessory["availability"])
            }

            // Ten sets on ten lamps' brightness, each answered.
            let brightness = accessories.prefix(10).compactMap { accessory -> String? in
                guard case .array(let services)? = accessory["services"],
                    case .array(let list)? = services.first?["characteristics"],
                    let c = list.first(where: { $0["type-name"] == .string("brightness") }),
                    case .string(let topic)? = c["topic"]
                else { return nil }
                return topic
            }
            XCTAssertEqual(brightness.count, 10)
            for (offset, topic) in brightness.enumerated() {
                try await gw.publish(topic + "/set", "\(offset + 20)")
            }
            let answers = try await gw.seen.waitFor(count: 10, "answers", timeout: 20) {
                $0.topic.hasSuffix("/brightness/result")
            }
            XCTAssertEqual(
                answers.compactMap { try? JSONValue(parsing: $0.payload)["status"] },
                Array(repeating: .string("ok"), count: 10))

            // The tree request: too large whole, answered with the index of the pages.
            try await gw.publish("home/$gateway/request/tree", #"{"id":7}"#)
            let response = try await gw.next("home/$gateway/response/tree")
            let answer = try JSONValue(parsing: response.payload)
            XCTAssertEqual(answer["status"], .string("ok"), response.string)
            XCTAssertEqual(answer["data"]?["paged"], .bool(true), response.string)

            // One connection for the whole run.
            let log = gw.log.text
            XCTAssertFalse(log.contains("reconnected to the broker") || log.contains("lost the broker"), log)
            XCTAssertEqual(gw.connections(), 1)
            XCTAssertTrue(log.contains("published in pages"), log)
            XCTAssertFalse(log.contains("publish failed"), log)
            let error = await gw.stopGateway()
            XCTAssertNil(error, "the gateway did not stop cleanly")
            let warnings = gw.log.text.split(separator: "\n").filter { $0.contains("warning") }
            XCTAssertLessThan(warnings.count, 5, gw.log.text)
        }
    }

    /// The retained tree on `gw`'s broker now: the index, and the page topics.
    static func retainedTree(_ gw: RiggedGateway) async throws -> (index: JSONValue?, pages: Set<String>) {
        let held = try await gw.retainedMessages("home/$gateway/tree/#")
        let index = held["home/$gateway/tree"].flatMap { try? JSONValue(parsing: $0.payload) }
        return (index, Set(held.keys.filter { $0 != "home/$gateway/tree" }))
    }

    static func strings(_ value: JSONValue?) -> Set<String> {
        guard case .array(let list)? = value else { return [] }
        return Set(list.compactMap { if case .string(let text) = $0 { text } else { nil } })
    }

    /// Pages the tree no longer needs are cleared: when it shrinks while running, and at the
    /// next start, when it fits whole (the look at the broker finds the earlier run's pages).
    func testPagesNoLongerNeededAreCleared() async throws {
        let home = try lampHome(40)
        let small = try lampHome(1)
        await onEveryRig(broker: .init(maximumPacketSize: 4096), configure: Self.config, accessories: home) { gw in
            let before = try await Self.retainedTree(gw)
            XCTAssertEqual(Self.strings(before.index?["pages"]), before.pages)
            XCTAssertGreaterThan(before.pages.count, 4)

            // Thirty lamps leave: fewer pages, and the index lists exactly those on the broker.
            gw.seen.clear()
            for number in 1...30 {
                let name = String(format: "Limit Lamp %03d", number)
                try await gw.publish("home/$gateway/request/accessory/remove", #"{"accessory": "\#(name)"}"#)
            }
            let removed = try await gw.seen.waitFor(count: 30, "answers", timeout: 20) {
                $0.topic.hasPrefix("home/$gateway/response/")
            }
            XCTAssertTrue(removed.allSatisfy { $0.string.contains(#""status":"ok""#) }, "\(removed.map(\.string))")
            // The tree is published again after the answers: wait for it to have shrunk.
            var shrunk = try await Self.retainedTree(gw)
            try? await waitUntil("the tree of 10 lamps", timeout: 10) {
                shrunk = try await Self.retainedTree(gw)
                return shrunk.index?["accessories"] == .int(10) && Self.strings(shrunk.index?["pages"]) == shrunk.pages
            }
            XCTAssertEqual(shrunk.index?["accessories"], .int(10))
            XCTAssertEqual(Self.strings(shrunk.index?["pages"]), shrunk.pages)
            XCTAssertLessThan(shrunk.pages.count, before.pages.count)
            let error = await gw.stopGateway()
            XCTAssertNil(error, "the gateway did not stop cleanly")

            // Another home of one lamp on the same base topic: its tree fits whole, and the pages
            // left by the run before are cleared as they arrive (before it says `online`).
            let state = try TemporaryDirectory(prefix: "homemqtt-pages")
            let second = try await gw.another(
                clientID: "homemqtt-pages-2", state: state, accessories: small, configure: Self.config)
            let whole = try await Self.retainedTree(gw)
            XCTAssertNil(whole.index?["paged"])
            XCTAssertNotNil(whole.index?["rooms"])
            XCTAssertEqual(whole.pages, [], "pages left on the broker")
            XCTAssertTrue(
                second.log.text.contains("clearing retained topics this gateway published earlier"), second.log.text)
            let secondError = await second.stop()
            XCTAssertNil(secondError, "the second gateway did not stop cleanly")
            _ = state
        }
    }

    /// Under 1,600 bytes no lamp's entry fits a page, and the index listing them does not fit
    /// either: no tree is left on the broker, the `tree` request gets `too-large`, each is said
    /// once in the log, and the lamps are served on one connection.
    func testATreeThatCannotFitIsRefusedWithAnAnswer() async throws {
        let home = try lampHome(10)
        await onEveryRig(
            broker: .init(maximumPacketSize: 1600), configure: Self.mqtt311(maximumPacketSize: 1600),
            accessories: home
        ) { gw in
            // `online` comes after the tree: none was left.
            let held = try await Self.retainedTree(gw)
            XCTAssertNil(held.index)
            XCTAssertEqual(held.pages, [])

            gw.seen.clear()
            try await gw.publish("home/$gateway/request/tree", #"{"id":3}"#)
            try await gw.publish("home/room-1/limit-lamp-001/lamp/brightness/set", "33")
            let tree = try await gw.next("home/$gateway/response/tree")
            let answer = try JSONValue(parsing: tree.payload)
            XCTAssertEqual(answer["status"], .string("error"), tree.string)
            XCTAssertEqual(answer["code"], .string("too-large"), tree.string)
            XCTAssertEqual(answer["id"], .int(3))
            let set = try await gw.seen.waitFor("the set's result") { $0.topic.hasSuffix("/brightness/result") }
            XCTAssertTrue(set.string.contains(#""status":"ok""#), set.string)

            let log = gw.log.text
            for line in ["accessories too large for a page", "the tree's index does not fit"] {
                XCTAssertEqual(log.components(separatedBy: line).count - 1, 1, "'\(line)':\n\(log)")
            }
            XCTAssertEqual(gw.connections(), 1)
        }
    }

    /// Under 600 bytes each lamp's `$info` (about 700) cannot go: none is sent, the first is
    /// logged with its topic, size and limit, the others only counted and summed up at the stop;
    /// the characteristics' topics and the sets go on.
    func testDocumentsThatCannotFitAreLoggedOnceAndCounted() async throws {
        let home = try lampHome(20)
        await onEveryRig(
            broker: .init(maximumPacketSize: 600), configure: Self.mqtt311(maximumPacketSize: 600), accessories: home
        ) { gw in
            let lamp = "home/room-1/limit-lamp-001"
            let held = try await gw.subscriber(lamp + "/#")
            try await held.seen.waitFor("the lamp's brightness") { $0.topic == lamp + "/lamp/brightness/state" }
            XCTAssertFalse(held.seen.elements.contains { $0.topic == lamp + "/$info" })
            await held.close()
            let error = await gw.stopGateway()
            XCTAssertNil(error, "the gateway did not stop cleanly")
            let log = gw.log.text
            let refused = log.split(separator: "\n").filter {
                $0.contains("larger than the broker's maximum packet size")
            }
            XCTAssertEqual(refused.count, 1, log)
            XCTAssertTrue(refused.first?.contains("$info") ?? false, log)
            XCTAssertTrue(refused.first?.contains("(600)") ?? false, log)
            XCTAssertTrue(log.contains("count=19 error=packet-too-large"), log)
            XCTAssertEqual(gw.connections(), 1)
        }
    }

    /// MQTT 3.1.1 without `broker.max-packet-size`: the broker closes the connection at the
    /// first packet over its limit; the gateway learns the limit from it and reconnects once
    /// (`BrokerRefusalTests.runUntold` follows it through). The log says what it learned, once,
    /// and names the setting. The binary's run waited 3 s for a second line; here the tree
    /// republished in pages and a health request answered after the hint come first, and the
    /// log is read again once the gateway has stopped (cleanly).
    func testAnUntoldLimitOnMQTT311IsNamedInTheLog() async throws {
        let home = try lampHome(Self.lamps)
        await onEveryRig(
            broker: .init(maximumPacketSize: 65536), timeout: 30, configure: Self.mqtt311(maximumPacketSize: nil),
            accessories: home
        ) { gw in
            let hint = "set broker.max-packet-size"
            try await waitUntil("the hint", timeout: 30) { gw.log.text.contains(hint) }
            try await gw.seen.waitFor("the tree in pages", timeout: 30) { message in
                message.topic == "home/$gateway/tree"
                    && (try? JSONValue(parsing: message.payload))?["paged"] == .bool(true)
            }
            try await gw.publish("home/$gateway/request/health", "{}")
            try await gw.seen.waitFor("the health report") { $0.topic == "home/$gateway/response/health" }
            XCTAssertEqual(gw.log.text.components(separatedBy: hint).count - 1, 1, gw.log.text)
            XCTAssertEqual(gw.connections(of: "gateway-under-test"), 2)
            let stopped = await gw.stopGateway()
            XCTAssertNil(stopped, "the gateway did not stop cleanly")
            XCTAssertEqual(gw.log.text.components(separatedBy: hint).count - 1, 1, gw.log.text)
        }
    }
}
