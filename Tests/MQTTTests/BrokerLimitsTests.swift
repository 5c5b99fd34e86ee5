import Foundation
import MQTT
import Testing
import TestSupport

/// The broker's limits as the client honours them: a publish beyond the maximum packet size is
/// refused, unsent, and the connection stays; the CONNACK's limits are read.
@Suite struct BrokerLimitsTests {
    static let limit = 1000

    /// The largest payload whose packet to `topic` fits `limit`.
    static func largestPayload(
        _ topic: String, qos: MQTTQoS, properties: MQTTPublishProperties, version: MQTTProtocolVersion
    ) -> Int {
        var size = 0
        while MQTTBrokerLimits.publishPacketSize(
            topic: topic, payloadCount: size + 1, qos: qos, properties: properties, protocolVersion: version)
            <= limit
        {
            size += 1
        }
        return size
    }

    @Test(arguments: [MQTTProtocolVersion.v311, .v5])
    func aPacketBeyondTheLimitIsRefusedAndTheConnectionStays(version: MQTTProtocolVersion) async throws {
        try await MosquittoBroker.with(.init(extraConfiguration: ["max_packet_size \(Self.limit)"])) { broker in
            let subscriber = try await MQTTTestSubscriber.start(broker: broker, filter: "limits/#")
            // 3.1.1 learns the limit from the configuration; MQTT 5 from the broker's CONNACK.
            let client = try await connectedClient(broker) { configuration in
                configuration.protocolVersion = version
                if version == .v311 { configuration.maximumPacketSize = Self.limit }
            }
            #expect(client.brokerLimits.maximumPacketSize == Self.limit)
            if version == .v5 { #expect(client.brokerLimits.brokerMaximumPacketSize == Self.limit) }
            var properties = MQTTPublishProperties(contentType: "application/json", isUTF8Text: true)
            properties.userProperties = [MQTTUserProperty(name: "k", value: "v")]
            let fits = Self.largestPayload("limits/a", qos: .atLeastOnce, properties: properties, version: version)
            try await client.publish(
                "limits/a", payload: Array(repeating: 0x61, count: fits), qos: .atLeastOnce, properties: properties)
            let error = await expectMQTTError {
                try await client.publish(
                    "limits/a", payload: Array(repeating: 0x62, count: fits + 1), qos: .atLeastOnce,
                    properties: properties)
            }
            #expect(error?.code == .packetTooLarge)
            #expect(error?.message.contains("\(Self.limit)") == true)
            try await client.publish("limits/b", "after", qos: .atLeastOnce)
            try await subscriber.waitForMessage { $0.topic == "limits/b" }
            let received = subscriber.messages.filter { $0.topic == "limits/a" }
            #expect(received.map(\.payload.count) == [fits])
            #expect(client.connectionState == .connected)
            #expect(!broker.log.contains("disconnected due to"), "\(broker.log)")
            await client.disconnect()
            await subscriber.stop()
        }
    }

    @Test func thePacketSizeIsCountedByteForByte() {
        // PUBLISH QoS 1 to "a/b" (2 + 3), packet id (2), properties: content type "x" (1 + 2 + 1),
        // payload format (1 + 1), their length (1); payload 10: remaining 24, header 1 + 1.
        let properties = MQTTPublishProperties(contentType: "x", isUTF8Text: true)
        #expect(
            MQTTBrokerLimits.publishPacketSize(
                topic: "a/b", payloadCount: 10, qos: .atLeastOnce, properties: properties, protocolVersion: .v5) == 26)
        // 3.1.1 sends no properties; QoS 0 no packet id; 200 bytes need a 2-byte remaining length.
        #expect(
            MQTTBrokerLimits.publishPacketSize(
                topic: "a/b", payloadCount: 200, qos: .atMostOnce, properties: properties, protocolVersion: .v311)
                == 1 + 2 + 5 + 200)
    }

    @Test func aTooSmallConfiguredLimitIsRefused() async throws {
        var configuration = MQTTConfiguration(host: "127.0.0.1", port: 1)
        configuration.maximumPacketSize = 10
        let error = await expectMQTTError { try await MQTTClient(configuration: configuration).connect() }
        #expect(error?.code == .invalidConfiguration)
    }
}
