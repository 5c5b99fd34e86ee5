import Foundation
import MQTT
import Testing
import TestSupport

@Suite("Last will, authentication and TLS against a real mosquitto")
struct SessionTests {
    private func probe(_ broker: MosquittoBroker, clientID: String, then action: String) throws -> ChildProcess {
        try ChildProcess(
            builtProductPath("mqtt-will-probe"),
            ["127.0.0.1", String(broker.port), clientID, "will/\(clientID)", "\(clientID) is gone", "1", "1", action])
    }

    @Test func willIsPublishedWhenTheClientProcessIsKilled() async throws {
        try await MosquittoBroker.with { broker in
            let watcher = try await MQTTTestSubscriber.start(broker: broker, filter: "will/#")
            let child = try probe(broker, clientID: "probe-killed", then: "wait")
            try await child.waitForOutput(containing: "connected")
            #expect(watcher.messages.isEmpty, "no will while the client is alive")

            child.signal(SIGKILL)
            let will = try await watcher.waitForMessage("the will") { $0.topic == "will/probe-killed" }
            #expect(will.string == "probe-killed is gone")
            #expect(will.qos == .atLeastOnce)

            // The will was configured retained: a later subscriber gets it, flagged retained.
            let late = try await MQTTTestSubscriber.start(broker: broker, filter: "will/probe-killed")
            let retained = try await late.waitForMessage("the retained will")
            #expect(retained.retain)
            #expect(retained.string == "probe-killed is gone")
            await late.stop()
            await watcher.stop()
        }
    }

    @Test func noWillAfterACleanDisconnect() async throws {
        try await MosquittoBroker.with { broker in
            let watcher = try await MQTTTestSubscriber.start(broker: broker, filter: "will/#")
            let child = try probe(broker, clientID: "probe-clean", then: "disconnect")
            let status = try await child.waitForExit(timeout: 20)
            #expect(status == 0, "\(child.standardError)")
            #expect(child.standardOutput.contains("disconnected"))

            // Published after the probe is gone: once it arrives, a will (if any) would have arrived before it.
            let sentinel = try await connectedClient(broker)
            try await sentinel.publish("will/sentinel", "after", qos: .atLeastOnce)
            try await watcher.waitForMessage("the sentinel") { $0.topic == "will/sentinel" }
            #expect(!watcher.messages.contains { $0.topic == "will/probe-clean" })
            await sentinel.disconnect()
            await watcher.stop()
        }
    }

    @Test func rightPasswordConnectsWrongPasswordIsRefused() async throws {
        let options = MosquittoBroker.Options(users: ["alice": "wonder land", "bob": "builder"])
        try await MosquittoBroker.with(options) { broker in
            // Credentials from a URL, percent-encoded.
            var good = try MQTTConfiguration(url: "mqtt://alice:wonder%20land@127.0.0.1:\(broker.port)")
            good.connectTimeout = 30
            let client = MQTTClient(configuration: good)
            try await client.connect()
            #expect(client.connectionState == .connected)
            let collector = MessageCollector(client.messages())
            try await client.subscribe("auth/#")
            try await client.publish("auth/x", "ok", qos: .atLeastOnce)
            #expect(try await collector.waitFor().string == "ok")
            await client.disconnect()

            for version in [MQTTProtocolVersion.v5, .v311] {
                var bad = broker.clientConfiguration()
                bad.protocolVersion = version
                bad.username = "alice"
                bad.password = "wrong"
                bad.connectTimeout = 30 // a hang would show up as "timeout", not as a refusal
                let refused = MQTTClient(configuration: bad)
                let error = await expectMQTTError { try await refused.connect() }
                #expect(error?.isAuthenticationFailure == true, "\(String(describing: error))")
                #expect(error?.reasonCode != nil)
                #expect(refused.connectionState == .disconnected(error))
                // A refused client can be dropped or disconnected without trouble.
                await refused.disconnect()
            }

            var anonymous = broker.clientConfiguration()
            anonymous.connectTimeout = 30
            let error = await expectMQTTError { try await MQTTClient(configuration: anonymous).connect() }
            #expect(error?.isAuthenticationFailure == true, "\(String(describing: error))")
        }
    }

    @Test func tlsConnectsWithTheRightCAAndRefusesAnotherCA() async throws {
        try await MosquittoBroker.with(.init(tls: true)) { broker in
            let tls = try #require(broker.tlsMaterial)
            // The right CA: connects (hostname 127.0.0.1 is verified against the certificate's IP SAN).
            var configuration = try MQTTConfiguration(url: broker.url)
            configuration.tls?.caFile = tls.caFile
            let client = MQTTClient(configuration: configuration)
            let collector = MessageCollector(client.messages())
            try await client.connect()
            try await client.subscribe("tls/#")
            try await client.publish("tls/x", "secret", qos: .exactlyOnce)
            #expect(try await collector.waitFor().string == "secret")
            await client.disconnect()

            // With a client certificate as well (the broker does not require one, but must accept the handshake).
            var withCertificate = broker.clientConfiguration()
            withCertificate.tls?.certificateFile = tls.clientCertificateFile
            withCertificate.tls?.keyFile = tls.clientKeyFile
            let certified = MQTTClient(configuration: withCertificate)
            try await certified.connect()
            await certified.disconnect()

            // A server certificate not signed by the trusted CA: refused with a TLS error.
            var wrongCA = broker.clientConfiguration()
            wrongCA.tls = MQTTTLS(caFile: tls.otherCAFile)
            let refused = MQTTClient(configuration: wrongCA)
            let error = await expectMQTTError { try await refused.connect() }
            #expect(error?.code.rawValue == "tls", "\(String(describing: error))")
            await refused.disconnect()

            // The explicit opt-out accepts it.
            var insecure = wrongCA
            insecure.tls?.insecure = true
            let lax = MQTTClient(configuration: insecure)
            try await lax.connect()
            await lax.disconnect()

            // A missing CA file is a configuration error, reported before connecting.
            var missing = broker.clientConfiguration()
            missing.tls = MQTTTLS(caFile: broker.directory.file("no-such-ca.crt"))
            let missingError = await expectMQTTError { try await MQTTClient(configuration: missing).connect() }
            #expect(missingError?.code.rawValue == "tls")
            #expect(missingError?.message.contains("no-such-ca.crt") == true)

            // Plain MQTT against the TLS listener does not hang: it fails (the broker drops the connection).
            var plain = broker.clientConfiguration()
            plain.tls = nil
            plain.connectTimeout = 3
            _ = await expectMQTTError { try await MQTTClient(configuration: plain).connect() }
        }
    }
}
