import Testing

@testable import MQTT

@Suite("MQTT configuration from URLs")
struct ConfigurationTests {
    @Test func plainURLWithCredentials() throws {
        let configuration = try MQTTConfiguration(url: "mqtt://alice:s%40cret%3Ax@broker.example:1884")
        #expect(configuration.host == "broker.example")
        #expect(configuration.port == 1884)
        #expect(configuration.username == "alice")
        #expect(configuration.password == "s@cret:x")
        #expect(configuration.tls == nil)
        #expect(configuration.protocolVersion == .v5)
        #expect(configuration.clientID.hasPrefix("homemqtt-"))
    }

    @Test func defaultPorts() throws {
        let plain = try MQTTConfiguration(url: "mqtt://127.0.0.1")
        #expect(plain.port == 1883)
        #expect(plain.username == nil)
        let secure = try MQTTConfiguration(url: "mqtts://broker.example")
        #expect(secure.port == 8883)
        #expect(secure.tls == MQTTTLS())
        #expect(secure.tls?.insecure == false)
    }

    @Test func randomClientIDsDiffer() {
        #expect(MQTTConfiguration().clientID != MQTTConfiguration().clientID)
    }

    @Test(arguments: [
        "http://broker.example", "broker.example:1883", "mqtt://", "mqtt://host:0", "mqtt://host:70000",
        "mqtt://host/some/path", "mqtt://ho st", "",
    ])
    func badURLsAreTypedErrors(url: String) {
        #expect {
            _ = try MQTTConfiguration(url: url)
        } throws: { error in
            (error as? MQTTError)?.code.rawValue == "bad-url"
        }
    }
}
