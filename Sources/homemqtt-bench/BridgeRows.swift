import Foundation
import Harness
import MQTT

// Scenario 8's table rows, and what it needs of the gateway process: its config, the MQTT
// topic that drives its events, whether its bridge listens, and its CPU time.
extension BridgeScenario {
    /// Each figure as the median of the rounds beside HAP-python's, the ratio of the two
    /// medians, and each round's own ratio in the metric.
    static func rows(
        _ figures: [String: [Figures]], sides: [Side], sizes: Sizes, versions: (hapPython: String, aiohomekit: String)
    ) -> [Row] {
        let (mine, other) = (figures[ours] ?? [], figures[theirs] ?? [])
        let baseline = "HAP-python \(versions.hapPython) "
        let full = sizes.operations >= 1000
        func row(
            _ metric: String, _ value: (Figures) -> Double, _ format: (Double) -> String,
            target: Double? = nil, higherIsBetter: Bool = false
        ) -> Row {
            let (a, b) = (Stats.median(mine.map(value)), Stats.median(other.map(value)))
            // A CPU figure under one clock tick (10 ms) over a loop is 0: no ratio then.
            func ratio(_ a: Double, _ b: Double) -> String { b > 0 ? Format.ratio(a / b) : "—" }
            let each = zip(mine, other).map { ratio(value($0), value($1)) }.joined(separator: ", ")
            let met = target.map { higherIsBetter ? a / b >= $0 : a / b <= $0 }
            return Row(
                name, "\(metric); rounds \(each)", ours: format(a), baseline: baseline + format(b),
                ratio: ratio(a, b),
                target: target.map { (higherIsBetter ? "≥ " : "≤ ") + String(format: "%.2f×", $0) } ?? "—",
                met: full && b > 0 ? met.map(Format.met) ?? "—" : "—")
        }
        let served = sides.map { "\($0.served.0) acc, \($0.served.1) svc, \($0.served.2) char" }
        let delivered = zip(mine, other).map { "\($0.delivered)/\($1.delivered)" }.joined(separator: ", ")
        let n = sizes.operations
        return [
            row("pair-verify (TCP connect + verify), median of \(sizes.verifies)", \.verify, Format.micros),
            row(
                "GET /accessories (\(served.joined(separator: " / "))), median of \(sizes.documents)", \.document,
                Format.micros),
            row("read (GET /characteristics, one), median of \(n)", \.read, Format.micros),
            row("write (PUT /characteristics, one), median of \(n)", \.write, Format.micros),
            row("server CPU per read (/proc utime+stime ÷ \(n))", \.readCPU, Format.micros, target: 0.3),
            row("server CPU per write (/proc utime+stime ÷ \(n))", \.writeCPU, Format.micros, target: 0.3),
            row(
                "events/s to one subscribed controller, first to last of \(sizes.events) changes (ours: MQTT `set`s; "
                    + "HAP-python: set inside, sent at once; delivered \(delivered))",
                \.eventsPerSecond, { String(format: "%.0f/s", $0) }),
            row(
                "server CPU per change (ours: the MQTT `set`, the event, its `state` until the last is out)",
                \.eventCPU,
                Format.micros),
            Row(name, "controller", ours: "aiohomekit \(versions.aiohomekit)", baseline: "the same driver"),
        ]
    }

    /// The gateway's config: the generated home from the simulator, Home Assistant discovery off
    /// (only the bridge is measured), the bridge on 127.0.0.1 and `port` with the peer's code.
    static func writeConfig(files: TemporaryDirectory, broker: MosquittoBroker, accessories: URL, port: Int) throws
        -> String
    {
        let config = files.file("gateway.yml")
        try """
        broker:
          url: mqtt://\(broker.host):\(broker.port)
          client-id: homemqtt-bench-bridge
        base-topic: home
        state-directory: \(files.file("state"))
        accessory-state: \(BenchSettings.accessoryState.withLock { $0 })
        poll-interval: 0
        sources:
          - type: simulator
            directory: \(accessories.path)
        homeassistant:
          enabled: false
        homekit:
          enabled: true
          port: \(port)
          listen: 127.0.0.1
          setup-code: \(pin)
        log-level: warning

        """.write(toFile: config, atomically: false, encoding: .utf8)
        return config
    }

    /// The `set` topic of accessory 2's brightness, from the `state` topics the gateway published.
    static func eventSetTopic(_ messages: [MQTTMessage], accessories: Int) throws -> String {
        let slug = "/bench-light-\(HomeGenerator.number(2, of: accessories))/"
        guard
            let state = messages.first(where: { $0.topic.contains(slug) && $0.topic.hasSuffix("/brightness/state") })
        else { throw BenchError("homemqtt published no brightness state under \(slug)") }
        return String(state.topic.dropLast("state".count)) + "set"
    }

    /// `count` MQTT `set`s of the brightness: 1, 2, …, 99, 1, … and 100 last, as HAP-python's drive.
    static func drive(_ client: MQTTClient, _ topic: String, _ count: Int) async throws {
        for n in 0..<count {
            try await client.publish(topic, String(n == count - 1 ? 100 : 1 + n % 99))
        }
    }

    /// Waits until the brightness `state` 100 (a drive's last value) is on MQTT; the subscriber
    /// records from the drive's start.
    static func lastState(_ subscriber: CountingSubscriber, _ topic: String) async throws {
        let last = Array("100".utf8)
        try await waitUntil("homemqtt's last brightness state on MQTT", timeout: 120, pollInterval: 0.002) {
            subscriber.recorded.contains { $0.topic == topic && $0.payload == last }
        }
    }

    /// Whether something accepts TCP connections on 127.0.0.1:`port`.
    static func accepts(port: Int) -> Bool {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { return false }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    /// The process's CPU time so far (utime + stime from /proc/<pid>/stat), in seconds.
    static func cpuSeconds(_ pid: pid_t) throws -> Double { try IdleScenario.sample(pid).cpuSeconds }
}
