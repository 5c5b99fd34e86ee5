import Foundation
import HomeModel
import MQTT
import TestSupport
import XCTest

/// The real gateway against brokers that refuse what it publishes without having said so: a
/// packet limit it learns (no `broker.max-packet-size` set). At most 3 connections in all, the
/// whole tree readable, a set answered. These stay on the binary and mosquitto: the limit is
/// learned by the MQTT client from mosquitto's refusal (MQTT 5: a PUBACK with "packet too large"
/// for `message_size_limit`; 3.1.1: the connection closed at the packet), which the memory
/// broker does not model. The deep request, under a level limit the gateway is told, moved to
/// `BrokerRefusalTests` in GatewayTests, on the rigs.
final class BrokerRefusalTests: XCTestCase {
    static let defaultHome = HAPPeer.repositoryRoot.appendingPathComponent("Config/accessories").path

    func testMQTT311MaxPacketSizeWithTheDefaultHome() async throws {
        try await runUntold(broker: "max_packet_size 4096", mqtt311: true, lamps: nil)
    }

    func testMQTT311MaxPacketSizeWith100Lamps() async throws {
        try await runUntold(broker: "max_packet_size 4096", mqtt311: true, lamps: 100)
    }

    /// The default home's tree (about 23 KB) fits under 64 KB: whole, nothing refused or learned.
    func testMQTT5MessageSizeLimitWithTheDefaultHome() async throws {
        try await runUntold(broker: "message_size_limit 65536", mqtt311: false, lamps: nil, refuses: false)
    }

    func testMQTT5MessageSizeLimitWith100Lamps() async throws {
        try await runUntold(broker: "message_size_limit 65536", mqtt311: false, lamps: 100)
    }

    /// The number of times `clientID` connected, from the broker's log.
    static func connections(_ broker: MosquittoBroker, _ clientID: String) -> Int {
        broker.log.components(separatedBy: " as \(clientID) ").count - 1
    }

    /// The gateway on a broker that limits what it takes and does not say so: the limit is
    /// learned and logged once with the key that states it; the tree is read whole from its
    /// pages (every accessory, none omitted); a set is answered; at most 3 connections.
    func runUntold(broker extra: String, mqtt311: Bool, lamps: Int?, refuses: Bool = true) async throws {
        let broker = try await MosquittoBroker.start(.init(extraConfiguration: [extra]))
        addTeardownBlock { await broker.stop() }
        let directory = try TemporaryDirectory(prefix: "homemqtt-untold")
        var accessories = Self.defaultHome
        if let lamps {
            accessories = directory.file("accessories")
            try PacketLimitTests.writeLamps(lamps, to: accessories)
        }
        let clientID = "homemqtt-untold"
        let config = try PacketLimitTests.writeConfig(
            in: directory, port: broker.port, clientID: clientID, accessories: accessories,
            broker: mqtt311 ? ["protocol: 3.1.1"] : [])
        let everything = try await MQTTTestSubscriber.start(broker: broker, filter: "home/#")
        TestCensus.record(.binary)
        let gateway = try ChildProcess(BinaryEndToEndTests.binary, ["run", "--config", config])
        addTeardownBlock { await gateway.terminate(grace: 2) }
        let hint = "set broker.max-packet-size"
        try await everything.waitForMessage("online", timeout: 30) {
            $0.topic == "home/$gateway/status" && $0.string == "online"
        }
        if refuses {
            try await waitUntil("the learned limit in the log", timeout: 30) { gateway.standardError.contains(hint) }
        }

        // The tree as retained now: the index and every page it lists, or the whole tree.
        let reader = try await MQTTTestSubscriber.start(broker: broker, filter: "home/$gateway/tree/#")
        let indexMessage = try await reader.waitForMessage("the tree", timeout: 30) { message in
            message.topic == "home/$gateway/tree" && !message.payload.isEmpty
                && (!refuses || (try? JSONValue(parsing: message.payload))?["paged"] == .bool(true))
        }
        let index = try JSONValue(parsing: indexMessage.payload)
        XCTAssertNil(index["omitted"], indexMessage.string)
        let topics = refuses ? PacketLimitTests.strings(index["pages"]) : ["home/$gateway/tree"]
        XCTAssertEqual(topics.count > 1, refuses, indexMessage.string)
        var services: [String: Int] = [:]
        var characteristicTopics: [String] = []
        for topic in topics {
            let page = try await reader.waitForMessage(topic) { $0.topic == topic && !$0.payload.isEmpty }
            if refuses { XCTAssertLessThanOrEqual(page.payload.count, 4096, topic) }
            guard case .array(let rooms)? = try JSONValue(parsing: page.payload)["rooms"] else {
                return XCTFail("no rooms on \(topic)")
            }
            for room in rooms {
                guard case .array(let list)? = room["accessories"] else { continue }
                for accessory in list {
                    guard case .string(let id)? = accessory["id"], case .array(let parts)? = accessory["services"]
                    else { return XCTFail("an accessory without id or services on \(topic)") }
                    services[id, default: 0] += parts.count
                    for service in parts {
                        guard case .array(let characteristics)? = service["characteristics"] else { continue }
                        for c in characteristics {
                            if case .string(let t)? = c["topic"] { characteristicTopics.append(t) }
                        }
                    }
                }
            }
        }
        await reader.stop()
        if refuses { XCTAssertEqual(index["accessories"], .int(Int64(services.count))) }
        if let lamps { XCTAssertEqual(services.count, lamps) } else { XCTAssertEqual(services.count, 13) }
        // Every characteristic of the home is in the pages: as many as have a retained `meta`.
        let metas = Set(
            everything.messages.filter { $0.topic.hasSuffix("/meta") && !$0.payload.isEmpty }
                .map { String($0.topic.dropLast("/meta".count)) })
        XCTAssertEqual(Set(characteristicTopics), metas)

        // A set, answered.
        guard let brightness = characteristicTopics.first(where: { $0.hasSuffix("/brightness") }) else {
            return XCTFail("no brightness in the tree")
        }
        let client = MQTTClient(configuration: broker.clientConfiguration())
        try await client.connect()
        try await client.publish(brightness + "/set", #"{"value": 37, "id": 5}"#, qos: .atLeastOnce)
        let answer = try await everything.waitForMessage("the set's answer", timeout: 15) {
            $0.topic == brightness + "/result"
        }
        XCTAssertEqual(try JSONValue(parsing: answer.payload)["status"], .string("ok"), answer.string)
        // The health report counts the refusal.
        try await client.publish("home/$gateway/request/health", "{}", qos: .atLeastOnce)
        let health = try await everything.waitForMessage("the health report") {
            $0.topic == "home/$gateway/response/health"
        }
        let counts = try JSONValue(parsing: health.payload)["data"]?["counts"]
        XCTAssertEqual(counts?["publishes-refused"], .int(refuses ? 1 : 0), health.string)
        await client.disconnect()
        await everything.stop()

        let connections = Self.connections(broker, clientID)
        XCTAssertLessThanOrEqual(connections, 3, broker.log)
        XCTAssertEqual(connections, mqtt311 ? 2 : 1, broker.log)
        let status = await gateway.terminate(grace: 5)
        XCTAssertEqual(status, 0)
        let log = gateway.standardError
        XCTAssertEqual(log.components(separatedBy: hint).count - 1, refuses ? 1 : 0, log)
        XCTAssertFalse(log.contains("closed the connection 3 times"), log)
    }
}
