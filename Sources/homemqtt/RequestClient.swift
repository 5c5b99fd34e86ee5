import Foundation
import Gateway
import HomeMQTTApp
import HomeModel
import Logging
import MQTT

/// One short-lived MQTT session with the running gateway: `<base>/$gateway/request/<op>` out,
/// the matching `<base>/$gateway/response/<op>` (by `id`) back.
struct RequestClient {
    /// How the gateway looked from the broker.
    enum Presence {
        case online(RequestClient)
        /// Why the gateway is taken to be down (for messages).
        case absent(String)
    }

    let client: MQTTClient
    let base: String
    let op: String

    var requestTopic: String { "\(base)/$gateway/request/\(op)" }
    var responseTopic: String { "\(base)/$gateway/response/\(op)" }

    /// Connects with the config's broker settings and reads the retained `<base>/$gateway/status`:
    /// the gateway counts as up only when the broker answers and the status says `online`.
    static func connect(config: GatewayConfig, op: String, statusWait: Double, logger: Logger) async -> Presence {
        var mqtt = config.mqtt
        // Never the gateway's own client id: the broker would disconnect the gateway for us.
        mqtt.clientID = "homemqtt-cli-" + UUID().uuidString.prefix(8).lowercased()
        mqtt.will = nil
        mqtt.cleanStart = true
        mqtt.sessionExpiry = nil
        mqtt.connectTimeout = min(mqtt.connectTimeout, 5)
        let client = MQTTClient(configuration: mqtt, logger: logger)
        do {
            try await client.connect()
        } catch {
            await client.disconnect()
            // `mqtt://` at a TLS listener: the client's error says so (it asked the address in TLS).
            return .absent("the broker at \(config.brokerDisplay) does not answer (\(error))")
        }
        let statusTopic = "\(config.baseTopic)/$gateway/status"
        let messages = client.messages()
        let link = RequestClient(client: client, base: config.baseTopic, op: op)
        do {
            // The response filter too, so that nothing is missed between the check and the request.
            try await client.subscribe([(statusTopic, .atLeastOnce), (link.responseTopic, .atLeastOnce)])
        } catch {
            await client.disconnect()
            return .absent("cannot subscribe on \(config.brokerDisplay) (\(error))")
        }
        // The broker sends a retained status right after the SUBACK; no message at all means the
        // gateway has never run against this broker and base topic.
        let status = await first(in: messages, timeout: statusWait) { $0.topic == statusTopic }
        switch status?.string {
        case "online"?:
            return .online(link)
        case let other?:
            await client.disconnect()
            return .absent("\(statusTopic) is '\(other.isEmpty ? "(cleared)" : other)' on \(config.brokerDisplay)")
        case nil:
            await client.disconnect()
            return .absent("no gateway status on \(statusTopic) at \(config.brokerDisplay)")
        }
    }

    /// Publishes the request with a fresh `id` and waits for the response carrying it.
    /// Returns nil when no answer came within `timeout`.
    func send(_ fields: [String: JSONValue], timeout: Double) async throws -> [String: JSONValue]? {
        let id = "cli-" + UUID().uuidString.lowercased()
        var payload = fields
        payload["id"] = .string(id)
        let responses = client.messages()
        try await client.publish(
            requestTopic, payload: JSONValue.object(payload).encodedUTF8(), qos: .atLeastOnce, retain: false)
        let answer = await Self.first(in: responses, timeout: timeout) { message in
            guard message.topic == responseTopic, !message.retain,
                let json = try? JSONValue(parsing: message.payload)
            else { return false }
            return json["id"] == .string(id)
        }
        guard let answer else { return nil }
        return try JSONValue(parsing: answer.payload).objectValue
    }

    func close() async {
        await client.disconnect()
    }

    /// The first message matching `predicate` within `timeout` seconds, or nil.
    static func first(
        in stream: AsyncStream<MQTTMessage>, timeout: Double, where predicate: @escaping @Sendable (MQTTMessage) -> Bool
    ) async -> MQTTMessage? {
        await withTaskGroup(of: MQTTMessage?.self) { group in
            group.addTask {
                for await message in stream where predicate(message) { return message }
                return nil
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(timeout))
                return nil
            }
            let found = await group.next() ?? nil
            group.cancelAll()
            return found
        }
    }
}
