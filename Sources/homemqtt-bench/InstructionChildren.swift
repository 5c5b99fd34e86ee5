import ArgumentParser
import Foundation
import HAP
import HomeMQTTApp
import Logging
import MQTT

// The processes scenario 7 runs under callgrind besides `gateway-child`: the round trip's echo
// client and our HAP controller's reads.

/// The round trip's baseline as a process of its own (scenario 2's echo client): our MQTT module
/// connected with a gateway config's connection settings (another client id), subscribed to
/// `request`, publishing each payload that arrives to `answer` (the gateway's QoS, retained, as
/// the gateway publishes a state); prints `ready` once subscribed. SIGTERM ends it.
struct EchoChild: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "echo-child",
        abstract: "Answer each message on one topic on another (used by the instructions scenario).",
        shouldDisplay: false
    )

    @Option var config: String
    @Option var request = "bench/echo/request"
    @Option var answer = "bench/echo/answer"

    func run() async throws {
        bootstrapLogging(level: .warning)
        let config = try HomeMQTTApp.loadConfig(file: config)
        var mqtt = config.mqtt
        mqtt.clientID = "homemqtt-bench-echo"
        let client = MQTTClient(configuration: mqtt, logger: Logger(label: "homemqtt.bench.echo"))
        let messages = client.messages()
        try await client.connect()
        try await client.subscribe([(request, .atLeastOnce)])
        FileHandle.standardOutput.write(Data("ready\n".utf8))
        for await message in messages {
            try? await client.publish(answer, payload: message.payload, qos: config.qos, retain: true)
        }
    }
}

/// Our HAP controller reading one characteristic `reads` times (after `warmup` reads) over one
/// verified connection, with a pairing saved in `pairings`; prints `read N` and exits.
struct HAPReadsChild: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hap-reads-child",
        abstract: "Read a paired accessory's characteristic N times (used by the instructions scenario).",
        shouldDisplay: false
    )

    @Option(help: "The pairing store's directory.") var pairings: String
    @Option(help: "The accessory's pairing id.") var accessory: String
    @Option var aid: UInt64
    @Option var iid: UInt64
    @Option var reads: Int
    @Option var warmup = 0

    func run() async throws {
        bootstrapLogging(level: .warning)
        let store = HAPPairingStore(directory: URL(fileURLWithPath: pairings))
        guard let pairing = try store.pairing(id: accessory) else {
            throw BenchError("no pairing with \(accessory) in \(pairings)")
        }
        let controller = HAPController(store: store, logger: Logger(label: "homemqtt.bench.hap"))
        let connection = try await controller.connect(pairing)
        let target = HAPCharacteristicID(aid: aid, iid: iid)
        for _ in 0..<(warmup + reads) {
            let answer = try await connection.readCharacteristics([target])
            guard case .success = answer[target] else {
                await connection.close()
                throw BenchError("read of \(target) failed")
            }
        }
        await connection.close()
        print("read \(reads)")
    }
}
