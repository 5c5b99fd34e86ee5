import Foundation
import MQTT
import Testing
import TestSupport

@Suite("Reconnect and persistent sessions across broker restarts")
struct ReconnectTests {
    @Test func clientReconnectsByItselfAndGetsWhatWasPublishedWhileAway() async throws {
        try await MosquittoBroker.with(.init(persistence: true)) { broker in
            // A persistent session: the broker keeps its subscription and queues QoS 1 messages for it.
            let persistent = try await connectedClient(broker, clientID: "persistent-client") { configuration in
                configuration.cleanStart = false
                configuration.sessionExpiry = 300
                // Long enough that the broker is back (and a message is queued) before the first retry.
                configuration.reconnectDelayMin = 2
                configuration.reconnectDelayMax = 4
            }
            // A clean-start client: its subscription must be re-sent by us after the reconnect.
            let clean = try await connectedClient(broker, clientID: "clean-client")
            let persistentMessages = MessageCollector(persistent.messages())
            let cleanMessages = MessageCollector(clean.messages())
            let states = StreamCollector(persistent.connectionStates())
            try await persistent.subscribe([("re/persist", .atLeastOnce), ("re/queued", .atLeastOnce)])
            try await clean.subscribe("re/clean", qos: .atLeastOnce)

            await broker.stop()
            try await waitUntil("both clients to notice the broker is gone") {
                persistent.connectionState.isReconnecting && clean.connectionState.isReconnecting
            }
            // Our own QoS 1 publish while disconnected: kept by libmosquitto, sent after the reconnect.
            try await persistent.publish("re/queued", "queued-by-client", qos: .atLeastOnce)

            try await broker.start()
            try await runChecked(
                "mosquitto_pub", broker.clientArguments + ["-q", "1", "-t", "re/persist", "-m", "while-away"])
            try #require(
                persistent.connectionState.isReconnecting,
                "precondition: the message must be published while the client is still away")

            try await waitUntil("both clients to reconnect", timeout: 20) {
                persistent.connectionState == .connected && clean.connectionState == .connected
            }
            try await persistentMessages.waitFor("the message published while away") { $0.string == "while-away" }
            try await persistentMessages.waitFor("our queued publish") { $0.string == "queued-by-client" }

            // Subscriptions work again for both (the clean one was re-subscribed by the client).
            try await runChecked(
                "mosquitto_pub", broker.clientArguments + ["-q", "1", "-t", "re/clean", "-m", "clean-after"])
            try await cleanMessages.waitFor("a message on the restored subscription") { $0.string == "clean-after" }
            try await runChecked(
                "mosquitto_pub", broker.clientArguments + ["-q", "1", "-t", "re/persist", "-m", "persist-after"])
            try await persistentMessages.waitFor("a message after the reconnect") { $0.string == "persist-after" }

            await persistent.disconnect()
            await clean.disconnect()
            try await states.waitForFinish()
            let observed = states.elements
            #expect(observed.first == .connected)
            #expect(observed.last == .disconnected(nil))
            let reconnectIndex = try #require(observed.firstIndex { $0.isReconnecting })
            #expect(observed[reconnectIndex...].contains(.connected), "\(observed)")
        }
    }

    @Test func persistentSessionSurvivesClientAndBrokerRestart() async throws {
        try await MosquittoBroker.with(.init(persistence: true)) { broker in
            let first = try await connectedClient(broker, clientID: "session-holder") { configuration in
                configuration.cleanStart = false
                configuration.sessionExpiry = 600
            }
            try await first.subscribe("session/topic", qos: .atLeastOnce)
            await first.disconnect()

            try await broker.restart()
            try await runChecked(
                "mosquitto_pub", broker.clientArguments + ["-q", "1", "-t", "session/topic", "-m", "kept"])

            // A new client object with the same ID resumes the session: no subscribe call needed.
            var configuration = broker.clientConfiguration(clientID: "session-holder")
            configuration.cleanStart = false
            configuration.sessionExpiry = 600
            let second = MQTTClient(configuration: configuration)
            let collector = MessageCollector(second.messages())
            try await second.connect()
            let message = try await collector.waitFor("the message queued for the session")
            #expect(message.string == "kept")
            #expect(message.qos == .atLeastOnce)
            await second.disconnect()
        }
    }
}
