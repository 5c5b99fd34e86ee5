import Foundation
import HomeModel
import MQTT
import TestSupport
import XCTest

/// The gateway under mosquitto's `max_packet_size` (MQTT 5 tells the client in its CONNACK;
/// 3.1.1 needs `broker.max-packet-size`). A 100-lamp home's tree (about 150 KB) fits whole
/// under neither 4 KB nor 64 KB.
final class PacketLimitTests: XCTestCase {
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

    /// A config for a broker at `port` serving `accessories`, with `broker` lines added.
    static func writeConfig(
        in directory: TemporaryDirectory, port: Int, clientID: String, accessories: String, broker: [String] = []
    ) throws -> String {
        let path = directory.file("gateway.yml")
        try """
        broker:
          url: mqtt://127.0.0.1:\(port)
          client-id: \(clientID)
        \(broker.map { "  \($0)" }.joined(separator: "\n"))
        state-directory: state
        poll-interval: 0
        sources:
          - type: simulator
            directory: \(accessories)
        homeassistant:
          enabled: false
        log-level: info
        """.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    func testA4KBLimitOnMQTT5() async throws { try await runLamps(maxPacketSize: 4096, mqtt311: false) }
    func testA64KBLimitOnMQTT5() async throws { try await runLamps(maxPacketSize: 65536, mqtt311: false) }
    func testA4KBLimitOnMQTT311() async throws { try await runLamps(maxPacketSize: 4096, mqtt311: true) }
    func testA64KBLimitOnMQTT311() async throws { try await runLamps(maxPacketSize: 65536, mqtt311: true) }

    /// EMQX's default maximum packet size (1 MB) and a 1,000-accessory home (about 1.5 MB).
    func testAThousandAccessoriesUnderEMQXsDefaultLimit() async throws {
        try await runLamps(maxPacketSize: 1_048_576, mqtt311: false, lamps: 1000)
    }

    /// 100 lamps behind mosquitto's `max_packet_size`: online with one connection, the tree
    /// readable in pages that each fit, every lamp in them, 10 sets answered, the `tree`
    /// request answered with the index, and a stop without a flood of warnings.
    func runLamps(maxPacketSize: Int, mqtt311: Bool, lamps: Int = PacketLimitTests.lamps) async throws {
        let broker = try await MosquittoBroker.start(.init(extraConfiguration: ["max_packet_size \(maxPacketSize)"]))
        addTeardownBlock { await broker.stop() }
        let directory = try TemporaryDirectory(prefix: "homemqtt-limits")
        try Self.writeLamps(lamps, to: directory.file("accessories"))
        let config = try Self.writeConfig(
            in: directory, port: broker.port, clientID: "homemqtt-limits", accessories: directory.file("accessories"),
            broker: mqtt311 ? ["protocol: 3.1.1", "max-packet-size: \(maxPacketSize)"] : [])
        let tree = try await MQTTTestSubscriber.start(broker: broker, filter: "home/$gateway/tree/#")
        let everything = try await MQTTTestSubscriber.start(broker: broker, filter: "home/#")
        TestCensus.record(.binary)
        let gateway = try ChildProcess(BinaryEndToEndTests.binary, ["run", "--config", config])
        addTeardownBlock { await gateway.terminate(grace: 2) }
        try await everything.waitForMessage("online", timeout: 30) { message in
            message.topic == "home/$gateway/status" && message.string == "online"
        }

        // The index, then every page it lists; each fits the limit, and together they hold every lamp.
        let indexMessage = try await tree.waitForMessage("the index") { $0.topic == "home/$gateway/tree" }
        let index = try JSONValue(parsing: indexMessage.payload)
        XCTAssertEqual(index["paged"], .bool(true), indexMessage.string)
        XCTAssertEqual(index["accessories"], .int(Int64(lamps)))
        guard case .array(let pageTopics)? = index["pages"] else { return XCTFail("no pages: \(indexMessage.string)") }
        let topics = pageTopics.compactMap { value -> String? in if case .string(let s) = value { s } else { nil } }
        XCTAssertGreaterThan(topics.count, 1)
        var accessories: [JSONValue] = []
        for topic in topics {
            let page = try await tree.waitForMessage(topic) { $0.topic == topic && !$0.payload.isEmpty }
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
        let client = MQTTClient(configuration: broker.clientConfiguration())
        try await client.connect()
        for (offset, topic) in brightness.enumerated() {
            try await client.publish(topic + "/set", "\(offset + 20)", qos: .atLeastOnce)
        }
        let answers = try await everything.waitForMessages(count: 10, timeout: 20) {
            $0.topic.hasSuffix("/brightness/result")
        }
        XCTAssertEqual(
            answers.compactMap { try? JSONValue(parsing: $0.payload)["status"] },
            Array(repeating: .string("ok"), count: 10))

        // The tree request: too large whole, answered with the index of the pages.
        try await client.publish("home/$gateway/request/tree", #"{"id":7}"#, qos: .atLeastOnce)
        let response = try await everything.waitForMessage("the tree answer") {
            $0.topic == "home/$gateway/response/tree"
        }
        let answer = try JSONValue(parsing: response.payload)
        XCTAssertEqual(answer["status"], .string("ok"), response.string)
        XCTAssertEqual(answer["data"]?["paged"], .bool(true), response.string)

        // One connection for the whole run.
        let log = gateway.standardError
        XCTAssertFalse(log.contains("reconnected to the broker") || log.contains("lost the broker"), log)
        XCTAssertEqual(broker.log.components(separatedBy: "as homemqtt-limits").count - 1, 1, broker.log)
        XCTAssertTrue(log.contains("published in pages"), log)
        XCTAssertFalse(log.contains("publish failed"), log)
        await client.disconnect()
        await tree.stop()
        await everything.stop()
        let status = await gateway.terminate(grace: 5)
        XCTAssertEqual(status, 0)
        let warnings = gateway.standardError.split(separator: "\n").filter { $0.contains("warning") }
        XCTAssertLessThan(warnings.count, 5, gateway.standardError)
    }

    /// The retained page topics on `broker` now, and the index.
    static func retainedTree(_ broker: MosquittoBroker) async throws -> (index: JSONValue?, pages: Set<String>) {
        let reader = try await MQTTTestSubscriber.start(broker: broker, filter: "home/$gateway/tree/#")
        try await Task.sleep(for: .milliseconds(700))
        let held = reader.messages.filter { $0.retain && !$0.payload.isEmpty }
        await reader.stop()
        let index = held.first { $0.topic == "home/$gateway/tree" }.flatMap { try? JSONValue(parsing: $0.payload) }
        return (index, Set(held.map(\.topic).filter { $0 != "home/$gateway/tree" }))
    }

    /// `homemqtt run` on `config`, once it said `online`.
    func startGateway(_ config: String, broker: MosquittoBroker) async throws -> ChildProcess {
        let status = try await MQTTTestSubscriber.start(broker: broker, filter: "home/$gateway/status")
        TestCensus.record(.binary)
        let gateway = try ChildProcess(BinaryEndToEndTests.binary, ["run", "--config", config])
        addTeardownBlock { await gateway.terminate(grace: 2) }
        try await status.waitForMessage("online", timeout: 30) { !$0.retain && $0.string == "online" }
        await status.stop()
        return gateway
    }

    static func strings(_ value: JSONValue?) -> Set<String> {
        guard case .array(let list)? = value else { return [] }
        return Set(list.compactMap { if case .string(let text) = $0 { text } else { nil } })
    }

    /// Pages the tree no longer needs are cleared: when it shrinks while running, and at the
    /// next start, when it fits whole (the look at the broker finds the earlier run's pages).
    func testPagesNoLongerNeededAreCleared() async throws {
        let broker = try await MosquittoBroker.start(.init(extraConfiguration: ["max_packet_size 4096"]))
        addTeardownBlock { await broker.stop() }
        let first = try TemporaryDirectory(prefix: "homemqtt-pages")
        try Self.writeLamps(40, to: first.file("accessories"))
        let gateway = try await startGateway(
            try Self.writeConfig(
                in: first, port: broker.port, clientID: "homemqtt-pages", accessories: first.file("accessories")),
            broker: broker)
        let before = try await Self.retainedTree(broker)
        XCTAssertEqual(Self.strings(before.index?["pages"]), before.pages)
        XCTAssertGreaterThan(before.pages.count, 4)

        // Thirty lamps leave: fewer pages, and the index lists exactly those on the broker.
        let client = MQTTClient(configuration: broker.clientConfiguration())
        try await client.connect()
        let answers = try await MQTTTestSubscriber.start(broker: broker, filter: "home/$gateway/response/#")
        for number in 1...30 {
            let name = String(format: "Limit Lamp %03d", number)
            try await client.publish("home/$gateway/request/accessory/remove", #"{"accessory": "\#(name)"}"#)
        }
        let removed = try await answers.waitForMessages(count: 30, timeout: 20)
        XCTAssertTrue(removed.allSatisfy { $0.string.contains(#""status":"ok""#) }, "\(removed.map(\.string))")
        try await Task.sleep(for: .milliseconds(500))
        let shrunk = try await Self.retainedTree(broker)
        XCTAssertEqual(shrunk.index?["accessories"], .int(10))
        XCTAssertEqual(Self.strings(shrunk.index?["pages"]), shrunk.pages)
        XCTAssertLessThan(shrunk.pages.count, before.pages.count)
        await answers.stop()
        await client.disconnect()
        let status = await gateway.terminate(grace: 5)
        XCTAssertEqual(status, 0)

        // Another home of one lamp on the same base topic: its tree fits whole, and the pages
        // left by the run before are cleared as they arrive.
        let second = try TemporaryDirectory(prefix: "homemqtt-pages")
        try Self.writeLamps(1, to: second.file("accessories"))
        let small = try await startGateway(
            try Self.writeConfig(
                in: second, port: broker.port, clientID: "homemqtt-pages-2", accessories: second.file("accessories")),
            broker: broker)
        try await Task.sleep(for: .milliseconds(500))
        let whole = try await Self.retainedTree(broker)
        XCTAssertNil(whole.index?["paged"])
        XCTAssertNotNil(whole.index?["rooms"])
        XCTAssertEqual(whole.pages, [], "pages left on the broker")
        XCTAssertTrue(
            small.standardError.contains("clearing retained topics this gateway published earlier"), small.standardError
        )
    }

    /// Under 1,600 bytes no lamp's entry fits a page, and the index listing them does not fit
    /// either: no tree is left on the broker, the `tree` request gets `too-large`, each is said
    /// once in the log, and the lamps are served on one connection.
    func testATreeThatCannotFitIsRefusedWithAnAnswer() async throws {
        let broker = try await MosquittoBroker.start(.init(extraConfiguration: ["max_packet_size 1600"]))
        addTeardownBlock { await broker.stop() }
        let directory = try TemporaryDirectory(prefix: "homemqtt-refused")
        try Self.writeLamps(10, to: directory.file("accessories"))
        let gateway = try await startGateway(
            try Self.writeConfig(
                in: directory, port: broker.port, clientID: "homemqtt-refused",
                accessories: directory.file("accessories"),
                broker: ["protocol: 3.1.1", "max-packet-size: 1600"]),
            broker: broker)
        let held = try await Self.retainedTree(broker)
        XCTAssertNil(held.index)
        XCTAssertEqual(held.pages, [])

        let everything = try await MQTTTestSubscriber.start(broker: broker, filter: "home/#")
        let client = MQTTClient(configuration: broker.clientConfiguration())
        try await client.connect()
        try await client.publish("home/$gateway/request/tree", #"{"id":3}"#, qos: .atLeastOnce)
        try await client.publish("home/room-1/limit-lamp-001/lamp/brightness/set", "33", qos: .atLeastOnce)
        let tree = try await everything.waitForMessage("the tree answer") { $0.topic == "home/$gateway/response/tree" }
        let answer = try JSONValue(parsing: tree.payload)
        XCTAssertEqual(answer["status"], .string("error"), tree.string)
        XCTAssertEqual(answer["code"], .string("too-large"), tree.string)
        XCTAssertEqual(answer["id"], .int(3))
        let set = try await everything.waitForMessage("the set's result") { $0.topic.hasSuffix("/brightness/result") }
        XCTAssertTrue(set.string.contains(#""status":"ok""#), set.string)

        let log = gateway.standardError
        for line in ["accessories too large for a page", "the tree's index does not fit"] {
            XCTAssertEqual(log.components(separatedBy: line).count - 1, 1, "'\(line)':\n\(log)")
        }
        XCTAssertEqual(broker.log.components(separatedBy: "as homemqtt-refused").count - 1, 1, broker.log)
        await everything.stop()
        await client.disconnect()
    }

    /// MQTT 3.1.1 without `broker.max-packet-size`: the broker closes the connection at the
    /// first packet over its limit; the gateway learns the limit from it and reconnects once
    /// (`BrokerRefusalTests` follows it through). The log says what it learned, once, and names
    /// the setting.
    func testAnUntoldLimitOnMQTT311IsNamedInTheLog() async throws {
        let broker = try await MosquittoBroker.start(.init(extraConfiguration: ["max_packet_size 65536"]))
        addTeardownBlock { await broker.stop() }
        let directory = try TemporaryDirectory(prefix: "homemqtt-untold")
        try Self.writeLamps(Self.lamps, to: directory.file("accessories"))
        let config = try Self.writeConfig(
            in: directory, port: broker.port, clientID: "homemqtt-untold", accessories: directory.file("accessories"),
            broker: ["protocol: 3.1.1"])
        TestCensus.record(.binary)
        let gateway = try ChildProcess(BinaryEndToEndTests.binary, ["run", "--config", config])
        addTeardownBlock { await gateway.terminate(grace: 2) }
        let hint = "set broker.max-packet-size"
        try await waitUntil("the hint", timeout: 30, pollInterval: 0.2) { gateway.standardError.contains(hint) }
        try await Task.sleep(for: .seconds(3))
        let log = gateway.standardError
        XCTAssertEqual(log.components(separatedBy: hint).count - 1, 1, log)
        XCTAssertEqual(broker.log.components(separatedBy: "as homemqtt-untold").count - 1, 2, broker.log)
    }

    /// Under 600 bytes each lamp's `$info` (about 700) cannot go: none is sent, the first is
    /// logged with its topic, size and limit, the others only counted and summed up at the stop;
    /// the characteristics' topics and the sets go on.
    func testDocumentsThatCannotFitAreLoggedOnceAndCounted() async throws {
        let broker = try await MosquittoBroker.start(.init(extraConfiguration: ["max_packet_size 600"]))
        addTeardownBlock { await broker.stop() }
        let directory = try TemporaryDirectory(prefix: "homemqtt-info")
        try Self.writeLamps(20, to: directory.file("accessories"))
        let gateway = try await startGateway(
            try Self.writeConfig(
                in: directory, port: broker.port, clientID: "homemqtt-info", accessories: directory.file("accessories"),
                broker: ["protocol: 3.1.1", "max-packet-size: 600"]),
            broker: broker)
        let lamp = "home/room-1/limit-lamp-001"
        let held = try await MQTTTestSubscriber.start(broker: broker, filter: lamp + "/#")
        try await held.waitForMessage("the lamp's brightness") { $0.topic == lamp + "/lamp/brightness/state" }
        XCTAssertFalse(held.messages.contains { $0.topic == lamp + "/$info" })
        await held.stop()
        let status = await gateway.terminate(grace: 5)
        XCTAssertEqual(status, 0)
        let log = gateway.standardError
        let refused = log.split(separator: "\n").filter { $0.contains("larger than the broker's maximum packet size") }
        XCTAssertEqual(refused.count, 1, log)
        XCTAssertTrue(refused.first?.contains("$info") ?? false, log)
        XCTAssertTrue(refused.first?.contains("(600)") ?? false, log)
        XCTAssertTrue(log.contains("count=19 error=packet-too-large"), log)
        XCTAssertEqual(broker.log.components(separatedBy: "as homemqtt-info").count - 1, 1, broker.log)
    }
}
