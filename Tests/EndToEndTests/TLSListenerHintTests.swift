import Foundation
import HomeMQTTApp
import MQTT
import TestSupport
import XCTest

/// `mqtt://` pointed at a TLS listener: the connection is closed before any CONNACK, as a broker
/// that does not speak MQTT 5 closes it. The MQTT client asks the address in TLS and, when it
/// answers, its error says what to change, for the gateway's retries and the CLI alike. A real mosquitto with a TLS-only
/// listener, the real binary.
final class TLSListenerHintTests: XCTestCase {
    func testAnAddressIsAskedInTLSAndOnlyATLSListenerSaysYes() async throws {
        let tls = try await MosquittoBroker.start(.init(tls: true))
        addTeardownBlock { await tls.stop() }
        let plain = try await MosquittoBroker.start()
        addTeardownBlock { await plain.stop() }
        let tlsAnswers = await BrokerTLSProbe.answersInTLS(host: "127.0.0.1", port: tls.port)
        XCTAssertTrue(tlsAnswers)
        let plainAnswers = await BrokerTLSProbe.answersInTLS(host: "127.0.0.1", port: plain.port)
        XCTAssertFalse(plainAnswers, "plain MQTT is no TLS")
        let nothingAnswers = await BrokerTLSProbe.answersInTLS(host: "127.0.0.1", port: try freePort())
        XCTAssertFalse(nothingAnswers, "nothing listens")
    }

    func testRunAndTheCLISayTheBrokerMayBeATLSListener() async throws {
        let tls = try await MosquittoBroker.start(.init(tls: true))
        addTeardownBlock { await tls.stop() }
        XCTAssertTrue(tls.url.hasPrefix("mqtts://"), tls.url)
        let plainURL = "mqtt://127.0.0.1:\(tls.port)"
        let hint = "the broker at 127.0.0.1:\(tls.port) may be a TLS listener: use mqtts://"
        let setup = try E2EConfig(brokerURL: plainURL)

        TestCensus.record(.binary)
        let gateway = try ChildProcess(BinaryGateway.binary, ["run", "--config", setup.configPath])
        addTeardownBlock { await gateway.terminate(grace: 5) }
        try await waitUntil("run to say the broker may be a TLS listener", timeout: 15) {
            gateway.standardError.contains(hint)
        }
        // Each retry says it, as a warning, and none blames MQTT 5 (the address was asked once).
        let lines = gateway.standardError.split(separator: "\n").filter { $0.contains("may be a TLS listener") }
        XCTAssertTrue(lines.allSatisfy { $0.contains(" warning ") }, "\(lines)")
        XCTAssertFalse(gateway.standardError.contains("may not speak MQTT 5"), gateway.standardError)
        await gateway.terminate(grace: 5)

        // A command that asks the running gateway: it is taken for not running, and says why.
        let cli = try await runProcess(
            BinaryGateway.binary, ["room", "add", "Attic", "--config", setup.configPath], timeout: 30)
        XCTAssertEqual(cli.status, 0, cli.standardError)
        XCTAssertTrue(cli.standardError.contains(hint), cli.standardError)
        XCTAssertFalse(cli.standardError.contains("may not speak MQTT 5"), cli.standardError)
    }
}
