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

    /// What a client saw of a broker's limits: the limits it publishes under, what became of a
    /// publish that fits the maximum packet size exactly and of one a byte larger, and whether
    /// it stayed connected.
    struct LimitsSeen: Equatable {
        var maximumPacketSize: Int?
        var brokerMaximumPacketSize: Int?
        var maximumQoS: MQTTQoS
        /// The payload sizes and QoS another client received on `limits/#`.
        var received: [String]
        var refusal: MQTTError.Code?
        var connected: Bool
    }

    /// `client` publishes the largest packet `limit` allows, one a byte larger, and a marker at
    /// QoS 1; `subscriber` (on `limits/#` at QoS 2) reports what came.
    static func limitsScript(
        _ client: any MQTTTransport, _ subscriber: any MQTTTransport, limit: Int
    ) async throws -> LimitsSeen {
        let seen = MessageCollector(subscriber.messages())
        try await subscriber.subscribe("limits/#", qos: .exactlyOnce)
        var fits = 0
        while MQTTBrokerLimits.publishPacketSize(
            topic: "limits/a", payloadCount: fits + 1, qos: .atLeastOnce, properties: .init(),
            protocolVersion: client.protocolVersion) <= limit
        {
            fits += 1
        }
        try await client.publish("limits/a", payload: Array(repeating: 0x61, count: fits), qos: .atLeastOnce)
        var refusal: MQTTError.Code?
        do {
            try await client.publish("limits/a", payload: Array(repeating: 0x62, count: fits + 1), qos: .atLeastOnce)
        } catch {
            refusal = error.code
        }
        try await client.publish("limits/end", payload: Array("end".utf8), qos: .atLeastOnce)
        try await seen.waitFor("the marker", timeout: 10) { $0.topic == "limits/end" }
        await seen.cancel()
        let limits = client.brokerLimits
        return LimitsSeen(
            maximumPacketSize: limits.maximumPacketSize, brokerMaximumPacketSize: limits.brokerMaximumPacketSize,
            maximumQoS: limits.maximumQoS,
            received: seen.elements.map { "\($0.topic) \($0.payload.count) bytes qos \($0.qos.rawValue)" },
            refusal: refusal, connected: client.connectionState == .connected)
    }

    /// mosquitto's `max_packet_size`, told to an MQTT 5 client in its CONNACK and configured for
    /// a 3.1.1 one (`broker.max-packet-size`), and the memory broker's `limits`: the same limits
    /// read, a packet that fits delivered, one a byte larger refused unsent, the connection kept.
    @Test(arguments: [MQTTProtocolVersion.v311, .v5])
    func bothHoldAMaximumPacketSize(version: MQTTProtocolVersion) async throws {
        let limit = 4096
        func configure(_ configuration: inout MQTTConfiguration) {
            configuration.protocolVersion = version
            if version == .v311 { configuration.maximumPacketSize = limit }
        }
        let mosquitto = try await MosquittoBroker.start(.init(extraConfiguration: ["max_packet_size \(limit)"]))
        var configuration = mosquitto.clientConfiguration(clientID: "parity-limits")
        configure(&configuration)
        let client = MQTTClient(configuration: configuration)
        let subscriber = MQTTClient(configuration: mosquitto.clientConfiguration(clientID: "parity-limits-sub"))
        try await client.connect()
        try await subscriber.connect()
        let live = try await Self.limitsScript(client, subscriber, limit: limit)
        #expect(!mosquitto.log.contains("disconnected due to"), "\(mosquitto.log)")
        await client.disconnect()
        await subscriber.disconnect()
        await mosquitto.stop()

        var limits = MQTTBrokerLimits()
        limits.brokerMaximumPacketSize = limit
        let broker = MemoryBroker(limits: limits)
        var memoryConfiguration = MQTTConfiguration()
        configure(&memoryConfiguration)
        let transport = broker.transport(configuration: memoryConfiguration)
        let memorySubscriber = broker.transport()
        transport.connect()
        memorySubscriber.connect()
        let memory = try await Self.limitsScript(transport, memorySubscriber, limit: limit)

        #expect(memory == live)
        #expect(live.maximumPacketSize == limit)
        #expect(live.brokerMaximumPacketSize == (version == .v5 ? limit : nil))
        #expect(live.refusal == .packetTooLarge)
        #expect(live.received.count == 2, "\(live.received)")
        #expect(live.connected)
    }

    /// mqttools (an MQTT 5 broker whose CONNACK grants Maximum QoS 0) and the memory broker with
    /// `maximumQoS` 0: a publish asked at QoS 1 goes at QoS 0, and reaches a QoS 2 subscriber
    /// so; nothing refused. mosquitto grants QoS 2, so mqttools holds the model here.
    @Test func bothGrantQoS0Only() async throws {
        let mqttools = try await MQTToolsBroker.start()
        let client = MQTTClient(configuration: MQTTConfiguration(host: "127.0.0.1", port: mqttools.port))
        let subscriber = MQTTClient(configuration: MQTTConfiguration(host: "127.0.0.1", port: mqttools.port))
        try await client.connect()
        try await subscriber.connect()
        let live = try await Self.limitsScript(client, subscriber, limit: 1000)
        await client.disconnect()
        await subscriber.disconnect()
        await mqttools.stop()

        var limits = MQTTBrokerLimits()
        limits.maximumQoS = .atMostOnce
        let broker = MemoryBroker(limits: limits)
        let transport = broker.transport()
        let memorySubscriber = broker.transport()
        transport.connect()
        memorySubscriber.connect()
        let memory = try await Self.limitsScript(transport, memorySubscriber, limit: 1000)

        #expect(memory.maximumQoS == live.maximumQoS)
        #expect(memory.received == live.received)
        #expect(live.maximumQoS == .atMostOnce)
        #expect(live.received.allSatisfy { $0.hasSuffix("qos 0") }, "\(live.received)")
        #expect(live.connected && memory.connected)
    }

    /// A client id connected again while its first connection is open is a takeover (mosquitto
    /// logs "closing old connection"; the memory broker lists it in `takeovers`); connected again
    /// after a clean disconnect, it is not. What `MultipleHomesTests` holds a retired home to.
    @Test func bothReportATakeoverAndOnlyThat() async throws {
        let mosquitto = try await MosquittoBroker.start()
        var clients: [MQTTClient] = []
        for id in ["parity-closed", "parity-closed", "parity-open", "parity-open"] {
            let client = MQTTClient(configuration: mosquitto.clientConfiguration(clientID: id))
            try await client.connect()
            // The first `parity-closed` leaves before the second comes; both `parity-open` stay.
            if id == "parity-closed" { await client.disconnect() } else { clients.append(client) }
        }
        /// The ids mosquitto took over: "Client <id> already connected, closing old connection."
        func takenOver() -> Set<String> {
            Set(
                mosquitto.log.split(separator: "\n").filter { $0.contains("closing old connection") }.compactMap {
                    $0.components(separatedBy: "Client ").last?.split(separator: " ").first.map(String.init)
                })
        }
        try await waitUntil("mosquitto's takeover line", timeout: 5) { !takenOver().isEmpty }
        let live = takenOver()
        // Disconnected at once: a client taken over reconnects, and would take over in turn.
        for client in clients { await client.disconnect() }
        await mosquitto.stop()

        let broker = MemoryBroker()
        var transports: [MemoryTransport] = []
        for id in ["parity-closed", "parity-closed", "parity-open", "parity-open"] {
            var configuration = MQTTConfiguration()
            configuration.clientID = id
            let transport = broker.transport(configuration: configuration)
            transport.connect()
            if id == "parity-closed" { transport.disconnect() } else { transports.append(transport) }
        }
        let memory = Set(broker.takeovers.map { $0.split(separator: " ")[1] }.map(String.init))
        #expect(memory == live)
        #expect(live == ["parity-open"])
        for transport in transports { transport.disconnect() }
    }

    /// The script's MQTT clients, to disconnect at the end.
    final class Clients: Sendable {
        private let list = Mutex<[MQTTClient]>([])
        func add(_ client: MQTTClient) { list.withLock { $0.append(client) } }
        var all: [MQTTClient] { list.withLock { $0 } }
    }
}
