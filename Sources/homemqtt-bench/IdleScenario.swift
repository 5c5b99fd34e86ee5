import Foundation
import Gateway
import HomeMQTTApp
import MQTT
import Harness
import Simulator

/// Scenario 6: what a gateway costs while nothing happens. A gateway process (`gateway-child`)
/// on a generated home with nothing changing: its CPU time over a window once `online`; and a
/// gateway process on the shipped simulated home (`Config/accessories`): its RSS once `online`.
/// Baselines, idle on the same broker over the same window: a bare subscriber process of ours
/// (`bare-subscriber`: our MQTT module with the gateway's connection settings, nothing else) and
/// `mosquitto_sub`, so that the table shows what the gateway adds to a process that only connects.
enum IdleScenario {
    static let name = "6 idle"
    /// Marks a baseline as subscribed: it is retained, so each prints it once its SUBACK is in.
    static let readyTopic = "bench/idle/ready"

    /// CPU seconds (utime + stime) and RSS of one process at one moment, from /proc.
    struct Sample {
        var cpuSeconds: Double
        var peakKB: Int
        var currentKB: Int
    }

    /// The gateway and its two baselines, each sampled before and after the same window.
    struct Measurement {
        var accessories: Int
        var window: Double
        /// Messages the broker delivered on `#` during the window: 0 when nothing changed.
        var messages: Int
        var gateway: (start: Sample, end: Sample)
        var bare: (start: Sample, end: Sample)
        var mosquittoSub: (start: Sample, end: Sample)

        static func cpuPercent(_ pair: (start: Sample, end: Sample), over window: Double) -> Double {
            (pair.end.cpuSeconds - pair.start.cpuSeconds) / window * 100
        }
    }

    static func run(scale: Scale) async throws -> [Row] {
        let full = scale == .full
        // 1 clock tick (10 ms) in a 3 s window is 0.33 % of a core: only the full window can
        // tell 0.1 % apart, so only it is checked against the target.
        let window = full ? 60.0 : 3.0
        let accessories = full ? 100 : 20
        let generated = try TemporaryDirectory(prefix: "homemqtt-bench-idle")
        let directory = URL(fileURLWithPath: generated.path).appendingPathComponent("accessories")
        try HomeGenerator.write(
            to: directory, accessories: accessories, services: StartupScenario.servicesPerAccessory,
            shape: StartupScenario.shape)
        let idle = try await measure(accessories: directory, window: window)
        // The shipped config polls what cannot notify (here each service's Name) every 60 s, so
        // the window holds one poll: the same without polling tells what polling costs.
        let unpolled = try await measure(accessories: directory, window: window, pollInterval: 0)
        let shipped = try shippedAccessories()
        let home = try await measure(accessories: shipped, window: 0)

        let chars = accessories * StartupScenario.servicesPerAccessory * StartupScenario.shape.characteristicsPerService
        let what = "\(accessories) acc (\(chars) char), `online`, nothing changing"
        let cpu = Measurement.cpuPercent(idle.gateway, over: idle.window)
        let bareCPU = Measurement.cpuPercent(idle.bare, over: idle.window)
        let subCPU = Measurement.cpuPercent(idle.mosquittoSub, over: idle.window)
        let unpolledCPU = Measurement.cpuPercent(unpolled.gateway, over: unpolled.window)
        let unpolledBareCPU = Measurement.cpuPercent(unpolled.bare, over: unpolled.window)
        var rows = [
            Row(
                name,
                "\(what): CPU over \(Format.seconds(idle.window)) (\(idle.messages) msgs meanwhile), % of one core",
                ours: percent(cpu), baseline: "bare subscriber " + percent(bareCPU), ratio: ratio(cpu, bareCPU),
                target: "≤ 0.1 % of a core", met: full ? Format.met(cpu <= 0.1) : "—"),
            Row(
                name, "the same, beside `mosquitto_sub` on the same broker", ours: percent(cpu),
                baseline: "mosquitto_sub " + percent(subCPU), ratio: ratio(cpu, subCPU)),
            Row(
                name, "the same with polling off (`poll-interval: 0`; \(unpolled.messages) msgs meanwhile)",
                ours: percent(unpolledCPU), baseline: "bare subscriber " + percent(unpolledBareCPU),
                ratio: ratio(unpolledCPU, unpolledBareCPU), target: "≤ 0.1 % of a core",
                met: full ? Format.met(unpolledCPU <= 0.1) : "—"),
            Row(
                name, "\(what): RSS (VmRSS) after the window", ours: megabytes(idle.gateway.end.currentKB),
                baseline: "bare subscriber " + megabytes(idle.bare.end.currentKB),
                ratio: ratio(Double(idle.gateway.end.currentKB), Double(idle.bare.end.currentKB))),
        ]
        let homeName = "default home (Config/, \(home.accessories) acc), `online`"
        for (metric, ours, bare) in [
            ("peak RSS (VmHWM)", home.gateway.end.peakKB, home.bare.end.peakKB),
            ("RSS (VmRSS)", home.gateway.end.currentKB, home.bare.end.currentKB),
        ] {
            rows.append(
                Row(
                    name, "\(homeName): \(metric)", ours: megabytes(ours),
                    baseline: "bare subscriber " + megabytes(bare),
                    ratio: ratio(Double(ours), Double(bare)), target: "≤ 30 MB", met: Format.met(ours <= 30 * 1024)))
        }
        rows.append(
            Row(
                name, "the same: peak RSS beside `mosquitto_sub`", ours: megabytes(home.gateway.end.peakKB),
                baseline: "mosquitto_sub " + megabytes(home.mosquittoSub.end.peakKB),
                ratio: ratio(Double(home.gateway.end.peakKB), Double(home.mosquittoSub.end.peakKB))))
        return rows
    }

    /// Starts a gateway process on `accessories` with a fresh broker and state, waits for
    /// `online`, starts both baselines, lets all three settle, and samples them `window` seconds
    /// apart; `pollInterval` replaces the default (60 s) when given.
    static func measure(accessories directory: URL, window: Double, pollInterval: Int? = nil) async throws
        -> Measurement
    {
        let files = try TemporaryDirectory(prefix: "homemqtt-bench-idle-run")
        let count = try await SimulatedHome.load(directory: directory, clock: .manual).accessories().count
        return try await withBroker { broker in
            // The shipped settings (Home Assistant discovery on, polling every 60 s, accessory
            // state): only the broker, the state and the web view's port differ, and polling
            // when `pollInterval` says.
            let config = try StartupScenario.writeGatewayConfig(
                in: files, broker: broker, accessories: directory, pollInterval: pollInterval.map(String.init))
            let keepAlive = try HomeMQTTApp.loadConfig(file: config).mqtt.keepAlive
            try await markReady(broker: broker)
            return try await CountingSubscriber.with(
                broker: broker, filter: "#", statusTopic: "home/$gateway/status",
                matches: { $0.topic != readyTopic }
            ) { subscriber in
                let gateway = try ChildProcess(
                    try StartupScenario.executablePath(), ["gateway-child", "--config", config])
                var baselines: [ChildProcess] = []
                do {
                    _ = try await subscriber.waitOnline(timeout: 300, what: "the gateway process to say online") {
                        gateway.isRunning
                            ? nil
                            : "the gateway process exited (\(gateway.exitStatus ?? -1)): \(gateway.standardError.suffix(600))"
                    }
                    baselines.append(
                        try ChildProcess(
                            try StartupScenario.executablePath(),
                            ["bare-subscriber", "--config", config, "--topic", readyTopic]))
                    baselines.append(
                        try ChildProcess(
                            "mosquitto_sub",
                            [
                                "-h", broker.host, "-p", "\(broker.port)", "-k", "\(keepAlive)", "-i",
                                "bench-idle-mosquitto-sub", "-t", readyTopic,
                            ]))
                    for baseline in baselines {
                        try await baseline.waitForOutput(containing: "ready", timeout: 30)
                    }
                    // What follows `online` (the last discovery and subscriptions, the baselines'
                    // start) is start-up, not idling.
                    try await Task.sleep(for: .seconds(window >= 10 ? 5 : 1))
                    let processes = [gateway] + baselines
                    subscriber.reset()
                    let start = try processes.map { try sample($0.pid) }
                    let began = ContinuousClock.now
                    try await Task.sleep(for: .seconds(window))
                    let end = try processes.map { try sample($0.pid) }
                    let measured = elapsed(began)
                    let messages = subscriber.count
                    for process in processes.reversed() { await process.terminate(grace: 10) }
                    return Measurement(
                        accessories: count, window: measured, messages: messages, gateway: (start[0], end[0]),
                        bare: (start[1], end[1]), mosquittoSub: (start[2], end[2]))
                } catch {
                    for process in baselines { await process.terminate(grace: 2) }
                    await gateway.terminate(grace: 5)
                    throw error
                }
            }
        }
    }

    /// The retained marker every baseline prints once subscribed.
    static func markReady(broker: MosquittoBroker) async throws {
        let client = MQTTClient(
            configuration: broker.clientConfiguration(clientID: "bench-idle-marker"), logger: quietLogger)
        try await client.connect()
        try await client.publish(readyTopic, "ready", qos: .atLeastOnce, retain: true)
        await client.disconnect()
    }

    /// `Config/accessories` of this package: from the working directory (`swift run`), else
    /// above the executable (`.build/release/homemqtt-bench`).
    static func shippedAccessories() throws -> URL {
        var candidates = [URL(fileURLWithPath: FileManager.default.currentDirectoryPath)]
        var directory = URL(fileURLWithPath: try StartupScenario.executablePath()).deletingLastPathComponent()
        while directory.path != "/" {
            candidates.append(directory)
            directory = directory.deletingLastPathComponent()
        }
        for candidate in candidates {
            let accessories = candidate.appendingPathComponent("Config/accessories")
            if FileManager.default.fileExists(atPath: accessories.appendingPathComponent("../gateway.yml").path) {
                return accessories.standardizedFileURL
            }
        }
        throw BenchError("cannot find the shipped Config/accessories (run the bench from the package's directory)")
    }

    /// utime + stime from /proc/<pid>/stat (fields 14 and 15, in clock ticks), VmHWM and VmRSS
    /// from /proc/<pid>/status.
    static func sample(_ pid: pid_t) throws -> Sample {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { throw BenchError("cannot read /proc/\(pid)/stat: has the process exited?") }
        // After the command's name (which may hold spaces) in parentheses: field 3, the state, on.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else {
            throw BenchError("unexpected /proc/\(pid)/stat: \(stat)")
        }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        func kilobytes(_ key: String) -> Int {
            status.split(separator: "\n").first { $0.hasPrefix(key) }
                .flatMap { $0.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first }
                .flatMap { Int($0) } ?? 0
        }
        return Sample(cpuSeconds: (user + system) / ticks, peakKB: kilobytes("VmHWM:"), currentKB: kilobytes("VmRSS:"))
    }

    static func percent(_ value: Double) -> String { String(format: "%.3f %%", value) }

    static func megabytes(_ kilobytes: Int) -> String { String(format: "%.1f MB", Double(kilobytes) / 1024) }

    /// A ratio only beside a baseline that is not zero (an idle baseline may use no tick at all).
    static func ratio(_ ours: Double, _ baseline: Double) -> String {
        baseline > 0 ? Format.ratio(ours / baseline) : "—"
    }
}
