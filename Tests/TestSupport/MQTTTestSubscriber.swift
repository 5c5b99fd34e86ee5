import Foundation
public import MQTT

/// Our MQTT client subscribed to one filter, collecting every message (retain flag included) so a test
/// can await one that matches a predicate.
public final class MQTTTestSubscriber: Sendable {
    public let client: MQTTClient
    public let filter: String
    private let collector: MessageCollector

    private init(client: MQTTClient, filter: String) {
        self.client = client
        self.filter = filter
        // The stream exists before the SUBACK, so retained messages sent right after it are not missed.
        self.collector = MessageCollector(client.messages())
    }

    /// Connects with `configuration`, subscribes to `filter` and waits for the SUBACK.
    public static func start(
        configuration: MQTTConfiguration, filter: String, qos: MQTTQoS = .exactlyOnce
    ) async throws -> MQTTTestSubscriber {
        let subscriber = MQTTTestSubscriber(client: MQTTClient(configuration: configuration), filter: filter)
        do {
            try await subscriber.client.connect()
            try await subscriber.client.subscribe(filter, qos: qos)
        } catch {
            await subscriber.stop()
            throw error
        }
        return subscriber
    }

    public static func start(
        broker: MosquittoBroker, filter: String, qos: MQTTQoS = .exactlyOnce, clientID: String? = nil
    ) async throws -> MQTTTestSubscriber {
        try await start(configuration: broker.clientConfiguration(clientID: clientID), filter: filter, qos: qos)
    }

    /// Everything received so far, in order.
    public var messages: [MQTTMessage] { collector.elements }

    /// The first received message (already collected or arriving within `timeout`) matching `predicate`.
    @discardableResult
    public func waitForMessage(
        _ what: String = "a matching message", timeout: Double = 10,
        where predicate: @Sendable (MQTTMessage) -> Bool = { _ in true }
    ) async throws -> MQTTMessage {
        try await collector.waitFor("\(what) on '\(filter)'", timeout: timeout, where: predicate)
    }

    /// Waits until at least `count` messages matching `predicate` were received; returns them.
    @discardableResult
    public func waitForMessages(
        count: Int, timeout: Double = 10, where predicate: @Sendable (MQTTMessage) -> Bool = { _ in true }
    ) async throws -> [MQTTMessage] {
        try await collector.waitFor(count: count, "messages on '\(filter)'", timeout: timeout, where: predicate)
    }

    public func clear() { collector.clear() }

    /// Disconnects (which finishes the message stream) and stops collecting.
    public func stop() async {
        await client.disconnect()
        await collector.cancel()
    }
}
