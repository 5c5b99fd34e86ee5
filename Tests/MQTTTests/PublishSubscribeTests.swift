import Foundation
import MQTT
import Testing
import TestSupport

@Suite("Publish and subscribe against a real mosquitto")
struct PublishSubscribeTests {
    @Test(arguments: [MQTTProtocolVersion.v5, .v311])
    func roundTripAtEveryQoS(version: MQTTProtocolVersion) async throws {
        try await MosquittoBroker.with { broker in
            let subscriber = try await MQTTTestSubscriber.start(broker: broker, filter: "rt/#", qos: .exactlyOnce)
            let publisher = try await connectedClient(broker) { $0.protocolVersion = version }
            for qos in MQTTQoS.allCases {
                let payload: [UInt8] = [0, 1, 2, 255] + Array("qos \(qos.rawValue)".utf8)
                try await publisher.publish("rt/\(qos.rawValue)", payload: payload, qos: qos)
                let received = try await subscriber.waitForMessage { $0.topic == "rt/\(qos.rawValue)" }
                #expect(received.payload == payload)
                #expect(received.qos == qos)
                #expect(received.retain == false)
            }
            #expect(subscriber.messages.count == 3)
            await publisher.disconnect()
            await subscriber.stop()
        }
    }

    @Test func grantedQoSIsTheLowerOfPublishAndSubscription() async throws {
        try await MosquittoBroker.with { broker in
            let subscriber = try await MQTTTestSubscriber.start(broker: broker, filter: "low/#", qos: .atMostOnce)
            let publisher = try await connectedClient(broker)
            try await publisher.publish("low/x", "hello", qos: .exactlyOnce)
            let received = try await subscriber.waitForMessage()
            #expect(received.qos == .atMostOnce)
            #expect(received.string == "hello")
            await publisher.disconnect()
            await subscriber.stop()
        }
    }

    @Test func retainedMessageReachesALateSubscriber() async throws {
        try await MosquittoBroker.with { broker in
            let publisher = try await connectedClient(broker)
            try await publisher.publish("home/lamp/state", "on", qos: .atLeastOnce, retain: true)
            // PUBACK received means the broker stored the retained message.
            try await waitUntil("the retained publish to be acknowledged") { publisher.queuedPublishCount == 0 }

            let late = try await MQTTTestSubscriber.start(broker: broker, filter: "home/+/state", qos: .atLeastOnce)
            let message = try await late.waitForMessage { $0.topic == "home/lamp/state" }
            #expect(message.string == "on")
            #expect(message.retain, "a retained message delivered on subscribe carries the retain flag")

            // A live publish after subscribing is not flagged retained even if published with retain.
            try await publisher.publish("home/lamp/state", "off", qos: .atLeastOnce, retain: true)
            let live = try await late.waitForMessage { $0.string == "off" }
            #expect(live.retain == false)

            // mosquitto_sub sees what we retained, too (interoperability): %r prints the retain flag.
            let output = try await runChecked(
                "mosquitto_sub",
                broker.clientArguments + ["-t", "home/lamp/state", "-C", "1", "-W", "5", "-F", "%r %t %p"])
            #expect(output.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines) == "1 home/lamp/state off")
            await late.stop()
            await publisher.disconnect()
        }
    }

    @Test func singleAndMultiLevelWildcards() async throws {
        try await MosquittoBroker.with { broker in
            let client = try await connectedClient(broker)
            let collector = MessageCollector(client.messages())
            try await client.subscribe([("sensors/+/temperature", .atLeastOnce), ("alarm/#", .atLeastOnce)])
            let topics = [
                "sensors/kitchen/temperature", // matches +
                "sensors/kitchen/humidity", // no
                "sensors/a/b/temperature", // no: + is one level
                "alarm", // matches # (parent level)
                "alarm/zone1/door", // matches #
                "alarms/zone1", // no
                "sensors/hall/temperature", // matches +
            ]
            for topic in topics { try await client.publish(topic, topic, qos: .atLeastOnce) }
            try await client.publish("alarm/end", "end", qos: .atLeastOnce)
            try await collector.waitFor("the end marker") { $0.topic == "alarm/end" }
            let received = collector.elements.map(\.topic).filter { $0 != "alarm/end" }
            #expect(
                received == ["sensors/kitchen/temperature", "alarm", "alarm/zone1/door", "sensors/hall/temperature"])
            await client.disconnect()
        }
    }

    @Test func unsubscribeStopsDelivery() async throws {
        try await MosquittoBroker.with { broker in
            let client = try await connectedClient(broker)
            let collector = MessageCollector(client.messages())
            try await client.subscribe("a/#", qos: .atLeastOnce)
            try await client.subscribe("b/#", qos: .atLeastOnce)
            try await client.unsubscribe("a/#")
            try await client.publish("a/1", "x", qos: .atLeastOnce)
            try await client.publish("b/1", "y", qos: .atLeastOnce)
            try await collector.waitFor { $0.topic == "b/1" }
            // Same client, same QoS: a/1 would have arrived before b/1.
            #expect(collector.elements.map(\.topic) == ["b/1"])
            await client.disconnect()
        }
    }

    @Test func mqtt5PropertiesAndInteroperabilityWithMosquittoClients() async throws {
        try await MosquittoBroker.with { broker in
            let client = try await connectedClient(broker)
            let collector = MessageCollector(client.messages())
            try await client.subscribe("props/#", qos: .atLeastOnce)
            // mosquitto_pub → our client, with MQTT 5 user property and message expiry.
            try await runChecked(
                "mosquitto_pub",
                broker.clientArguments + [
                    "-V", "mqttv5", "-t", "props/in", "-m", "from-cli", "-q", "1",
                    "-D", "publish", "user-property", "origin", "cli", "-D", "publish", "message-expiry-interval",
                    "120",
                ])
            let incoming = try await collector.waitFor { $0.topic == "props/in" }
            #expect(incoming.string == "from-cli")
            #expect(incoming.properties.userProperties == [MQTTUserProperty(name: "origin", value: "cli")])
            #expect(incoming.properties.messageExpiry.map { $0 > 0 && $0 <= 120 } == true)

            // Our client → mosquitto_sub, with properties (%P prints user properties).
            let sub = try ChildProcess(
                "mosquitto_sub",
                broker.clientArguments + ["-V", "mqttv5", "-t", "props/out", "-C", "1", "-W", "10", "-F", "%t %p %P"])
            try await broker.waitForSubscription(to: "props/out")
            var properties = MQTTPublishProperties()
            properties.userProperties = [MQTTUserProperty(name: "k", value: "v")]
            properties.messageExpiry = 60
            try await client.publish(
                "props/out", payload: Array("to-cli".utf8), qos: .atLeastOnce, properties: properties)
            let status = try await sub.waitForExit(timeout: 10)
            #expect(status == 0)
            #expect(sub.standardOutput.split(separator: "\n").contains("props/out to-cli k:v"), "\(sub.standardOutput)")
            await client.disconnect()
        }
    }

    /// Request/response and typed payloads: content type, payload format, response topic and
    /// correlation data reach us from mosquitto_pub and reach mosquitto_sub from us.
    @Test func mqtt5RequestResponseAndPayloadTypeProperties() async throws {
        try await MosquittoBroker.with { broker in
            let client = try await connectedClient(broker)
            let collector = MessageCollector(client.messages())
            try await client.subscribe("rr/#", qos: .atLeastOnce)
            try await runChecked(
                "mosquitto_pub",
                broker.clientArguments + [
                    "-V", "mqttv5", "-t", "rr/in", "-m", "{}", "-q", "1",
                    "-D", "publish", "response-topic", "rr/answers/7", "-D", "publish", "correlation-data", "c-42",
                    "-D", "publish", "content-type", "application/json", "-D", "publish", "payload-format-indicator",
                    "1",
                ])
            let incoming = try await collector.waitFor { $0.topic == "rr/in" }
            #expect(incoming.properties.responseTopic == "rr/answers/7")
            #expect(incoming.properties.correlationData == Array("c-42".utf8))
            #expect(incoming.properties.contentType == "application/json")
            #expect(incoming.properties.isUTF8Text)

            let sub = try ChildProcess(
                "mosquitto_sub",
                broker.clientArguments + [
                    "-V", "mqttv5", "-t", "rr/out", "-C", "1", "-W", "10", "-F", "%t|%C|%F|%R|%D|%p",
                ])
            try await broker.waitForSubscription(to: "rr/out")
            let properties = MQTTPublishProperties(
                contentType: "application/json", isUTF8Text: true, responseTopic: "rr/back",
                correlationData: Array("abc".utf8))
            try await client.publish("rr/out", payload: Array("{}".utf8), qos: .atLeastOnce, properties: properties)
            #expect(try await sub.waitForExit(timeout: 10) == 0)
            #expect(sub.standardOutput.trimmingCharacters(in: .newlines) == "rr/out|application/json|1|rr/back|abc|{}")
            await client.disconnect()
        }
    }

    /// Plain publishes (a payload format and a content type, nothing else) share a property
    /// list made once per kind (`PropertyLists`): each kind, again and at either QoS, reaches a
    /// subscriber with its own properties, and one without any with none.
    @Test func plainPropertiesReachSubscribersAtEveryPublish() async throws {
        try await MosquittoBroker.with { broker in
            let client = try await connectedClient(broker)
            let kinds: [(String, MQTTPublishProperties)] = [
                ("json", MQTTPublishProperties(contentType: "application/json", isUTF8Text: true)),
                ("jsonbytes", MQTTPublishProperties(contentType: "application/json")),
                ("text", MQTTPublishProperties(contentType: "text/plain", isUTF8Text: true)),
                ("format", MQTTPublishProperties(isUTF8Text: true)),
                ("type", MQTTPublishProperties(contentType: "image/png")),
                ("none", MQTTPublishProperties()),
            ]
            let expected = 2 * 2 * kinds.count
            let sub = try ChildProcess(
                "mosquitto_sub",
                broker.clientArguments + [
                    "-V", "mqttv5", "-t", "plain/#", "-C", "\(expected)", "-W", "10", "-F", "%t|%C|%F",
                ])
            try await broker.waitForSubscription(to: "plain/#")
            for round in 0..<2 {
                for qos in [MQTTQoS.atMostOnce, .atLeastOnce] {
                    for (name, properties) in kinds {
                        try await client.publish(
                            "plain/\(name)/\(round)/\(qos.rawValue)", payload: Array("x".utf8), qos: qos,
                            properties: properties)
                    }
                }
            }
            #expect(try await sub.waitForExit(timeout: 10) == 0)
            let lines = sub.standardOutput.split(separator: "\n").map(String.init)
            #expect(lines.count == expected)
            for line in lines {
                let fields = line.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
                let kind = fields[0].split(separator: "/")[1]
                let want: (String, String) =
                    switch kind {
                    case "json": ("application/json", "1")
                    case "jsonbytes": ("application/json", "")
                    case "text": ("text/plain", "1")
                    case "format": ("", "1")
                    case "type": ("image/png", "")
                    default: ("", "")
                    }
                #expect(Array(fields.dropFirst()) == [want.0, want.1], "\(line)")
            }
            await client.disconnect()
        }
    }
}
