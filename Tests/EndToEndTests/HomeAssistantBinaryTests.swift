import Foundation
import HomeModel
import MQTT
import TestSupport
import XCTest

@testable import HomeAssistantTestSupport

/// Home Assistant discovery through the real `homemqtt` binary and a real mosquitto: what Home
/// Assistant sends, sent with `mosquitto_pub`, is answered `ok`; two gateways on one broker
/// keep their configs apart.
final class HomeAssistantBinaryTests: XCTestCase {
    /// The devices of issue 26 the shipped home lacks, as simulated accessories: a fan in speed
    /// steps of 25, a heater-cooler whose thresholds have ranges of their own, a humidifier
    /// that only humidifies.
    static let issueDevices: [String: String] = [
        "hunter-fan.yml": """
        name: Hunter Fan
        manufacturer: Hunter
        room: Bedroom
        services:
          - type: fanv2
            characteristics:
              active: 0
              rotation-speed: { value: 0, min: 0, max: 100, step: 25 }
              rotation-direction: 0
        """,
        "heat-pump.yml": """
        name: Heat Pump
        manufacturer: Daikin
        room: Living Room
        services:
          - type: heater-cooler
            characteristics:
              active: 1
              target-heater-cooler-state: 2
              current-temperature: 22
              heating-threshold: { value: 20, min: 0, max: 25 }
              cooling-threshold: { value: 24, min: 10, max: 35 }
        """,
        "humidifier.yml": """
        name: VOCOlinc Humidifier
        manufacturer: VOCOlinc
        room: Bedroom
        services:
          - type: humidifier-dehumidifier
            characteristics:
              active: 0
              target-humidifier-dehumidifier-state: { value: 1, min: 1, max: 1 }
              humidifier-threshold: 45
        """,
    ]

    /// A config for the shipped simulated home on `base`, Home Assistant discovery on; with
    /// `issueDevices`, the home is a copy with those accessories added.
    static func config(brokerURL: String, base: String, clientID: String, issueDevices: Bool = false) throws -> (
        TemporaryDirectory, String
    ) {
        let directory = try TemporaryDirectory(prefix: "homemqtt-ha")
        let path = directory.file("gateway.yml")
        var accessories = repositoryRoot.appendingPathComponent("Config/accessories").path
        if issueDevices {
            let copy = directory.file("accessories")
            try FileManager.default.copyItem(atPath: accessories, toPath: copy)
            for (file, yaml) in Self.issueDevices {
                try yaml.write(toFile: copy + "/" + file, atomically: true, encoding: .utf8)
            }
            accessories = copy
        }
        let yaml = """
            broker:
              url: \(brokerURL)
              client-id: \(clientID)
            base-topic: \(base)
            state-directory: state
            poll-interval: 0
            sources:
              - type: simulator
                directory: \(accessories)
            log-level: warning
            """
        try yaml.write(toFile: path, atomically: true, encoding: .utf8)
        return (directory, path)
    }

    /// `homemqtt run` on `path`, once it says `online` on `<base>/$gateway/status`.
    static func start(_ path: String, base: String, broker: MosquittoBroker) async throws -> ChildProcess {
        let watcher = try await MQTTTestSubscriber.start(
            broker: broker, filter: "\(base)/$gateway/status", clientID: "status-\(UUID().uuidString.prefix(6))")
        TestCensus.record(.binary)
        let gateway = try ChildProcess(homemqttBinary, ["run", "--config", path])
        try await watcher.waitForMessage("\(base) online", timeout: 30) { message in
            !gateway.isRunning || (!message.retain && message.string == "online")
        }
        await watcher.stop()
        guard gateway.isRunning else { throw ProcessError("homemqtt exited: \(gateway.standardError)") }
        return gateway
    }

    /// The retained messages under `filter`, once the broker has sent them.
    static func retained(_ broker: MosquittoBroker, _ filter: String) async throws -> [String: String] {
        try await broker.retainedSnapshot(filter)
    }

    func testTwoGatewaysOnOneBrokerKeepTheirConfigsApart() async throws {
        let broker = try await MosquittoBroker.start()
        addTeardownBlock { await broker.stop() }
        let (siteA, pathA) = try Self.config(brokerURL: broker.url, base: "site-a", clientID: "gw-a")
        let first = try await Self.start(pathA, base: "site-a", broker: broker)
        addTeardownBlock { await first.terminate(grace: 2) }
        let one = try await Self.retained(broker, "homeassistant/device/+/config")
        XCTAssertGreaterThan(one.count, 5)
        let (siteB, pathB) = try Self.config(brokerURL: broker.url, base: "site-b", clientID: "gw-b")
        let second = try await Self.start(pathB, base: "site-b", broker: broker)
        addTeardownBlock { await second.terminate(grace: 2) }
        try await Task.sleep(for: .seconds(1))
        let both = try await Self.retained(broker, "homeassistant/device/+/config")
        XCTAssertEqual(both.count, 2 * one.count, "each gateway's configs: \(both.keys.sorted())")
        var uniqueIDs: [String] = []
        for payload in both.values {
            let document = try JSONValue(parsing: payload)
            for component in document["components"]?.objectValue?.values ?? [:].values {
                uniqueIDs += [component["unique_id"]?.stringValue ?? ""]
            }
        }
        XCTAssertEqual(uniqueIDs.count, Set(uniqueIDs).count, "unique ids are unique across the two gateways")
        // A restart gives the same topics and ids.
        await second.terminate(grace: 5)
        let again = try await Self.start(pathB, base: "site-b", broker: broker)
        addTeardownBlock { await again.terminate(grace: 2) }
        try await Task.sleep(for: .seconds(1))
        let afterRestart = try await Self.retained(broker, "homeassistant/device/+/config")
        XCTAssertEqual(Set(afterRestart.keys), Set(both.keys))
        _ = (siteA, siteB)
    }

    /// Every kind of command Home Assistant can send for the simulated home's entities and the
    /// issue's devices (every
    /// mode and payload, a range's ends and points between), sent as Home Assistant sends it
    /// (template applied) with mosquitto_pub: each answered `ok` on its `result` (or `$result`).
    func testWhatHomeAssistantSendsIsAnsweredOK() async throws {
        let broker = try await MosquittoBroker.start()
        addTeardownBlock { await broker.stop() }
        let (directory, path) = try Self.config(
            brokerURL: broker.url, base: "home", clientID: "gw-ha", issueDevices: true)
        let gateway = try await Self.start(path, base: "home", broker: broker)
        addTeardownBlock { await gateway.terminate(grace: 2) }
        let configs = try await Self.retained(broker, "homeassistant/device/+/config")
        XCTAssertGreaterThan(configs.count, 5)
        let results = try await MQTTTestSubscriber.start(broker: broker, filter: "home/#", clientID: "ha-results")
        addTeardownBlock { await results.stop() }
        var sent = 0
        var throughSet = 0
        for (topic, payload) in configs.sorted(by: { $0.key < $1.key }) {
            let document = try JSONValue(parsing: payload)
            for (key, component) in document["components"]?.objectValue ?? [:] {
                let config = try XCTUnwrap(component.objectValue)
                let platform = try XCTUnwrap(config["platform"]?.stringValue)
                for (option, value) in config where option.hasSuffix("_topic") {
                    guard HACommands.isCommand(option), let command = value.stringValue else {
                        continue
                    }
                    let all = try HACommands.commands(platform: platform, option: option, config)
                    // Every mode, option and payload; of a range, its ends and three points between.
                    let picked =
                        all.count <= 8
                        ? Array(all.indices)
                        : Set((0...4).map { (all.count - 1) * $0 / 4 }).sorted()
                    for index in picked {
                        let variables = all[index]
                        var text = variables["value"]?.text ?? ""
                        if let template = config[option.replacingOccurrences(of: "_topic", with: "_template")]?
                            .stringValue
                        {
                            text = try XCTUnwrap(try HATemplate.render(template, variables: variables))
                        }
                        // `…/set` is answered on `…/result`, `<accessory>/$set` on `<accessory>/$result`.
                        let resultTopic = String(command.dropLast("set".count)) + "result"
                        results.clear()
                        try await runChecked("mosquitto_pub", broker.clientArguments + ["-t", command, "-m", text])
                        let answer = try await results.waitForMessage("\(resultTopic) for '\(text)'", timeout: 10) {
                            $0.topic == resultTopic
                        }
                        let json = try JSONValue(parsing: answer.string)
                        XCTAssertEqual(
                            json["status"], "ok",
                            "\(topic) \(key).\(option): '\(text)' on \(command) → \(answer.string)")
                        sent += 1
                        if command.hasSuffix("/$set") { throughSet += 1 }
                    }
                }
            }
        }
        print(
            "figure: \(sent) commands (\(throughSet) through $set) of Home Assistant's sent through the binary, each answered ok"
        )
        XCTAssertGreaterThan(sent, 90)
        // What Home Assistant reads back: the heater-cooler's mode, from its `$state` through the
        // config's template, is one of the modes it offers.
        let heater = try XCTUnwrap(
            configs.values.first { $0.contains("\"Heat Pump\"") }.map { try JSONValue(parsing: $0) })
        let climate = try XCTUnwrap(
            heater["components"]?.objectValue?.values.first { $0["platform"] == "climate" }?.objectValue)
        XCTAssertEqual(climate["modes"], ["off", "heat_cool", "heat", "cool"])
        let stateTopic = try XCTUnwrap(climate["mode_state_topic"]?.stringValue)
        try await Task.sleep(for: .milliseconds(300))
        let state = try await Self.retained(broker, stateTopic)
        let shown = try HATemplate.render(
            try XCTUnwrap(climate["mode_state_template"]?.stringValue), value: try XCTUnwrap(state[stateTopic]))
        XCTAssertTrue(["off", "heat_cool", "heat", "cool"].contains(shown ?? ""), "\(shown ?? "nil")")
        let humidifier = try XCTUnwrap(configs.values.first { $0.contains("\"VOCOlinc Humidifier\"") })
        XCTAssertFalse(humidifier.contains("\"modes\""), "one mode is no choice: \(humidifier)")
        XCTAssertGreaterThan(throughSet, 0, "colours go through the accessory's $set")
        _ = directory
    }
}
