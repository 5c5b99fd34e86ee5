import HomeMQTTApp
import Foundation
import Gateway
import TestSupport
import WebView
import XCTest

/// The config file's `web:` section, read strictly: defaults, the listen address, the token and
/// where it is required, unknown keys. What `homemqtt` says about a bad one is in EndToEndTests.
final class WebConfigTests: XCTestCase {
    func parse(_ web: String) throws(ConfigError) -> GatewayConfig {
        try HomeMQTTApp.parseConfig("web:\n" + web, file: "/etc/homemqtt/gateway.yml")
    }

    func refusal(_ web: String) -> ConfigError? {
        do {
            _ = try parse(web)
            return nil
        } catch {
            return error
        }
    }

    func testOffByDefaultOnLoopbackPort8080() throws {
        let config = try HomeMQTTApp.parseConfig("base-topic: home\n", file: "g.yml")
        XCTAssertFalse(config[WebConfig.self].enabled)
        XCTAssertEqual(config[WebConfig.self].listenDisplay, "127.0.0.1:8080")
        XCTAssertNil(config[WebConfig.self].token)
    }

    func testListenForms() throws {
        XCTAssertEqual(
            try parse("  listen: 0.0.0.0:9000\n  token: t0ken\n")[WebConfig.self].listenDisplay, "0.0.0.0:9000")
        XCTAssertEqual(try parse("  listen: '[::1]:8081'\n")[WebConfig.self].listenDisplay, "[::1]:8081")
        XCTAssertEqual(try parse("  listen: localhost:8082\n")[WebConfig.self].port, 8082)
        XCTAssertEqual(try parse("  listen: ':8083'\n")[WebConfig.self].host, "127.0.0.1")
        for bad in ["8080", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:70000", "host:port", "[::1]8080"] {
            let error = refusal("  listen: '\(bad)'\n")
            XCTAssertEqual(error?.key, "web.listen", "\(bad): \(String(describing: error))")
        }
    }

    /// Off loopback the page would let anyone on the network control the home: a token is a
    /// must, and the error names the file and the key.
    func testTokenRequiredOffLoopbackOnlyWhenEnabled() throws {
        let error = try XCTUnwrap(refusal("  enabled: true\n  listen: 0.0.0.0:8080\n"))
        XCTAssertEqual(error.file, "/etc/homemqtt/gateway.yml")
        XCTAssertEqual(error.key, "web.token")
        XCTAssertTrue(error.message.contains("0.0.0.0:8080"), error.message)
        XCTAssertNoThrow(try parse("  enabled: false\n  listen: 0.0.0.0:8080\n"))
        XCTAssertNoThrow(try parse("  enabled: true\n  listen: 127.0.0.1:8080\n"))
        XCTAssertNoThrow(try parse("  enabled: true\n  listen: '[::1]:8080'\n"))
        XCTAssertEqual(
            try parse("  enabled: true\n  listen: 192.168.1.2:80\n  token: s3cret\n")[WebConfig.self].token, "s3cret")
    }

    func testTokenFromAFileRelativeToTheConfig() throws {
        let directory = try TemporaryDirectory(prefix: "homemqtt-web-config")
        try "  from-a-file \n".write(toFile: directory.file("web-token"), atomically: true, encoding: .utf8)
        let config = try HomeMQTTApp.parseConfig(
            "web:\n  enabled: true\n  listen: 0.0.0.0:8080\n  token-file: web-token\n",
            file: directory.file("gateway.yml"))
        XCTAssertEqual(config[WebConfig.self].token, "from-a-file")
        let missing = try XCTUnwrap(refusal("  token-file: /nonexistent/web-token\n"))
        XCTAssertEqual(missing.key, "web.token-file")
        XCTAssertEqual(refusal("  token: a\n  token-file: b\n")?.key, "web.token-file")
        XCTAssertEqual(refusal("  token: '  '\n")?.key, "web.token")
    }

    /// `HOMEMQTT_WEB_ENABLED` turns the page on (or off) without editing the file, as
    /// Scripts/run-simulated-home.sh does; the token rule still holds.
    func testEnvironmentTurnsItOnOrOff() throws {
        let on = try HomeMQTTApp.parseConfig(
            "base-topic: home\n", file: "g.yml", environment: ["HOMEMQTT_WEB_ENABLED": "true"])
        XCTAssertTrue(on[WebConfig.self].enabled)
        XCTAssertEqual(on[WebConfig.self].listenDisplay, "127.0.0.1:8080")
        let off = try HomeMQTTApp.parseConfig(
            "web:\n  enabled: true\n", file: "g.yml", environment: ["HOMEMQTT_WEB_ENABLED": "0"])
        XCTAssertFalse(off[WebConfig.self].enabled)
        XCTAssertThrowsError(
            try HomeMQTTApp.parseConfig(
                "web:\n  listen: 0.0.0.0:8080\n", file: "g.yml", environment: ["HOMEMQTT_WEB_ENABLED": "true"])
        ) { XCTAssertEqual(($0 as? ConfigError)?.key, "web.token") }
        XCTAssertThrowsError(
            try HomeMQTTApp.parseConfig(
                "base-topic: home\n", file: "g.yml", environment: ["HOMEMQTT_WEB_ENABLED": "yes"])
        ) { XCTAssertEqual(($0 as? ConfigError)?.key, "HOMEMQTT_WEB_ENABLED") }
    }

    func testUnknownKeyListsTheAllowedOnes() throws {
        let error = try XCTUnwrap(refusal("  enabled: true\n  port: 80\n"))
        XCTAssertEqual(error.code, .unknownKey)
        XCTAssertEqual(error.key, "web.port")
        for key in ["enabled", "listen", "token", "token-file"] {
            XCTAssertTrue(error.message.contains(key), error.message)
        }
        XCTAssertEqual(refusal("  enabled: yes please\n")?.key, "web.enabled")
    }

    /// The shipped config has the whole section, off, so that one line turns it on.
    func testShippedConfigHasEveryKeyAndOneLineTurnsItOn() throws {
        let path = repositoryRoot.appendingPathComponent("Config/gateway.yml").path
        let text = try String(contentsOfFile: path, encoding: .utf8)
        for key in ["web:", "enabled: false", "listen: 127.0.0.1:8080", "# token:", "# token-file:"] {
            XCTAssertTrue(text.contains(key), "Config/gateway.yml lacks \(key)")
        }
        XCTAssertFalse(try HomeMQTTApp.parseConfig(text, file: path)[WebConfig.self].enabled)
        let on = text.replacingOccurrences(
            of: "web:\n  enabled: false", with: "web:\n  enabled: true")
        XCTAssertNotEqual(on, text, "the web section does not open with enabled: false")
        let config = try HomeMQTTApp.parseConfig(on, file: path)
        XCTAssertTrue(config[WebConfig.self].enabled)
        XCTAssertEqual(config[WebConfig.self].listenDisplay, "127.0.0.1:8080")
    }
}
