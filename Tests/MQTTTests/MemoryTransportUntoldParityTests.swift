import Foundation
import MQTT
import Testing
import TestSupport

/// A limit the broker never told, against mosquitto through `MQTTClient` and against the memory
/// broker through `MemoryTransport`: the same script must learn the same limit from the same
/// refusal, count the same refusals, make the same connections and deliver the same messages.
/// mosquitto's `max_packet_size` under MQTT 3.1.1 closes the connection at a larger packet; its
/// `message_size_limit` under MQTT 5 drops a larger payload, at QoS 1 with a PUBACK saying
/// "packet too large". Both transports learn by `MQTTBrokerLimits.learn`.
@Suite("Memory transport against mosquitto: untold limits")
struct MemoryTransportUntoldParityTests {
    /// What a client saw of a limit it was not told.
    struct UntoldSeen: Equatable {
        var learned: Int?
        var refusedPacketSize: Int?
        var largestKept: Int?
        var refusedPublishCount: Int
        var connections: Int
        /// What another client received on `limit/#`: topic and payload size.
        var received: [String]
        /// The code a second publish as large as the refused one threw (nil: sent).
        var again: MQTTError.Code?
        var connected: Bool
    }

    /// `client` publishes 1,000 bytes at QoS 1, (`quietFirst`) `large` bytes at QoS 0, which a
    /// payload limit drops without a word, then `large` bytes at QoS 1, which the broker refuses,
    /// and a message behind it; the limit learned is awaited, then the large one published
    /// again and a last marker.
    static func script(
        _ client: any MQTTTransport, _ subscriber: any MQTTTransport, large: Int, quietFirst: Bool,
        connections: () -> Int
    ) async throws -> UntoldSeen {
        let seen = MessageCollector(subscriber.messages())
        try await subscriber.subscribe("limit/#", qos: .exactlyOnce)
        let learnedLimits = client.learnedLimits()
        try await client.publish("limit/small", payload: Array(repeating: 0x61, count: 1000), qos: .atLeastOnce)
        try await seen.waitFor("the small one", timeout: 10) { $0.topic == "limit/small" }
        if quietFirst {
            try await client.publish("limit/quiet", payload: Array(repeating: 0x71, count: large), qos: .atMostOnce)
        }
        try await client.publish("limit/large", payload: Array(repeating: 0x62, count: large), qos: .atLeastOnce)
        try await client.publish("limit/behind", payload: Array("behind".utf8), qos: .atLeastOnce)
        var iterator = learnedLimits.makeAsyncIterator()
        let learned = await iterator.next()
        try await seen.waitFor("the one behind", timeout: 15) { $0.topic == "limit/behind" }
        var again: MQTTError.Code?
        do {
            try await client.publish("limit/large", payload: Array(repeating: 0x63, count: large), qos: .atLeastOnce)
        } catch {
            again = error.code
        }
        try await client.publish("limit/last", payload: Array("last".utf8), qos: .atLeastOnce)
        try await seen.waitFor("the last one", timeout: 15) { $0.topic == "limit/last" }
        await seen.cancel()
        return UntoldSeen(
            learned: learned?.limits.learnedMaximumPacketSize, refusedPacketSize: learned?.refusedPacketSize,
            largestKept: learned?.largestKeptPacketSize, refusedPublishCount: client.refusedPublishCount,
            connections: connections(),
            received: seen.elements.map { "\($0.topic) \($0.payload.count) bytes" }, again: again,
            connected: client.connectionState == .connected)
    }

    /// Runs the script on mosquitto configured with `line`, then on a memory broker so limited.
    static func both(
        mosquitto line: String, memory broker: MemoryBroker, version: MQTTProtocolVersion, large: Int
    ) async throws -> (live: UntoldSeen, memory: UntoldSeen) {
        let mosquitto = try await MosquittoBroker.start(.init(extraConfiguration: [line]))
        let client = try await connectedClient(mosquitto, clientID: "untold") { $0.protocolVersion = version }
        let subscriber = try await connectedClient(mosquitto, clientID: "untold-sub")
        let live = try await script(client, subscriber, large: large, quietFirst: version == .v5) {
            mosquitto.log.components(separatedBy: " as untold ").count - 1
        }
        await client.disconnect()
        await subscriber.disconnect()
        await mosquitto.stop()

        var configuration = MQTTConfiguration()
        configuration.clientID = "untold"
        configuration.protocolVersion = version
        let transport = broker.transport(configuration: configuration)
        let memorySubscriber = broker.transport()
        transport.connect()
        memorySubscriber.connect()
        let memory = try await script(transport, memorySubscriber, large: large, quietFirst: version == .v5) {
            broker.connections(of: "untold")
        }
        transport.disconnect()
        memorySubscriber.disconnect()
        return (live, memory)
    }

    /// mosquitto's `max_packet_size 4096` to an MQTT 3.1.1 client, which cannot be told it: the
    /// large publish costs a connection, the limit learned is 4096 (the largest kept being
    /// smaller), the message behind it still arrives, and the next large one is refused unsent.
    @Test func aPacketLimitUntoldUnderMQTT311() async throws {
        var limits = MQTTBrokerLimits()
        limits.brokerMaximumPacketSize = 4096
        let (live, memory) = try await Self.both(
            mosquitto: "max_packet_size 4096", memory: MemoryBroker(limits: limits), version: .v311, large: 20_000)
        #expect(memory == live)
        #expect(live.learned == 4096)
        #expect(live.refusedPacketSize ?? 0 > 20_000)
        #expect(live.refusedPublishCount == 1)
        #expect(live.connections == 2)
        #expect(live.again == .packetTooLarge)
        #expect(!live.received.contains { $0.hasPrefix("limit/large") }, "\(live.received)")
        #expect(live.received.contains("limit/last 4 bytes"), "\(live.received)")
    }

    /// mosquitto's `message_size_limit 65536` to an MQTT 5 client: the connection kept, a PUBACK
    /// "packet too large", the limit learned from it (4096, the largest kept being smaller); a
    /// QoS 0 one as large before it dropped without a word, neither counted nor learned from.
    @Test func aMessageSizeLimitUnderMQTT5() async throws {
        let (live, memory) = try await Self.both(
            mosquitto: "message_size_limit 65536", memory: MemoryBroker(messageSizeLimit: 65536), version: .v5,
            large: 70_000)
        #expect(memory == live)
        #expect(live.learned == 4096)
        #expect(live.refusedPublishCount == 1)
        #expect(live.connections == 1)
        #expect(live.again == .packetTooLarge)
        #expect(!live.received.contains { $0.hasPrefix("limit/large") || $0.hasPrefix("limit/quiet") })
        #expect(live.connected)
    }
}
