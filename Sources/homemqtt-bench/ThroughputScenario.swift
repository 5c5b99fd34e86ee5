import Foundation
import Gateway
import HomeModel
import MQTT
import Harness

/// Scenario 1: notifications from a simulated home, as fast as the source produces them, until
/// a subscriber has them all; against the same messages from a bare publisher.
enum ThroughputScenario {
    static let name = "1 notification throughput"

    static func run(scale: Scale) async throws -> [Row] {
        let accessories = scale == .full ? 1000 : 10
        let rounds = scale == .full ? 10 : 2
        return try await withBroker { broker in
            try await measure(
                broker: broker, accessories: accessories, rounds: rounds, repetitions: scale == .full ? 3 : 1)
        }
    }

    /// One pair of runs: the gateway's notifications and the bare publisher's, in messages a
    /// second, and how fast the source was fed meanwhile (`setValue` calls a second).
    struct Pair {
        var ours: Double
        var bare: Double
        var produced: Double
        /// CPU time per message of this process and the broker together (seconds): the same
        /// subscriber in both runs, and the gateway in one, the bare publisher in the other.
        var oursCPU: Double
        var bareCPU: Double
        /// The bare publisher's run came first.
        var bareFirst: Bool
    }

    /// CPU time so far of this process and the broker's (utime + stime, in 10 ms ticks: four
    /// readings of a run's ~5 s of CPU are each within a tick, under 1 % of it).
    static func cpuSeconds(_ broker: MosquittoBroker) throws -> Double {
        guard let pid = broker.pid else { throw BenchError("the broker is not running") }
        return try IdleScenario.sample(getpid()).cpuSeconds + IdleScenario.sample(pid).cpuSeconds
    }

    static func measure(broker: MosquittoBroker, accessories: Int, rounds: Int, repetitions: Int) async throws -> [Row]
    {
        let files = try TemporaryDirectory(prefix: "homemqtt-bench-home")
        let directory = URL(fileURLWithPath: files.path).appendingPathComponent("accessories")
        try HomeGenerator.write(to: directory, accessories: accessories, services: 2, shape: .colourLight)

        return try await InProcessGateway.with(broker: broker, accessories: directory) { gateway in
            let lightbulb = Catalog.serviceType(named: "lightbulb")?.uuid
            var targets: [(CharacteristicAddress, CharacteristicMetadata)] = []
            for accessory in await gateway.home.accessories() {
                for service in accessory.services where service.type == lightbulb {
                    for c in service.characteristics where c.metadata.permissions.contains(.notify) {
                        targets.append((CharacteristicAddress(accessoryID: accessory.id, iid: c.iid), c.metadata))
                    }
                }
            }
            guard targets.count == accessories * 10 else {
                await gateway.stop()
                throw BenchError(
                    "expected \(accessories * 10) notifying characteristics, the home has \(targets.count)")
            }
            try await gateway.waitForNotifications(count: targets.count)
            let total = targets.count * rounds
            let qos = gateway.config.qos

            // Live deliveries only: on subscribing, the broker first sends every retained `state`
            // of the home (20,000 at full size). They are not notifications and are not counted
            // (`matches`), and they have all arrived (`settle`) before the first run starts, so
            // that no run shares the broker and the subscriber with them.
            let (pairs, cliRate, cliCount, messages) = try await CountingSubscriber.with(
                broker: broker, filter: "home/+/+/+/+/state", matches: { !$0.retain }
            ) { subscriber in
                try await subscriber.settle(marker: "home/bench-settle/marker/marker/marker/state")
                var configuration = broker.clientConfiguration(clientID: "bench-bare-publisher")
                GatewayConfig.applyGatewayOptions(&configuration)
                let publisher = MQTTClient(configuration: configuration, logger: quietLogger)
                try await publisher.connect()

                // Pairs of runs, the gateway's and the bare publisher's on the same messages,
                // seconds apart: this machine's speed drifts by a tenth from minute to minute, and
                // a ratio of two runs far apart measured the drift as much as the gateway. Each
                // side idles while the other runs; the second pair runs the bare publisher first
                // (on the first pair's messages: the same topics and payloads, values by round
                // parity), so that neither side always follows the other.
                //
                // Each run starts after the same 100 ms pause and its CPU is read after another:
                // the gateway's last `$state` documents go once its outbox has drained, and its
                // last acknowledgements come after its last `state`; the pause takes them in.
                //
                // One run: `body` publishes, and it ends when the subscriber has `total` messages;
                // its rate, its CPU per message, and what the subscriber recorded (both sides
                // record, so that the subscriber does the same work).
                func run(_ what: String, _ body: () async throws -> Void) async throws -> (
                    rate: Double, cpu: Double, messages: [MQTTMessage]
                ) {
                    try await Task.sleep(for: .milliseconds(100))
                    subscriber.reset(recording: true)
                    let cpuStart = try cpuSeconds(broker)
                    let start = ContinuousClock.now
                    try await body()
                    let last = try await subscriber.waitFor(count: total, timeout: 300, what: what)
                    let messages = subscriber.recorded
                    try await Task.sleep(for: .milliseconds(100))
                    let cpu = (try cpuSeconds(broker) - cpuStart) / Double(total)
                    return (Double(total) / elapsed(start, last), cpu, messages)
                }
                func gatewayRun(_ repetition: Int) async throws -> (
                    rate: Double, cpu: Double, produced: Double, messages: [MQTTMessage]
                ) {
                    var produced = 0.0
                    let run = try await run("the gateway's notifications") {
                        let fed = ContinuousClock.now
                        for round in (repetition * rounds + 1)...((repetition + 1) * rounds) {
                            for (address, metadata) in targets {
                                try await gateway.home.setValue(
                                    address, HomeGenerator.value(for: metadata, round: round))
                            }
                        }
                        produced = Double(total) / elapsed(fed)
                    }
                    return (run.rate, run.cpu, produced, run.messages)
                }
                // The same messages — topics, payloads, QoS, retained, and the MQTT 5 properties
                // each came with (content type, payload format) — from our MQTT module alone.
                func bareRun(_ messages: [MQTTMessage]) async throws -> (rate: Double, cpu: Double) {
                    let run = try await run("the bare publisher's messages") {
                        for message in messages {
                            try await publisher.publish(
                                message.topic, payload: message.payload, qos: qos, retain: true,
                                properties: message.properties)
                        }
                    }
                    return (run.rate, run.cpu)
                }

                var pairs: [Pair] = []
                var messages: [MQTTMessage] = []
                for repetition in 0..<repetitions {
                    let ours: (rate: Double, cpu: Double, produced: Double, messages: [MQTTMessage])
                    let bare: (rate: Double, cpu: Double)
                    if repetition % 2 == 1 {
                        bare = try await bareRun(messages)
                        ours = try await gatewayRun(repetition)
                    } else {
                        ours = try await gatewayRun(repetition)
                        bare = try await bareRun(ours.messages)
                    }
                    messages = ours.messages
                    pairs.append(
                        Pair(
                            ours: ours.rate, bare: bare.rate, produced: ours.produced, oursCPU: ours.cpu,
                            bareCPU: bare.cpu, bareFirst: repetition % 2 == 1))
                }
                await publisher.disconnect()
                await gateway.stop()

                // mosquitto_pub -l: one line per message, all to one topic (it cannot vary the topic).
                let lines = files.file("payloads.txt")
                try messages.map { $0.string }.joined(separator: "\n").appending("\n").write(
                    toFile: lines, atomically: false, encoding: .utf8)
                subscriber.reset()
                let cliStart = ContinuousClock.now
                let arguments =
                    (broker.clientArguments + ["-q", String(qos.rawValue), "-r", "-t", messages[0].topic, "-l"])
                    .map { "'\($0)'" }.joined(separator: " ")
                let cli = try ChildProcess("sh", ["-c", "exec mosquitto_pub \(arguments) < '\(lines)'"])
                // mosquitto_pub waits for each PUBACK in turn (QoS 1): give it a time budget rather than
                // the whole run, and count what arrived within it.
                let cliLast = try? await subscriber.waitFor(count: total, timeout: 30, what: "mosquitto_pub's messages")
                let (cliCount, cliEnd) = subscriber.tally.state.withLock { ($0.count, $0.last) }
                let cliRate = Double(cliCount) / elapsed(cliStart, cliLast ?? cliEnd ?? .now)
                await cli.terminate(grace: 2)
                return (pairs, cliRate, cliCount, messages)
            }

            let ratios = pairs.map { $0.ours / $0.bare }
            let ratio = Stats.median(ratios)
            let ours = Stats.median(pairs.map(\.ours))
            let bare = Stats.median(pairs.map(\.bare))
            let bytes = messages.map { $0.topic.utf8.count + $0.payload.count }.reduce(0, +) / max(messages.count, 1)
            let label =
                "\(accessories) acc × 10 char × \(rounds) rounds = \(total) msgs (QoS \(qos.rawValue), retained, ~\(bytes) B topic+payload); "
                + (pairs.count == 1
                    ? "one pair of runs"
                    : "median of \(pairs.count) pairs of runs ("
                        + zip(pairs, ratios).map { ($0.bareFirst ? "bare first " : "") + Format.ratio($1) }
                        .joined(separator: ", ") + "; lowest " + Format.ratio(ratios.min() ?? .nan) + ")")
            return [
                Row(
                    name, "msg/s received; " + label, ours: Format.rate(ours),
                    baseline: "bare publisher " + Format.rate(bare),
                    ratio: Format.ratio(ratio), target: "≥ 0.95×", met: Format.met(ratio >= 0.95)),
                Row(
                    name, "msg/s received, vs mosquitto_pub -l (one topic)", ours: Format.rate(ours),
                    baseline: "mosquitto_pub " + Format.rate(cliRate)
                        + (cliCount < total ? " (\(cliCount) of \(total) in 30 s)" : ""),
                    ratio: Format.ratio(ours / cliRate)),
                Row(
                    name, "CPU time per message, this process (subscriber; gateway or bare publisher) + broker",
                    ours: Format.micros(Stats.median(pairs.map(\.oursCPU))),
                    baseline: "bare publisher " + Format.micros(Stats.median(pairs.map(\.bareCPU))),
                    // At `--scale small` a run may take less CPU than one clock tick.
                    ratio: pairs.allSatisfy { $0.bareCPU > 0 }
                        ? Format.ratio(Stats.median(pairs.map { $0.oursCPU / $0.bareCPU })) : "—"),
                Row(
                    name, "source production rate during the run (setValue calls/s)",
                    ours: Format.rate(Stats.median(pairs.map(\.produced)))),
            ]
        }
    }
}
