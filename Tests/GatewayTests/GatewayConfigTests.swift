import HomeMQTTApp
import Foundation
import Gateway
import TestSupport
import XCTest

/// Loading a config file: what each unusable file is called, in words and in a code.
final class GatewayConfigLoadTests: XCTestCase {
    func loadError(_ path: String) -> ConfigError? {
        do {
            _ = try HomeMQTTApp.loadConfig(file: path, environment: [:])
            return nil
        } catch {
            return error
        }
    }

    func testUnusableFilesAreNamedInPlainWords() throws {
        let directory = try TemporaryDirectory(prefix: "homemqtt-config")
        let blank = directory.file("blank.yml")
        try " \n\t\n".write(toFile: blank, atomically: true, encoding: .utf8)
        let latin1 = directory.file("latin1.yml")
        try Data([0x62, 0x61, 0x73, 0x65, 0x2D, 0x74, 0x6F, 0x70, 0x69, 0x63, 0x3A, 0x20, 0xE9, 0x0A]).write(
            to: URL(fileURLWithPath: latin1))
        // The start of an ELF binary, and text with a NUL on its second line.
        let binary = directory.file("binary.yml")
        try Data([0x7F, 0x45, 0x4C, 0x46, 0x02, 0x01, 0x01, 0x00]).write(to: URL(fileURLWithPath: binary))
        let nul = directory.file("nul.yml")
        try Data(Array("base-topic: home\nlog-le\u{0}vel: info\n".utf8)).write(to: URL(fileURLWithPath: nul))
        let cases: [(String, ConfigError.Code, String)] = [
            ("/dev/null", .empty, "/dev/null: the file is empty"),
            (blank, .empty, "\(blank): the file is empty"),
            (directory.path, .isDirectory, "\(directory.path): is a directory, not a config file"),
            (directory.file("missing.yml"), .notFound, "\(directory.file("missing.yml")): no such file"),
            (
                directory.file("missing/gateway.yml"), .notFound,
                "\(directory.file("missing/gateway.yml")): no such file"
            ),
            (latin1, .unreadable, "\(latin1): is not UTF-8 text: byte 0xE9 at line 1, column 13"),
            (
                binary, .unreadable,
                "\(binary): holds the control character U+007F at line 1, column 1: not YAML text (a binary file?)"
            ),
            (
                nul, .unreadable,
                "\(nul): holds the control character U+0000 at line 2, column 7: not YAML text (a binary file?)"
            ),
        ]
        for (path, code, text) in cases {
            let error = try XCTUnwrap(loadError(path), path)
            XCTAssertEqual(error.code, code, path)
            XCTAssertEqual(error.file, path)
            XCTAssertNil(error.key)
            XCTAssertEqual(error.description, text)
        }
    }

    /// Comments only is a config that keeps every default, not an empty file.
    func testCommentsOnlyKeepsTheDefaults() throws {
        let directory = try TemporaryDirectory(prefix: "homemqtt-config")
        let path = directory.file("gateway.yml")
        try "# everything as it comes\n".write(toFile: path, atomically: true, encoding: .utf8)
        let config = try HomeMQTTApp.loadConfig(file: path, environment: [:])
        XCTAssertEqual(config.baseTopic, "home")
    }

    func testKeyProblemsHaveCodes() throws {
        func code(_ text: String) -> ConfigError.Code? {
            do { _ = try HomeMQTTApp.parseConfig(text, file: "gw.yml"); return nil } catch { return error.code }
        }
        XCTAssertEqual(code("colour: red\n"), .unknownKey)
        XCTAssertEqual(code("poll-interval: soon\n"), .invalidValue)
        XCTAssertEqual(code("key: [unclosed\n"), .invalidYAML)
    }

    /// `broker.max-packet-size` (bytes) and `protocol`: without `protocol`, MQTT 5 falls back to
    /// 3.1.1; both survive a broker URL from the environment; a bad size names file and key.
    func testMaxPacketSizeAndProtocolFallback() throws {
        let defaults = try HomeMQTTApp.parseConfig("base-topic: home\n", file: "gw.yml", environment: [:])
        XCTAssertNil(defaults.mqtt.maximumPacketSize)
        XCTAssertTrue(defaults.mqtt.fallBackToMQTT311)
        let set = try HomeMQTTApp.parseConfig(
            "broker:\n  protocol: 5\n  max-packet-size: 65536\n", file: "gw.yml",
            environment: ["HOMEMQTT_BROKER_URL": "mqtt://10.0.0.2:1884"])
        XCTAssertEqual(set.mqtt.maximumPacketSize, 65536)
        XCTAssertFalse(set.mqtt.fallBackToMQTT311)
        for bad in ["100", "268435461", "big"] {
            XCTAssertThrowsError(
                try HomeMQTTApp.parseConfig("broker:\n  max-packet-size: \(bad)\n", file: "gw.yml", environment: [:])
            ) { error in
                XCTAssertTrue("\(error)".hasPrefix("gw.yml: broker.max-packet-size"), "\(error)")
            }
        }
    }

    func testYAMLSyntaxErrorIsOneLine() {
        XCTAssertThrowsError(try HomeMQTTApp.parseConfig("base-topic: home\nkey: [unclosed\n", file: "gw.yml")) {
            error in
            let description = "\(error)"
            XCTAssertFalse(description.contains("\n"), description)
            XCTAssertTrue(description.hasPrefix("gw.yml: not valid YAML at line "), description)
        }
    }
}

/// No message that shows a broker URL shows its password.
final class BrokerURLMaskingTests: XCTestCase {
    static let password = "S3cretPW"

    func testMalformedURLsNeverShowThePassword() {
        let urls = [
            "mqtt://homemqtt:S3cretPW@127.0.0.1:99999", // port out of range
            "http://homemqtt:S3cretPW@127.0.0.1:1883", // unsupported scheme
            "mqtt://homemqtt:S3cretPW@:1883", // no host
            "mqtt://homemqtt:S3cretPW@127.0.0.1:1883/home", // a path
            "homemqtt:S3cretPW@127.0.0.1", // no scheme
            "mqtt://homemqtt:S3cretPW@127.0.0.1:port", // not a port
            "mqtt://homemqtt:S3cretPW@[127.0.0.1:1883", // not a URL at all
            "mqtt://homemqtt:S3cret%ZZPW@127.0.0.1:99999", // bad percent-encoding
            "mqtt://homemqtt:S3cret@PW@127.0.0.1:99999", // an unencoded @ in the password
            "mqtt://homemqtt:S3cret/PW@127.0.0.1:1883", // an unencoded / in the password
            "mqtt://homemqtt:S3cret%2FPW@127.0.0.1:99999", // percent-encoded
        ]
        for url in urls {
            let secrets = ["S3cretPW", "S3cret%ZZPW", "S3cret@PW", "S3cret/PW", "S3cret%2FPW", "PW@"]
            // In the file, quoted and not, and from the environment.
            let sources: [(String, [String: String], String)] = [
                ("broker:\n  url: \(url)\n", [:], "broker.url"),
                ("broker:\n  url: '\(url)'\n", [:], "broker.url"),
                ("base-topic: home\n", ["HOMEMQTT_BROKER_URL": url], "HOMEMQTT_BROKER_URL"),
            ]
            for (text, environment, key) in sources {
                XCTAssertThrowsError(try HomeMQTTApp.parseConfig(text, file: "gw.yml", environment: environment), url) {
                    error in
                    guard let error = error as? ConfigError else { return XCTFail("\(error)") }
                    XCTAssertEqual(error.key, key, url)
                    for secret in secrets {
                        XCTAssertFalse(error.description.contains(secret), "\(url) → \(error.description)")
                    }
                    XCTAssertTrue(
                        error.description.contains("***") || !error.description.contains("homemqtt:"), error.description
                    )
                }
            }
        }
    }

    /// The message still says what is wrong, with the URL masked rather than left out.
    func testMessageKeepsTheMaskedURL() {
        XCTAssertThrowsError(
            try HomeMQTTApp.parseConfig("broker:\n  url: mqtt://homemqtt:S3cretPW@127.0.0.1:99999\n", file: "gw.yml")
        ) { error in
            XCTAssertEqual(
                "\(error)", "gw.yml: broker.url: port 99999 in 'mqtt://homemqtt:***@127.0.0.1:99999' is out of range")
        }
    }

    func testBrokerDisplayIsMasked() throws {
        let config = try HomeMQTTApp.parseConfig(
            "broker:\n  url: mqtt://homemqtt:S3cret%40PW@broker.local:1884\n", file: "gw.yml")
        XCTAssertEqual(config.mqtt.password, "S3cret@PW")
        XCTAssertEqual(config.brokerDisplay, "mqtt://homemqtt:***@broker.local:1884")
    }

    func testMaskingInText() {
        XCTAssertEqual(MaskedURL.masked("mqtts://u:p:w@h:8883"), "mqtts://u:***@h:8883")
        XCTAssertEqual(MaskedURL.masked("mqtt://user@h"), "mqtt://user@h", "no password, nothing to mask")
        XCTAssertEqual(MaskedURL.masked("mqtt://h:1883"), "mqtt://h:1883")
        XCTAssertEqual(
            MaskedURL.maskingPasswords(in: "a 'mqtt://u:pw@h' and \"mqtts://v:x@y\" then mqtt://w@z."),
            "a 'mqtt://u:***@h' and \"mqtts://v:***@y\" then mqtt://w@z.")
    }
}

/// The state directory: `--state-directory` > `$STATE_DIRECTORY` > `state-directory` > default.
final class StateDirectoryResolutionTests: XCTestCase {
    func resolve(_ text: String, _ environment: [String: String] = [:], option: String? = nil) throws -> (
        String, StateDirectorySource
    ) {
        let config = try HomeMQTTApp.parseConfig(
            text, file: "/etc/homemqtt/gateway.yml", environment: environment, stateDirectory: option)
        return (config.stateDirectory, config.stateDirectorySource)
    }

    func testPrecedence() throws {
        let keyed = "state-directory: ../.homemqtt\n"
        let systemd = ["STATE_DIRECTORY": "/var/lib/homemqtt"]
        XCTAssertTrue(try resolve("base-topic: home\n") == ("/etc/homemqtt/.homemqtt", .default))
        XCTAssertTrue(try resolve(keyed) == ("/etc/homemqtt/../.homemqtt", .config), "relative to the config file")
        XCTAssertTrue(try resolve("state-directory: /srv/state\n") == ("/srv/state", .config))
        XCTAssertTrue(try resolve(keyed, systemd) == ("/var/lib/homemqtt", .environment))
        XCTAssertTrue(try resolve("base-topic: home\n", systemd) == ("/var/lib/homemqtt", .environment))
        XCTAssertTrue(try resolve(keyed, systemd, option: "/tmp/state") == ("/tmp/state", .option))
        XCTAssertTrue(
            try resolve(keyed, option: "state") == ("state", .option),
            "an option is relative to the working directory, as typed")
    }

    /// systemd joins one path per `StateDirectory=` entry with ':'; the first is the gateway's.
    func testEnvironmentTakesTheFirstOfSeveralPaths() throws {
        XCTAssertTrue(
            try resolve("", ["STATE_DIRECTORY": "/var/lib/homemqtt:/var/lib/homemqtt-extra"]) == (
                "/var/lib/homemqtt", .environment
            ))
        XCTAssertTrue(
            try resolve("state-directory: s\n", ["STATE_DIRECTORY": ""]) == ("/etc/homemqtt/s", .config), "empty: unset"
        )
        XCTAssertTrue(try resolve("state-directory: s\n", ["STATE_DIRECTORY": ":"]) == ("/etc/homemqtt/s", .config))
        XCTAssertTrue(
            try resolve("state-directory: s\n", ["STATE_DIRECTORY": "::/var/lib/a"]) == ("/var/lib/a", .environment))
    }

    func testLoadTakesTheSameOverrides() throws {
        let directory = try TemporaryDirectory(prefix: "homemqtt-config")
        let path = directory.file("gateway.yml")
        try "state-directory: here\n".write(toFile: path, atomically: true, encoding: .utf8)
        XCTAssertEqual(try HomeMQTTApp.loadConfig(file: path, environment: [:]).stateDirectory, directory.file("here"))
        XCTAssertEqual(
            try HomeMQTTApp.loadConfig(file: path, environment: ["STATE_DIRECTORY": "/var/lib/x"]).stateDirectory,
            "/var/lib/x")
        XCTAssertEqual(
            try HomeMQTTApp.loadConfig(
                file: path, environment: ["STATE_DIRECTORY": "/var/lib/x"], stateDirectory: "/opt/y"
            )
            .stateDirectory, "/opt/y")
    }
}
