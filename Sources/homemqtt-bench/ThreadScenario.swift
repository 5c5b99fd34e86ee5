import Foundation
import Harness
import MQTT

/// Scenario 9: HAP over Thread, the controller's side (issue 42). The `homemqtt` binary beside the
/// bench serves two generated lightbulbs as simulated Thread accessories (`homekit: thread`: HAP
/// over CoAP on UDP, `::1`), one for each client: our controller (`homemqtt-bench thread-client`,
/// `HAPCoAPController` over libcoap) and aiohomekit 4.0.1's own CoAP controller
/// (Scripts/bench-thread-aiohomekit.py, on aiocoap). Both speak one line protocol; three rounds,
/// alternating which goes first: read and write latency, the client process's CPU per read and
/// per write (getrusage around each loop, in the client), and the events per second one
/// subscribed client takes from its accessory (changes made by MQTT `set`s on the gateway).
/// Each client is its own process, so a figure is the client's alone; the accessory is the same
/// code for both.
enum ThreadScenario {
    static let name = "9 thread"
    static let rounds = 3
    static let (ours, theirs) = ("homemqtt", "aiohomekit")

    struct Figures {
        var read = 0.0
        var write = 0.0
        var readCPU = 0.0
        var writeCPU = 0.0
        var eventsPerSecond = 0.0
        var delivered = 0
    }

    /// A client under measurement and the accessory it paired with.
    struct Side {
        var name: String
        var driver: BridgeDriver
        var iid: Int
        /// The MQTT `set` topic of its accessory's brightness: what drives its events.
        var setTopic: String
    }

    static func run(scale: Scale) async throws -> [Row] {
        if let reason = HAPPeer.unavailableReason {
            return [Row(name, "Thread client rows against aiohomekit", ours: "blocked", met: "blocked: \(reason)")]
        }
        let homemqtt = try builtProduct("homemqtt")
        let bench = try builtProduct("homemqtt-bench")
        let (operations, events) = scale == .full ? (2000, 1000) : (20, 20)
        let files = try TemporaryDirectory(prefix: "homemqtt-bench-thread")
        let directory = URL(fileURLWithPath: files.path).appendingPathComponent("accessories")
        try HomeGenerator.write(to: directory, accessories: 2, services: 1, shape: .colourLight)
        for index in 1...2 {
            let file = directory.appendingPathComponent("light-\(HomeGenerator.number(index, of: 2)).yml")
            let text = try String(contentsOf: file, encoding: .utf8)
            try ("homekit: thread\n" + text).write(to: file, atomically: false, encoding: .utf8)
        }
        return try await withBroker { broker in
            let config = try BridgeScenario.writeConfig(
                files: files, broker: broker, accessories: directory, port: try freePort())
            return try await CountingSubscriber.with(
                broker: broker, filter: "home/#", statusTopic: "home/$gateway/status"
            ) { subscriber in
                subscriber.reset(recording: true)
                let gateway = try ChildProcess(homemqtt, ["run", "--config", config])
                var drivers: [BridgeDriver] = []
                do {
                    _ = try await subscriber.waitOnline(timeout: 300, what: "homemqtt to say online") {
                        gateway.isRunning
                            ? nil
                            : "homemqtt exited (\(gateway.exitStatus ?? -1)): \(gateway.standardError.suffix(600))"
                    }
                    let served = try await accessories(homemqtt, config: config, gateway: gateway)
                    var sides: [Side] = []
                    var version = "?"
                    for (index, (side, driver)) in [
                        (ours, try await BridgeDriver(executable: bench, arguments: ["thread-client"])),
                        (theirs, try await BridgeDriver(arguments: [threadScript.path])),
                    ].enumerated() {
                        drivers.append(driver)
                        let (id, code, port) = served[index]
                        let paired = try await driver.call(
                            "pair", ["host": "::1", "port": port, "code": code], timeout: 120)
                        guard let iid = paired["iid"] as? Int else { throw BenchError("\(side)'s pair: \(paired)") }
                        if let v = paired["version"] as? String { version = v }
                        _ = try await driver.call("subscribe", ["iid": iid])
                        let slug = "/bench-light-\(id.dropFirst("sim:light-".count))/"
                        guard
                            let state = subscriber.recorded.first(where: {
                                $0.topic.contains(slug) && $0.topic.hasSuffix("/brightness/state")
                            })
                        else { throw BenchError("homemqtt published no brightness state under \(slug)") }
                        sides.append(
                            Side(
                                name: side, driver: driver, iid: iid,
                                setTopic: String(state.topic.dropLast("state".count)) + "set"))
                    }
                    var figures: [String: [Figures]] = [:]
                    for round in 0..<rounds {
                        for side in round % 2 == 0 ? sides : sides.reversed() {
                            figures[side.name, default: []].append(
                                try await measure(
                                    side, operations: operations, events: events, client: subscriber.client))
                        }
                    }
                    for driver in drivers { await driver.stop() }
                    await gateway.terminate(grace: 10)
                    return rows(figures, operations: operations, events: events, version: version)
                } catch {
                    for driver in drivers { await driver.stop() }
                    await gateway.terminate(grace: 5)
                    throw error
                }
            }
        }
    }

    static let threadScript = HAPPeer.repositoryRoot.appendingPathComponent("Scripts/bench-thread-aiohomekit.py")

    /// The two Thread accessories the gateway serves: id, setup code and UDP port of each, from
    /// `homemqtt homekit code` (the codes, read from the state directory) and `homekit status`.
    static func accessories(_ homemqtt: String, config: String, gateway: ChildProcess) async throws
        -> [(id: String, code: String, port: Int)]
    {
        var found: [(String, String, Int)] = []
        for index in 1...2 {
            let id = "sim:light-\(HomeGenerator.number(index, of: 2))"
            var port: Int?
            var code: String?
            // The accessory's server starts beside the gateway's MQTT side: asked until it listens.
            try await waitUntil("homemqtt's Thread accessory \(id) to listen", timeout: 60, pollInterval: 0.2) {
                if !gateway.isRunning { throw BenchError("homemqtt exited: \(gateway.standardError.suffix(600))") }
                let status = try await runProcess(
                    homemqtt, ["homekit", "status", "--config", config, "--accessory", id], timeout: 30)
                let object = try? JSONSerialization.jsonObject(with: Data(status.standardOutput.utf8))
                port = (object as? [String: Any])?["port"] as? Int
                return port != nil
            }
            let listed = try await runProcess(
                homemqtt, ["homekit", "code", "--config", config, "--no-qr"], timeout: 30)
            for line in listed.standardOutput.split(separator: "\n") where line.contains(", \(id), standalone, Thread)")
            {
                code = line.split(separator: " ").first.map(String.init)
            }
            guard let port, let code else {
                throw BenchError("no code or port for \(id): \(listed.standardOutput) \(listed.standardError)")
            }
            found.append((id, code, port))
        }
        return found
    }

    /// One round on one client.
    static func measure(_ side: Side, operations: Int, events: Int, client: MQTTClient) async throws -> Figures {
        var figures = Figures()
        for (op, latency, cpu) in [("reads", \Figures.read, \Figures.readCPU), ("writes", \.write, \.writeCPU)] {
            let answer = try await side.driver.call(op, ["count": operations, "iid": side.iid])
            guard let samples = answer["samples"] as? [Double], samples.count == operations,
                let seconds = answer["cpu"] as? Double
            else { throw BenchError("\(side.name)'s \(op) answered \(answer.keys.sorted())") }
            figures[keyPath: latency] = Stats.median(samples)
            figures[keyPath: cpu] = seconds / Double(operations)
        }
        // Timed from the first event to the last: what the client takes, not how fast MQTT is told.
        _ = try await side.driver.call("listen", ["iid": side.iid])
        try await BridgeScenario.drive(client, side.setTopic, events)
        let heard = try await side.driver.call("wait", ["timeout": 120], timeout: 150)
        guard let delivered = heard["count"] as? Int, let first = heard["first"] as? Double,
            let last = heard["last"] as? Double, delivered > 1, last > first
        else { throw BenchError("\(side.name)'s events: \(heard)") }
        figures.delivered = delivered
        figures.eventsPerSecond = Double(delivered - 1) / (last - first)
        return figures
    }

    /// Each figure as the median of the rounds beside aiohomekit's, the ratio of the two medians,
    /// and each round's own ratio in the metric.
    static func rows(_ figures: [String: [Figures]], operations n: Int, events: Int, version: String) -> [Row] {
        let (mine, other) = (figures[ours] ?? [], figures[theirs] ?? [])
        let baseline = "aiohomekit \(version) "
        let full = n >= 1000
        func row(
            _ metric: String, _ value: (Figures) -> Double, _ format: (Double) -> String, target: Double? = nil
        ) -> Row {
            let (a, b) = (Stats.median(mine.map(value)), Stats.median(other.map(value)))
            func ratio(_ a: Double, _ b: Double) -> String { b > 0 ? Format.ratio(a / b) : "—" }
            let each = zip(mine, other).map { ratio(value($0), value($1)) }.joined(separator: ", ")
            return Row(
                name, "\(metric); rounds \(each)", ours: format(a), baseline: baseline + format(b), ratio: ratio(a, b),
                target: target.map { "≤ " + String(format: "%.2f×", $0) } ?? "—",
                met: full && b > 0 ? target.map { Format.met(a / b <= $0) } ?? "—" : "—")
        }
        let delivered = zip(mine, other).map { "\($0.delivered)/\($1.delivered)" }.joined(separator: ", ")
        return [
            row("read (one characteristic, 0x03 PDU over CoAP), median of \(n)", \.read, Format.micros),
            row("write (one characteristic, 0x02 PDU over CoAP), median of \(n)", \.write, Format.micros),
            row("client CPU per read (getrusage ÷ \(n))", \.readCPU, Format.micros, target: 0.5),
            row("client CPU per write (getrusage ÷ \(n))", \.writeCPU, Format.micros, target: 0.5),
            row(
                "events/s one client takes from its accessory, first to last of \(events) MQTT `set`s "
                    + "(delivered \(delivered))",
                \.eventsPerSecond, { String(format: "%.0f/s", $0) }),
        ]
    }
}
