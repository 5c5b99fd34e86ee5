import Foundation
import TestSupport
import XCTest

/// `homemqtt hap …` without a gateway, on a state directory with no pairings: the group's help,
/// the old top-level names as hidden aliases that behave the same, and bad input named.
final class HAPCommandTests: XCTestCase {
    var binary: String { BinaryEndToEndTests.binary }

    /// A config with a hap source and a broker nobody listens on: the commands work offline.
    func offlineConfig() throws -> (TemporaryDirectory, String) {
        let directory = try TemporaryDirectory(prefix: "homemqtt-hapcli")
        let config = directory.file("gateway.yml")
        try """
        broker:
          url: mqtt://127.0.0.1:\(try freePort())
        state-directory: \(directory.file("state"))
        sources:
          - type: hap
        """.write(toFile: config, atomically: true, encoding: .utf8)
        return (directory, config)
    }

    func homemqtt(_ arguments: [String]) async throws -> ProcessResult {
        try await runProcess(binary, arguments, timeout: 30)
    }

    func testTheHAPCommandsAreOneGroupAndTheOldNamesAreHidden() async throws {
        let help = try await homemqtt(["hap", "--help"])
        XCTAssertEqual(help.status, 0, help.standardError)
        for name in [
            "discover", "pair", "pairings", "unpair", "import-pairing", "accessory-pairings", "add-pairing",
            "remove-pairing",
        ] {
            XCTAssertTrue(help.standardOutput.contains("  \(name) "), "\(name) in: \(help.standardOutput)")
        }
        let top = try await homemqtt(["--help"])
        XCTAssertTrue(top.standardOutput.contains("  hap "), top.standardOutput)
        for hidden in ["pair ", "pairings ", "unpair ", "discover ", "import-pairing ", "add-pairing "] {
            XCTAssertFalse(top.standardOutput.contains("\n  \(hidden)"), "\(hidden)shown: \(top.standardOutput)")
        }
        // The hidden names still take their options.
        let oldHelp = try await homemqtt(["pair", "--help"])
        XCTAssertEqual(oldHelp.status, 0, oldHelp.standardError)
        XCTAssertTrue(oldHelp.standardOutput.contains("--code"), oldHelp.standardOutput)
    }

    func testPairingsAndUnpairWorkOfflineUnderBothNames() async throws {
        let (directory, config) = try offlineConfig()
        _ = directory
        for command in [["hap", "pairings"], ["pairings"]] {
            let listed = try await homemqtt(command + ["--config", config])
            XCTAssertEqual(listed.status, 0, "\(command): \(listed.standardError)")
            XCTAssertEqual(listed.standardOutput, "no pairings\n", "\(command)")
        }
        for command in [["hap", "unpair"], ["unpair"]] {
            let unpaired = try await homemqtt(command + ["AA:BB:CC:DD:EE:FF", "--config", config])
            XCTAssertEqual(unpaired.status, 1, "\(command)")
            XCTAssertEqual(unpaired.standardOutput, "")
            XCTAssertTrue(
                unpaired.standardError.hasPrefix("homemqtt: unpair: unknown-pairing: no pairing with accessory AA:BB"),
                "\(command): \(unpaired.standardError)")
        }
    }

    func testBadInputIsNamedWithANonZeroExit() async throws {
        let (directory, config) = try offlineConfig()
        _ = directory
        for command in [["hap", "pair"], ["pair"]] {
            let malformed = try await homemqtt(
                command + ["--config", config, "--host", "127.0.0.1", "--port", "51826", "--code", "12-345"])
            XCTAssertNotEqual(malformed.status, 0)
            XCTAssertTrue(malformed.standardError.contains("--code"), malformed.standardError)
            XCTAssertTrue(malformed.standardError.contains("XXX-XX-XXX"), malformed.standardError)
            XCTAssertFalse(malformed.standardError.contains("12-345"), "the code is a secret")
            let port = try await homemqtt(
                command + ["--config", config, "--host", "127.0.0.1", "--port", "0", "--code", "031-45-154"])
            XCTAssertNotEqual(port.status, 0)
            XCTAssertTrue(port.standardError.contains("--port must be 1…65535, got 0"), port.standardError)
        }
        let timeout = try await homemqtt(["hap", "discover", "--config", config, "--timeout", "99"])
        XCTAssertNotEqual(timeout.status, 0)
        XCTAssertTrue(timeout.standardError.contains("--timeout must be between 0.5 and 60"), timeout.standardError)
        let missing = try await homemqtt(["hap", "pairings", "--config", directory.file("nope.yml")])
        XCTAssertEqual(missing.status, 2)
        XCTAssertTrue(missing.standardError.contains("nope.yml: no such file"), missing.standardError)
    }

    /// Through a running gateway: one without a hap source answers `no-pairing-source`, and the
    /// commands work on the state directory's pairings as they did before they were operations;
    /// a request the gateway refuses is named with its code.
    func testThroughARunningGatewayWithoutAHAPSource() async throws {
        let broker = try await MosquittoBroker.start()
        addTeardownBlock { await broker.stop() }
        let setup = try E2EConfig(brokerURL: broker.url)
        let gateway = try await BinaryGateway.start(setup, broker: broker)
        addTeardownBlock { await gateway.terminate(grace: 2) }

        let listed = try await homemqtt(["hap", "pairings", "--config", setup.configPath])
        XCTAssertEqual(listed.status, 0, listed.standardError)
        XCTAssertEqual(listed.standardOutput, "no pairings\n")
        XCTAssertTrue(
            listed.standardError.contains("the running gateway has no source for pairings"), listed.standardError)

        let unknown = try await homemqtt(["hap", "unpair", "AA:BB:CC:DD:EE:FF", "--config", setup.configPath])
        XCTAssertEqual(unknown.status, 1)
        XCTAssertTrue(unknown.standardError.contains("unpair: unknown-pairing:"), unknown.standardError)
        XCTAssertTrue(gateway.isRunning)
    }

    /// Through a running gateway with a hap source: the gateway answers, and says nothing else.
    func testThroughARunningGatewayWithAHAPSource() async throws {
        let broker = try await MosquittoBroker.start()
        addTeardownBlock { await broker.stop() }
        let setup = try E2EConfig(brokerURL: broker.url)
        try """
        broker:
          url: \(broker.url)
          client-id: homemqtt-e2e
        state-directory: state
        sources:
          - type: hap
            mdns-interfaces: {allow: [lo]}
        homeassistant:
          enabled: false
        log-level: warning
        """.write(toFile: setup.configPath, atomically: true, encoding: .utf8)
        let gateway = try await BinaryGateway.start(setup, broker: broker)
        addTeardownBlock { await gateway.terminate(grace: 2) }

        let listed = try await homemqtt(["hap", "pairings", "--config", setup.configPath])
        XCTAssertEqual(listed.status, 0, listed.standardError)
        XCTAssertEqual(listed.standardOutput, "no pairings\n")
        // Without the gateway the database's lock would have refused it: the gateway answered.
        XCTAssertEqual(listed.standardError, "", "answered by the gateway")
        let old = try await homemqtt(["pairings", "--config", setup.configPath])
        XCTAssertEqual(old.standardOutput, "no pairings\n", old.standardError)
        let unknown = try await homemqtt(["hap", "unpair", "AA:BB:CC:DD:EE:FF", "--config", setup.configPath])
        XCTAssertEqual(unknown.status, 1)
        XCTAssertTrue(unknown.standardError.contains("unpair: unknown-pairing:"), unknown.standardError)
    }
}
