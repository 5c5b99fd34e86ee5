import Foundation
import HomeModel
import MQTT
import TestSupport
import XCTest

/// Brokers that refuse what the gateway publishes, on a rig (the memory broker by default,
/// mosquitto too under CI): a request whose answer topic the broker would refuse, and a packet
/// limit the broker never told (no `broker.max-packet-size`: mosquitto's `max_packet_size` under
/// MQTT 3.1.1 closes the connection at the packet; its `message_size_limit` under MQTT 5 answers
/// "packet too large" in the PUBACK), which the gateway's MQTT client learns (the memory
/// transport by the same rule, `MemoryTransportUntoldParityTests`). Moved from EndToEndTests,
/// every assertion kept: mosquitto's log of connections and of clients it dropped is the rig's
/// count of them, the binary's exit status the service group's clean stop, its standard error
/// the rig's log.
final class BrokerRefusalTests: RigTestCase {
    /// A request on MQTT whose answer topic would be deeper than the broker takes
    /// (`broker.max-topic-levels: 128`, as EMQX): mosquitto takes the 150-level request itself,
    /// so the gateway must not answer on a topic made from it. The requester gets the error on
    /// `$gateway/error` and on its MQTT 5 Response Topic; one connection; a later set answered.
    func testADeepRequestUnderALevelLimitIsAnsweredWithoutLosingTheBroker() async throws {
        await onEveryRig(configure: { config in
            PacketLimitTests.config(&config)
            config.mqtt.maximumTopicLevels = 128
        }) { gw in
            let everything = try await gw.subscriber("#")
            let op = Array(repeating: "a", count: 147).joined(separator: "/")
            let request = "home/$gateway/request/" + op
            XCTAssertEqual(MQTTTopicShape.levels(request), 150)
            var properties = MQTTPublishProperties()
            properties.responseTopic = "client/replies/deep"
            properties.correlationData = Array("c-1".utf8)
            try await gw.publish(request, #"{"id": 9}"#, properties: properties)
            let error = try await everything.seen.waitFor("the error report") { $0.topic == "home/$gateway/error" }
            let report = try JSONValue(parsing: error.payload)
            XCTAssertEqual(report["code"], .string("unknown-topic"), error.string)
            XCTAssertEqual(report["topic"], .string(request))
            let reply = try await everything.seen.waitFor("the answer on the response topic") {
                $0.topic == "client/replies/deep"
            }
            let answer = try JSONValue(parsing: reply.payload)
            XCTAssertEqual(answer["status"], .string("error"), reply.string)
            XCTAssertEqual(answer["id"], .int(9))
            XCTAssertEqual(reply.properties.correlationData, Array("c-1".utf8))
            XCTAssertFalse(everything.seen.elements.contains { $0.topic.hasPrefix("home/$gateway/response/a/") })

            let light = "home/garage/garage-door-opener/garage-light/brightness"
            try await gw.publish(light + "/set", "44")
            let set = try await everything.seen.waitFor("the set's answer") { $0.topic == light + "/result" }
            XCTAssertEqual(try JSONValue(parsing: set.payload)["status"], .string("ok"), set.string)
            await everything.close()
            XCTAssertEqual(gw.connections(), 1)
            XCTAssertEqual(gw.connectionsDropped, [])
            let stopped = await gw.stopGateway()
            XCTAssertNil(stopped, "the gateway did not stop cleanly")
        }
    }

    func testMQTT311MaxPacketSizeWithTheDefaultHome() async throws {
        try await runUntold(broker: .init(maximumPacketSize: 4096), mqtt311: true, lamps: nil)
    }

    func testMQTT311MaxPacketSizeWith100Lamps() async throws {
        try await runUntold(broker: .init(maximumPacketSize: 4096), mqtt311: true, lamps: 100)
    }

    /// The default home's tree (about 23 KB) fits under 64 KB: whole, nothing refused or learned.
    func testMQTT5MessageSizeLimitWithTheDefaultHome() async throws {
        try await runUntold(broker: .init(messageSizeLimit: 65536), mqtt311: false, lamps: nil, refuses: false)
    }

    func testMQTT5MessageSizeLimitWith100Lamps() async throws {
        try await runUntold(broker: .init(messageSizeLimit: 65536), mqtt311: false, lamps: 100)
    }

    /// The gateway on a broker that limits what it takes and does not say so: the limit is
    /// learned and logged once with the key that states it; the tree is read whole from its
    /// pages (every accessory, none omitted, each page within 4096 bytes when refused); every
    /// characteristic with a retained `meta` is in it; a set is answered; the health report
    /// counts the refusal; at most 3 connections (2 under MQTT 3.1.1, 1 under MQTT 5); a clean stop.
    func runUntold(broker setup: Rig.BrokerSetup, mqtt311: Bool, lamps: Int?, refuses: Bool = true) async throws {
        var home = Rig.shippedAccessories
        if let lamps {
            let directory = try TemporaryDirectory(prefix: "homemqtt-untold")
            addTeardownBlock { _ = directory }
            try PacketLimitTests.writeLamps(lamps, to: directory.path)
            home = directory.url
        }
        await onEveryRig(
            broker: setup, timeout: 30,
            configure: mqtt311 ? PacketLimitTests.mqtt311(maximumPacketSize: nil) : PacketLimitTests.config,
            accessories: home
        ) { gw in
            let hint = "set broker.max-packet-size"
            if refuses {
                try await waitUntil("the learned limit in the log", timeout: 30) { gw.log.text.contains(hint) }
            }

            // The tree as retained now: the index and every page it lists, or the whole tree.
            let reader = try await gw.subscriber("home/$gateway/tree/#")
            let indexMessage = try await reader.seen.waitFor("the tree", timeout: 30) { message in
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
                let page = try await reader.seen.waitFor(topic) { $0.topic == topic && !$0.payload.isEmpty }
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
            await reader.close()
            if refuses { XCTAssertEqual(index["accessories"], .int(Int64(services.count))) }
            if let lamps { XCTAssertEqual(services.count, lamps) } else { XCTAssertEqual(services.count, 13) }
            // Every characteristic of the home is in the pages: as many as have a retained `meta`.
            let metas = Set(
                gw.seen.elements.filter { $0.topic.hasSuffix("/meta") && !$0.payload.isEmpty }
                    .map { String($0.topic.dropLast("/meta".count)) })
            XCTAssertEqual(Set(characteristicTopics), metas)

            // A set, answered.
            guard let brightness = characteristicTopics.first(where: { $0.hasSuffix("/brightness") }) else {
                return XCTFail("no brightness in the tree")
            }
            try await gw.publish(brightness + "/set", #"{"value": 37, "id": 5}"#)
            let answer = try await gw.seen.waitFor("the set's answer", timeout: 15) {
                $0.topic == brightness + "/result"
            }
            XCTAssertEqual(try JSONValue(parsing: answer.payload)["status"], .string("ok"), answer.string)
            // The health report counts the refusal.
            try await gw.publish("home/$gateway/request/health", "{}")
            let health = try await gw.seen.waitFor("the health report") {
                $0.topic == "home/$gateway/response/health"
            }
            let counts = try JSONValue(parsing: health.payload)["data"]?["counts"]
            XCTAssertEqual(counts?["publishes-refused"], .int(refuses ? 1 : 0), health.string)

            let connections = gw.connections()
            XCTAssertLessThanOrEqual(connections, 3, gw.brokerLog)
            XCTAssertEqual(connections, mqtt311 ? 2 : 1, gw.brokerLog)
            let stopped = await gw.stopGateway()
            XCTAssertNil(stopped, "the gateway did not stop cleanly")
            let log = gw.log.text
            XCTAssertEqual(log.components(separatedBy: hint).count - 1, refuses ? 1 : 0, log)
            XCTAssertFalse(log.contains("closed the connection 3 times"), log)
        }
    }
}
