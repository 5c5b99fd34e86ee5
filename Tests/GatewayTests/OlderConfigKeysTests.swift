import Foundation
import Gateway
import HomeAssistant
import HomeMQTTApp
import Logging
import MQTT
import TopicAPI
import XCTest

/// An upgrade keeps working configs working: what the previous release (14db57d) accepted is
/// still read to the same settings, or answered with an error that names what replaces it.
final class OlderConfigKeysTests: XCTestCase {
    func parse(_ text: String, environment: [String: String] = [:]) throws(ConfigError) -> GatewayConfig {
        try HomeMQTTApp.parseConfig(text, file: "gw.yml", environment: environment)
    }

    func parseError(_ text: String, environment: [String: String] = [:]) -> ConfigError? {
        do { _ = try parse(text, environment: environment); return nil } catch { return error }
    }

    /// `scope.services: user-interactive|all`, the older name of `user-interactive-only`.
    func testScopeServicesIsReadAsUserInteractiveOnly() throws {
        for (old, new) in [("user-interactive", "true"), ("all", "false")] {
            let older = try parse("scope:\n  services: \(old)\n")
            let newer = try parse("scope:\n  user-interactive-only: \(new)\n")
            XCTAssertEqual(older.scope, newer.scope, old)
            XCTAssertEqual(older.scope.userInteractiveOnly, new == "true", old)
        }
    }

    /// A value 14db57d refused, or both names at once: the error names the newer key.
    func testScopeServicesErrorsNameTheNewerKey() throws {
        let texts = [
            "scope:\n  services: some\n",
            "scope:\n  services: all\n  user-interactive-only: false\n",
        ]
        for text in texts {
            let error = try XCTUnwrap(parseError(text), text)
            XCTAssertEqual(error.key, "scope.services", text)
            XCTAssertTrue(error.description.contains("user-interactive-only"), error.description)
        }
    }

    /// `broker.protocol` takes the same values; an explicit one still means that version only
    /// (only its absence changed: MQTT 5, falling back to 3.1.1).
    func testBrokerProtocolValuesMeanWhatTheyMeant() throws {
        let versions: [(String, MQTTProtocolVersion)] = [("5", .v5), ("5.0", .v5), ("3.1.1", .v311), ("4", .v311)]
        for (value, version) in versions {
            let config = try parse("broker:\n  protocol: '\(value)'\n")
            XCTAssertEqual(config.mqtt.protocolVersion, version, value)
            XCTAssertFalse(config.mqtt.fallBackToMQTT311, value)
        }
        XCTAssertTrue(try parse("base-topic: home\n").mqtt.fallBackToMQTT311)
    }

    /// `web.listen` hosts 14db57d took for loopback by their `127.` prefix alone (`127.1`, a
    /// name such as `127.0.0.1.nip.io`) need a token now: the error names `web.token`.
    func testWebListenOnALoopbackLookalikeNamesTheToken() throws {
        for listen in ["127.1:8080", "127.0.0.1.nip.io:8080"] {
            let error = try XCTUnwrap(parseError("web:\n  enabled: true\n  listen: \(listen)\n"), listen)
            XCTAssertEqual(error.key, "web.token", listen)
            XCTAssertTrue(error.description.contains("set web.token or web.token-file"), error.description)
            XCTAssertNoThrow(try parse("web:\n  enabled: true\n  listen: \(listen)\n  token: t0ken\n"), listen)
        }
        XCTAssertNoThrow(try parse("web:\n  enabled: true\n  listen: 127.0.0.1:8080\n"))
    }

    /// The environment variables of 14db57d are all still read.
    func testOlderEnvironmentVariablesAreStillRead() throws {
        let config = try parse(
            "base-topic: home\n",
            environment: [
                "HOMEMQTT_BROKER_URL": "mqtt://10.0.0.2:1884", "HOMEMQTT_MQTT_USERNAME": "gw",
                "HOMEMQTT_MQTT_PASSWORD": "pw", "STATE_DIRECTORY": "/var/lib/homemqtt:/other",
            ])
        XCTAssertEqual(config.mqtt.host, "10.0.0.2")
        XCTAssertEqual(config.mqtt.port, 1884)
        XCTAssertEqual(config.mqtt.username, "gw")
        XCTAssertEqual(config.mqtt.password, "pw")
        XCTAssertEqual(config.stateDirectory, "/var/lib/homemqtt")
        let web = try XCTUnwrap(
            parseError("web:\n  listen: 0.0.0.0:8080\n", environment: ["HOMEMQTT_WEB_ENABLED": "true"]))
        XCTAssertEqual(web.key, "web.token", "HOMEMQTT_WEB_ENABLED turned the page on")
        let enabled = parseError("base-topic: home\n", environment: ["HOMEMQTT_WEB_ENABLED": "maybe"])
        XCTAssertEqual(enabled?.key, "HOMEMQTT_WEB_ENABLED")
    }

    /// The shipped default config of 14db57d, read as if it were the repository's
    /// `Config/gateway.yml`: its `accessories` is then the repository's, which loads.
    func testThePreviousReleasesDefaultConfigStillParses() throws {
        let file = repositoryRoot.appendingPathComponent("Config/gateway.yml").path
        let config = try HomeMQTTApp.parseConfig(Self.releasedConfig, file: file, environment: [:])
        let directory = repositoryRoot.appendingPathComponent("Config/accessories").path
        XCTAssertTrue(FileManager.default.fileExists(atPath: directory))
        XCTAssertEqual(config.sources, [.simulator(directory: directory)])
        XCTAssertEqual(config.mqtt.host, "127.0.0.1")
        XCTAssertEqual(config.mqtt.clientID, "homemqtt")
        XCTAssertEqual(config.baseTopic, "home")
        XCTAssertEqual(config.stateDirectorySource, .config)
        XCTAssertEqual(config.pollInterval, 60)
        XCTAssertEqual(config.requestTimeout, 10)
        XCTAssertTrue(config.scope.userInteractiveOnly)
        XCTAssertTrue(config[HomeAssistantConfig.self].enabled)
        XCTAssertTrue(config[AccessoryStateConfig.self].enabled)
        XCTAssertEqual(config.logLevel, "info")
        XCTAssertNoThrow(try HomeMQTTApp.makeSource(config, logger: Logger(label: "test.older-config")))
    }

    /// `git show 14db57d:Config/gateway.yml`, verbatim.
    static let releasedConfig = """
        # HomeMQTT gateway configuration. Every key is optional; unknown keys are errors.
        # Relative paths are relative to this file.

        broker:
          url: mqtt://127.0.0.1:1883      # mqtts:// for TLS; user:password@ allowed (or use the keys below)
          client-id: homemqtt
          # username: homemqtt
          # password-file: /etc/homemqtt/mqtt-password   # or HOMEMQTT_MQTT_PASSWORD in the environment
          # protocol: 5                   # or 3.1.1
          # keepalive: 30
          # session-expiry: 3600          # seconds the broker keeps the gateway's session (and queued sets) while
          #                               # it is away; 0 = a clean session at every connect
          # qos: 1                        # QoS of what the gateway publishes (the $gateway/tree document: always 0)
          # tls:
          #   ca-file: /etc/ssl/certs/ca.pem
          #   cert-file: client.pem
          #   key-file: client.key
          #   insecure: false             # true skips hostname verification: for tests only

        base-topic: home
        state-directory: ../.homemqtt     # home database, run-time scope, HAP pairings
        poll-interval: 60                 # seconds between reads of characteristics that cannot notify; 0 = off
        request-timeout: 10               # seconds an accessory has to answer a set or get

        scope:
          services: user-interactive      # or: all (also accessory-information and hidden services)
          # manufacturers: { allow: ["Kilgo Devices, Inc."] }   # quote names with commas: YAML splits at them
          # rooms: { deny: [Bedroom] }
          # accessories: { deny: ["Front Door Lock"] }
          # service-types: { allow: [lightbulb, garage-door-opener] }
          # characteristic-types: { deny: [name] }
          # read-only: ["Front Door Lock", "home/garage/#"]   # names, ids or topic patterns whose set is refused

        sources:
          - type: simulator
            directory: accessories
          # - type: hap                   # accessories paired with `homemqtt pair`

        homeassistant:
          enabled: true
          prefix: homeassistant
          # support-url: https://example.org/homemqtt-help   # shown in Home Assistant as where to get help

        # Homie v5 (openHAB and other Homie controllers): the gateway as a root device, each accessory a
        # child device, on a second connection to the same broker (its will says `lost`).
        homie:
          enabled: false
          domain: homie                   # topics homie/5/<device>/...
          # device-id: homemqtt           # the root device's id (default: the client id)

        # The web view: the home in a browser, live (rooms and tiles, every characteristic with a control,
        # events, HomeKit pairing, health), plus /metrics (Prometheus) and /healthz. true serves it at
        # http://127.0.0.1:8080/ beside the gateway.
        web:
          enabled: false
          listen: 127.0.0.1:8080          # host:port; any host but loopback (0.0.0.0, a LAN address) needs a token
          # token: a-long-random-string   # asked by the page once, then kept in a cookie; Bearer for /metrics
          # token-file: /etc/homemqtt/web-token   # or the token from a file (one of the two)

        # Each accessory's retained JSON document home/<room>/<accessory>/$state and its $set (several
        # characteristics at once); false publishes the per-characteristic topics only.
        accessory-state: true

        log-level: info
        """
}
