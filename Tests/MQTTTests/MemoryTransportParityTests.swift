import Foundation
import MQTT
import Synchronization
import Testing
import TestSupport

/// The memory broker is only worth its tests while it does what mosquitto does: one script of
/// what the gateway relies on (retained messages on subscribe, a marker of its own back under
/// No Local, Retain As Published, wildcards, a retained clear), run against both, must see the
/// same messages.
@Suite("Memory transport against mosquitto")
struct MemoryTransportParityTests {
    /// What a client saw: topic, text, retain flag and content type.
    struct Seen: Hashable, Comparable, CustomStringConvertible {
        var topic: String
        var text: String
        var retain: Bool
        var contentType: String?

        init(_ message: MQTTMessage) {
            (topic, text, retain, contentType) =
                (message.topic, message.string, message.retain, message.properties.contentType)
        }

        static func < (a: Seen, b: Seen) -> Bool { (a.topic, a.text) < (b.topic, b.text) }
        var description: String { "\(topic)=\(text)\(retain ? " (retained)" : "")" }
    }

    struct Transcript: Equatable {
        /// The gateway's start-up look: the retained messages (in any order), then its marker.
        var retained: [Seen] = []
        var marker: Seen?
        /// Live messages on its request filters, in order.
        var live: [Seen] = []
        /// What a new subscriber gets retained after all that (in any order).
        var later: [Seen] = []
    }

    /// Makes a connected client; `gateway` gives it the gateway's No Local and Retain As Published.
    typealias Connect = @Sendable (_ gateway: Bool) async throws -> any MQTTTransport

    static func script(_ connect: Connect) async throws -> Transcript {
        let other = try await connect(false)
        let gateway = try await connect(true)
        let seen = MessageCollector(gateway.messages())
        try await gateway.subscribe("sync/#")
        /// Waits for `other`'s earlier publishes to have reached the broker: they go in order.
        func sync(_ collector: MessageCollector, _ tag: String) async throws {
            try await other.publish("sync/other", payload: Array(tag.utf8), qos: .atLeastOnce)
            try await collector.waitFor("sync \(tag)", timeout: 5) { $0.topic == "sync/other" && $0.string == tag }
        }
        let text = MQTTPublishProperties(contentType: "text/plain", isUTF8Text: true)
        try await other.publish("t/a", payload: Array("1".utf8), qos: .atLeastOnce, retain: true, properties: text)
        try await other.publish("t/b/c", payload: Array("2".utf8), qos: .atLeastOnce, retain: true)
        try await other.publish("t/gone", payload: Array("3".utf8), qos: .atLeastOnce, retain: true)
        try await other.publish("t/gone", payload: [], qos: .atLeastOnce, retain: true)
        try await other.publish("t/live", payload: Array("4".utf8), qos: .atLeastOnce)
        try await sync(seen, "setup")

        var transcript = Transcript()
        seen.clear()
        try await gateway.subscribe([("t/#", .atLeastOnce)], ownMessages: true)
        try await gateway.publish("t/sync", payload: Array("marker".utf8), qos: .atLeastOnce)
        try await seen.waitFor("the marker", timeout: 5) { $0.topic == "t/sync" }
        transcript.retained = seen.elements.filter { $0.topic != "t/sync" }.map(Seen.init).sorted()
        transcript.marker = seen.elements.first { $0.topic == "t/sync" }.map(Seen.init)

        try await gateway.unsubscribe("t/#")
        try await gateway.subscribe([("t/+/set", .atLeastOnce), ("t/x/+", .atLeastOnce)])
        seen.clear()
        try await gateway.publish("t/x/set", payload: Array("own".utf8), qos: .atLeastOnce)
        try await other.publish("t/x/set", payload: Array("p".utf8), qos: .atLeastOnce, retain: true)
        try await other.publish("t/y/set", payload: Array("q".utf8), qos: .atLeastOnce)
        try await other.publish("t/a/b/set", payload: Array("deep".utf8), qos: .atLeastOnce)
        try await sync(seen, "live")
        transcript.live = seen.elements.filter { !$0.topic.hasPrefix("sync/") }.map(Seen.init)

        let late = try await connect(false)
        let lateSeen = MessageCollector(late.messages())
        try await late.subscribe("sync/#")
        try await late.subscribe("t/#")
        try await sync(lateSeen, "late")
        transcript.later = lateSeen.elements.filter { !$0.topic.hasPrefix("sync/") }.map(Seen.init).sorted()
        await seen.cancel()
        await lateSeen.cancel()
        return transcript
    }

    @Test func theMemoryBrokerSeesWhatMosquittoSees() async throws {
        let mosquitto = try await MosquittoBroker.start()
        let clients = Clients()
        let live = try await Self.script { gateway in
            var configuration = mosquitto.clientConfiguration(clientID: "parity-\(UUID().uuidString.prefix(8))")
            (configuration.noLocal, configuration.retainAsPublished) = (gateway, gateway)
            let client = MQTTClient(configuration: configuration)
            clients.add(client)
            try await client.connect()
            return client
        }
        for client in clients.all { await client.disconnect() }
        await mosquitto.stop()

        let broker = MemoryBroker()
        let memory = try await Self.script { gateway in
            var configuration = MQTTConfiguration()
            (configuration.noLocal, configuration.retainAsPublished) = (gateway, gateway)
            let transport = broker.transport(configuration: configuration)
            transport.connect()
            return transport
        }

        #expect(memory == live)
        // The script sees something: a broker that delivered nothing would agree with itself.
        #expect(live.retained.map(\.description) == ["t/a=1 (retained)", "t/b/c=2 (retained)"])
        #expect(live.retained.first?.contentType == "text/plain")
        #expect(live.marker?.description == "t/sync=marker")
        // Not its own publication (No Local), the retain flag as published, one copy for each
        // matching subscription, and nothing below `+`.
        #expect(live.live.map(\.description) == ["t/x/set=p (retained)", "t/x/set=p (retained)", "t/y/set=q"])
        #expect(live.later.map(\.description) == ["t/a=1 (retained)", "t/b/c=2 (retained)", "t/x/set=p (retained)"])
    }

    /// A topic deeper than the broker takes: both refuse it unsent, with the same code, and
    /// stay connected.
    @Test func bothRefuseATopicDeeperThanTheBrokerTakes() async throws {
        let deep = (["deep"] + Array(repeating: "a", count: 201)).joined(separator: "/")
        let mosquitto = try await MosquittoBroker.start()
        let client = MQTTClient(configuration: mosquitto.clientConfiguration())
        try await client.connect()
        let memory = MemoryBroker().transport(configuration: MQTTConfiguration())
        memory.connect()
        var codes: [MQTTError.Code?] = []
        for transport in [client, memory] as [any MQTTTransport] {
            do {
                try await transport.publish(
                    deep, payload: [0x31], qos: .atLeastOnce, retain: false, properties: .init())
                codes.append(nil)
            } catch {
                codes.append(error.code)
            }
            #expect(transport.connectionState == .connected)
        }
        #expect(codes == [.invalidTopic, .invalidTopic])
        await client.disconnect()
        await mosquitto.stop()
    }

    /// The script's MQTT clients, to disconnect at the end.
    final class Clients: Sendable {
        private let list = Mutex<[MQTTClient]>([])
        func add(_ client: MQTTClient) { list.withLock { $0.append(client) } }
        var all: [MQTTClient] { list.withLock { $0 } }
    }
}
