import Foundation
import MQTT
import Testing
import TestSupport

/// `disconnect()` sends its DISCONNECT however much arrives meanwhile: after
/// `mosquitto_disconnect`, libmosquitto takes any PUBLISH it reads for a protocol error and
/// closes the socket, and the broker then publishes the will.
@Suite struct DisconnectTests {
    @Test(arguments: [MQTTProtocolVersion.v311, .v5])
    func theDisconnectGoesOutWhileMessagesArrive(version: MQTTProtocolVersion) async throws {
        try await MosquittoBroker.with { broker in
            let watcher = try await MQTTTestSubscriber.start(broker: broker, filter: "bye/will")
            let client = try await connectedClient(broker, clientID: "bye-client") { configuration in
                configuration.protocolVersion = version
                configuration.will = MQTTWill(topic: "bye/will", payload: Array("gone".utf8))
            }
            // Its own messages come back (no no-local): a stream still arriving as it stops.
            try await client.subscribe("bye/echo", qos: .atMostOnce)
            let payload = [UInt8](repeating: 0x61, count: 1000)
            for _ in 0..<500 { try await client.publish("bye/echo", payload: payload) }
            await client.disconnect()
            try await Task.sleep(for: .milliseconds(500))
            #expect(watcher.messages.isEmpty, "the will was published: \(broker.log)")
            #expect(broker.log.contains("Client bye-client disconnected."), "\(broker.log)")
            await watcher.stop()
        }
    }
}
