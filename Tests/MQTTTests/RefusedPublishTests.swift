import Foundation
import MQTT
import Testing
import TestSupport

/// What a broker refuses never brings the connection down twice: a topic deeper than the broker
/// takes is never sent; a packet over a limit the broker never announced costs one connection
/// (MQTT 3.1.1) or one PUBACK (MQTT 5), and the client learns the limit from it; the message the
/// connection was lost for is not sent again at the reconnect.
@Suite struct RefusedPublishTests {
    /// `levels` levels: `a/a/…/a`.
    static func topic(levels: Int, prefix: String = "deep") -> String {
        ([prefix] + Array(repeating: "a", count: levels - 1)).joined(separator: "/")
    }

    /// The number of times `clientID` connected, from the broker's log.
    static func connections(_ broker: MosquittoBroker, _ clientID: String) -> Int {
        broker.log.components(separatedBy: " as \(clientID) ").count - 1
    }

    @Test(arguments: [MQTTProtocolVersion.v311, .v5])
    func aTopicDeeperThanTheBrokerTakesIsNeverSent(version: MQTTProtocolVersion) async throws {
        try await MosquittoBroker.with { broker in
            let subscriber = try await MQTTTestSubscriber.start(broker: broker, filter: "after")
            let client = try await connectedClient(broker, clientID: "deep-\(version)") { $0.protocolVersion = version }
            // mosquitto drops a client at 202 levels (201 is fine); the default limit is its own.
            try await client.publish(Self.topic(levels: 201), "ok", qos: .atLeastOnce)
            for qos in [MQTTQoS.atMostOnce, .atLeastOnce] {
                let error = await expectMQTTError { try await client.publish(Self.topic(levels: 202), "x", qos: qos) }
                #expect(error?.code == .invalidTopic)
                #expect(error?.message.contains("202 levels") == true, "\(String(describing: error))")
                #expect(error?.message.contains("a/a/a/a/a/a") == false, "the topic's shape, not the topic")
                #expect(client.publishWithoutWaitingThrows(Self.topic(levels: 202)))
            }
            try await client.publish("after", "still here", qos: .atLeastOnce)
            try await subscriber.waitForMessage { $0.topic == "after" }
            #expect(Self.connections(broker, "deep-\(version)") == 1, "\(broker.log)")
            #expect(!broker.log.contains("disconnected due to"), "\(broker.log)")
            await client.disconnect()
            await subscriber.stop()
        }
    }

    @Test func aConfiguredLevelLimitHolds() async throws {
        try await MosquittoBroker.with { broker in
            let client = try await connectedClient(broker) { $0.maximumTopicLevels = 128 }
            #expect(client.brokerLimits.maximumTopicLevels == 128)
            try await client.publish(Self.topic(levels: 128), "ok", qos: .atLeastOnce)
            let error = await expectMQTTError {
                try await client.publish(Self.topic(levels: 150), "x", qos: .atLeastOnce)
            }
            #expect(error?.code == .invalidTopic)
            #expect(error?.message.contains("broker.max-topic-levels") == true)
            #expect(client.connectionState == .connected)
            await client.disconnect()
        }
    }

    /// MQTT 3.1.1 and mosquitto's `max_packet_size 4096`, which 3.1.1 cannot announce: a QoS 1
    /// publish of 20 KB drops the connection once; the client learns the limit (4096, the
    /// largest kept being smaller), drops that message from libmosquitto's queue, reconnects once,
    /// and what was queued behind it still arrives. The next such publish is refused unsent.
    @Test func anUnannouncedPacketLimitCostsOneConnectionAndIsLearned() async throws {
        try await MosquittoBroker.with(.init(extraConfiguration: ["max_packet_size 4096"])) { broker in
            let subscriber = try await MQTTTestSubscriber.start(broker: broker, filter: "limit/#")
            let client = try await connectedClient(broker, clientID: "untold") { $0.protocolVersion = .v311 }
            let learned = client.learnedLimits()
            try await client.publish("limit/small", payload: Array(repeating: 0x61, count: 1000), qos: .atLeastOnce)
            try await subscriber.waitForMessage { $0.topic == "limit/small" }
            try await client.publish("limit/large", payload: Array(repeating: 0x62, count: 20_000), qos: .atLeastOnce)
            try await client.publish("limit/behind", "behind", qos: .atLeastOnce, retain: true)
            var iterator = learned.makeAsyncIterator()
            let limit = await iterator.next()
            #expect(limit?.limits.learnedMaximumPacketSize == 4096)
            #expect(limit?.refusedPacketSize ?? 0 > 20_000)
            // Told the limit, the client has made its handle anew and not yet connected it (it
            // waits its reconnect delay): a retained publish now must keep its flag too.
            try await client.publish("limit/window", "window", qos: .atLeastOnce, retain: true)
            try await subscriber.waitForMessage(timeout: 15) { $0.topic == "limit/behind" }
            #expect(client.brokerLimits.maximumPacketSize == 4096)
            let error = await expectMQTTError {
                try await client.publish(
                    "limit/large", payload: Array(repeating: 0x63, count: 20_000), qos: .atLeastOnce)
            }
            #expect(error?.code == .packetTooLarge)
            try await client.publish("limit/last", "last", qos: .atLeastOnce)
            try await subscriber.waitForMessage { $0.topic == "limit/last" }
            // Give libmosquitto a moment to send anything still queued: nothing more may drop it.
            try await Task.sleep(for: .milliseconds(300))
            #expect(Self.connections(broker, "untold") == 2, "\(broker.log)")
            #expect(!subscriber.messages.contains { $0.topic == "limit/large" })
            #expect(client.refusedPublishCount == 1)
            // The message sent again on the new handle kept its retain flag.
            let later = try await MQTTTestSubscriber.start(broker: broker, filter: "limit/#")
            try await later.waitForMessage { $0.topic == "limit/behind" && $0.retain }
            try await later.waitForMessage { $0.topic == "limit/window" && $0.retain }
            await later.stop()
            await client.disconnect()
            await subscriber.stop()
        }
    }

    /// MQTT 5 and mosquitto's `message_size_limit`: the broker keeps the connection and says
    /// "packet too large" in the PUBACK; the client learns from it.
    @Test func aPacketTooLargePUBACKTeachesTheLimit() async throws {
        try await MosquittoBroker.with(.init(extraConfiguration: ["message_size_limit 65536"])) { broker in
            let client = try await connectedClient(broker, clientID: "sizelimit")
            let learned = client.learnedLimits()
            try await client.publish("limit/small", payload: Array(repeating: 0x61, count: 5000), qos: .atLeastOnce)
            try await client.publish("limit/large", payload: Array(repeating: 0x62, count: 70_000), qos: .atLeastOnce)
            var iterator = learned.makeAsyncIterator()
            let limit = await iterator.next()
            // The largest kept (5 KB) is more than 4096: the learned limit is what was kept.
            #expect(limit?.limits.learnedMaximumPacketSize == limit?.largestKeptPacketSize)
            #expect((5000..<5100).contains(limit?.largestKeptPacketSize ?? 0))
            #expect(client.refusedPublishCount == 1)
            #expect(Self.connections(broker, "sizelimit") == 1, "\(broker.log)")
            await client.disconnect()
        }
    }

    @Test func limitsAreLearnedFromWhatWasKept() {
        #expect(LearnedPacketLimit.limit(refused: 163_456, kept: 698) == 4096)
        #expect(LearnedPacketLimit.limit(refused: 163_456, kept: 60_000) == 60_000)
        #expect(LearnedPacketLimit.limit(refused: 4000, kept: 700) == 2000)
        #expect(LearnedPacketLimit.limit(refused: 700, kept: 700) == nil)
    }

    @Test func topicsAreShownByTheirShape() {
        #expect(MQTTTopicShape.describe("home/a/b") == "home/a/b")
        #expect(
            MQTTTopicShape.describe(Self.topic(levels: 202, prefix: "home")) == "home/a/a/…/a (202 levels, 406 bytes)")
        #expect(MQTTTopicShape.describe("home/\u{1B}]0;owned\u{07}/x") == "home/\\u{1B}]0;owned\\u{07}/x")
        #expect(MQTTTopicShape.levels("a") == 1)
        #expect(MQTTTopicShape.levels("a//b/") == 4)
    }
}

extension MQTTClient {
    /// Whether `publishWithoutWaiting` refuses `topic` at once.
    func publishWithoutWaitingThrows(_ topic: String) -> Bool {
        do {
            _ = try publishWithoutWaiting(topic, payload: [0x78], qos: .atLeastOnce)
            return false
        } catch {
            return error.code == .invalidTopic
        }
    }
}
