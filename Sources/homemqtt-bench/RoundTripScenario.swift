import Foundation
import Gateway
import HomeModel
import MQTT
import Harness

/// Scenario 2: `set` → source write → `state` received, one at a time; against a bare echo
/// client (subscribes A, publishes B) through the same broker.
enum RoundTripScenario {
    static let name = "2 write round trip"

    static func run(scale: Scale) async throws -> [Row] {
        let (accessories, writes, warmup) = scale == .full ? (100, 10_000, 500) : (5, 50, 5)
        return try await withBroker { broker in
            let files = try TemporaryDirectory(prefix: "homemqtt-bench-home")
            let directory = URL(fileURLWithPath: files.path).appendingPathComponent("accessories")
            try HomeGenerator.write(to: directory, accessories: accessories, services: 2, shape: .colourLight)

            let (ours, qos) = try await InProcessGateway.with(broker: broker, accessories: directory) { gateway in
                (
                    try await gatewayRoundTrips(gateway, broker: broker, count: writes, warmup: warmup),
                    gateway.config.qos
                )
            }
            let baseline = try await echoRoundTrips(broker: broker, qos: qos, count: writes, warmup: warmup)

            let p50 = Stats.percentile(ours, 50), p99 = Stats.percentile(ours, 99)
            let b50 = Stats.percentile(baseline, 50), b99 = Stats.percentile(baseline, 99)
            let added = p50 - b50
            return [
                Row(
                    name, "p50 of \(writes) sequential writes (\(accessories)-accessory home)",
                    ours: Format.micros(p50),
                    baseline: "echo client " + Format.micros(b50), ratio: Format.ratio(p50 / b50),
                    target: "adds ≤ 20 µs (adds \(Format.micros(added)))", met: Format.met(added <= 20e-6)),
                Row(
                    name, "p99 of \(writes) sequential writes", ours: Format.micros(p99),
                    baseline: "echo client " + Format.micros(b99), ratio: Format.ratio(p99 / b99),
                    target: "adds ≤ 60 µs (adds \(Format.micros(p99 - b99)))", met: Format.met(p99 - b99 <= 60e-6)),
            ]
        }
    }

    static func gatewayRoundTrips(_ gateway: InProcessGateway, broker: MosquittoBroker, count: Int, warmup: Int)
        async throws -> [Double]
    {
        let brightness = Catalog.characteristicType(named: "brightness")?.uuid
        let accessories = await gateway.home.accessories()
        var address: CharacteristicAddress?
        for accessory in accessories {
            for service in accessory.services {
                if let c = service.characteristics.first(where: { $0.type == brightness }) {
                    address = CharacteristicAddress(accessoryID: accessory.id, iid: c.iid)
                    break
                }
            }
            if address != nil { break }
        }
        guard let address, let node = await gateway.gateway.tree.characteristic(address) else {
            throw BenchError("the generated home has no brightness in the gateway's tree")
        }
        return try await measure(
            broker: broker, qos: gateway.config.qos, request: node.topic + "/set",
            answer: node.topic + "/state", count: count, warmup: warmup)
    }

    static func echoRoundTrips(broker: MosquittoBroker, qos: MQTTQoS, count: Int, warmup: Int) async throws -> [Double]
    {
        var configuration = broker.clientConfiguration(clientID: "bench-echo")
        GatewayConfig.applyGatewayOptions(&configuration)
        let echo = MQTTClient(configuration: configuration, logger: quietLogger)
        let stream = echo.messages()
        try await echo.connect()
        try await echo.subscribe("bench/echo/request", qos: .atLeastOnce)
        // The responder is a child of this scope: it ends when the disconnect finishes its stream.
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for await message in stream {
                    try? await echo.publish("bench/echo/answer", payload: message.payload, qos: qos, retain: true)
                }
            }
            do {
                let samples = try await measure(
                    broker: broker, qos: qos, request: "bench/echo/request",
                    answer: "bench/echo/answer", count: count, warmup: warmup)
                await echo.disconnect()
                return samples
            } catch {
                await echo.disconnect()
                throw error
            }
        }
    }

    /// Publishes a value to `request` and waits until `answer` carries it, `count` times after
    /// `warmup` unrecorded rounds. Values cycle through 1…40, so consecutive ones always differ
    /// (the gateway publishes a state only when it changes) and none is the starting 50.
    static func measure(broker: MosquittoBroker, qos: MQTTQoS, request: String, answer: String, count: Int, warmup: Int)
        async throws -> [Double]
    {
        let client = MQTTClient(
            configuration: broker.clientConfiguration(clientID: "bench-round-trip"), logger: quietLogger)
        let stream = client.messages()
        try await client.connect()
        try await client.subscribe(answer, qos: .atLeastOnce)
        var iterator = stream.makeAsyncIterator()
        var samples: [Double] = []
        samples.reserveCapacity(count)
        for n in 0..<(warmup + count) {
            let payload = Array(String(1 + n % 40).utf8)
            let start = ContinuousClock.now
            try await client.publish(request, payload: payload, qos: qos)
            while true {
                guard let message = await iterator.next() else {
                    throw BenchError("the connection closed while waiting for \(answer)")
                }
                if message.topic == answer && message.payload == payload { break }
            }
            if n >= warmup { samples.append(elapsed(start)) }
        }
        await client.disconnect()
        return samples
    }
}
