import Foundation
import HomeModel
import MQTT
import TestSupport
import XCTest

/// The gateway under mosquitto's `max_packet_size` on MQTT 3.1.1 without
/// `broker.max-packet-size`: mosquitto closes the connection at the first packet over its limit
/// and the MQTT client learns the limit from that. The memory broker does not model a limit it
/// never told (it would have to drop the connection the way mosquitto does and the client
/// learn from it as libmosquitto's loss reaches it), so this stays on the binary and mosquitto.
/// The told limits (MQTT 5's CONNACK, 3.1.1's `broker.max-packet-size`) moved to
/// `PacketLimitTests` in GatewayTests, on the rigs. The lamps and the config are shared with
/// `BrokerRefusalTests` and `BrokerDowngradeTests`.
final class PacketLimitTests: XCTestCase {
    static let lamps = 100

    /// `count` colour lamps in 10 rooms, as simulator accessory files.
    static func writeLamps(_ count: Int, to directory: String) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for index in 1...count {
            let number = String(format: "%03d", index)
            try """
            name: Limit Lamp \(number)
            manufacturer: HomeMQTT Tests
            model: LL-1
            serial: LL-\(number)
            firmware: 1.0.0
            room: Room \((index - 1) % 10 + 1)
            services:
              - type: lightbulb
                name: Lamp
                behaviour: none
                characteristics:
                  power-state: false
                  brightness: 50
                  hue: 0
                  saturation: 0
                  color-temperature: 200

            """.write(toFile: "\(directory)/lamp-\(number).yml", atomically: false, encoding: .utf8)
        }
    }

    /// A config for a broker at `port` serving `accessories`, with `broker` lines added.
    static func writeConfig(
        in directory: TemporaryDirectory, port: Int, clientID: String, accessories: String, broker: [String] = []
    ) throws -> String {
        let path = directory.file("gateway.yml")
        try """
        broker:
          url: mqtt://127.0.0.1:\(port)
          client-id: \(clientID)
        \(broker.map { "  \($0)" }.joined(separator: "\n"))
        state-directory: state
        poll-interval: 0
        sources:
          - type: simulator
            directory: \(accessories)
        homeassistant:
          enabled: false
        log-level: info
        """.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    static func strings(_ value: JSONValue?) -> Set<String> {
        guard case .array(let list)? = value else { return [] }
        return Set(list.compactMap { if case .string(let text) = $0 { text } else { nil } })
    }

    /// MQTT 3.1.1 without `broker.max-packet-size`: the broker closes the connection at the
    /// first packet over its limit; the gateway learns the limit from it and reconnects once
    /// (`BrokerRefusalTests` follows it through). The log says what it learned, once, and names
    /// the setting.
    func testAnUntoldLimitOnMQTT311IsNamedInTheLog() async throws {
        let broker = try await MosquittoBroker.start(.init(extraConfiguration: ["max_packet_size 65536"]))
        addTeardownBlock { await broker.stop() }
        let directory = try TemporaryDirectory(prefix: "homemqtt-untold")
        try Self.writeLamps(Self.lamps, to: directory.file("accessories"))
        let config = try Self.writeConfig(
            in: directory, port: broker.port, clientID: "homemqtt-untold", accessories: directory.file("accessories"),
            broker: ["protocol: 3.1.1"])
        TestCensus.record(.binary)
        let gateway = try ChildProcess(BinaryEndToEndTests.binary, ["run", "--config", config])
        addTeardownBlock { await gateway.terminate(grace: 2) }
        let hint = "set broker.max-packet-size"
        try await waitUntil("the hint", timeout: 30, pollInterval: 0.2) { gateway.standardError.contains(hint) }
        try await Task.sleep(for: .seconds(3))
        let log = gateway.standardError
        XCTAssertEqual(log.components(separatedBy: hint).count - 1, 1, log)
        XCTAssertEqual(broker.log.components(separatedBy: "as homemqtt-untold").count - 1, 2, broker.log)
    }
}
