import Foundation
import Gateway
import HomeModel
import Harness
import Simulator
import Synchronization

/// Scenario 5: the web view on a home of 1,000 accessories (25,000 characteristics) while 1,000
/// values a second change in the simulator: the home document over HTTP, and in headless
/// chromium (the browser test's script in `--scale` mode) the time from opening the page to
/// every tile drawn, the updates the page receives, and a request answered meanwhile.
enum WebScenario {
    static let name = "5 web view"
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let python = root.appendingPathComponent(".venv/bin/python").path
    static let script = root.appendingPathComponent("Tests/WebViewTests/browser/browser_test.py").path
    static let changesPerSecond = 1000

    static func run(scale: Scale) async throws -> [Row] {
        let accessories = scale == .full ? 1000 : 20
        return try await withBroker { broker in
            try await measure(broker: broker, accessories: accessories)
        }
    }

    static func measure(broker: MosquittoBroker, accessories: Int) async throws -> [Row] {
        let files = try TemporaryDirectory(prefix: "homemqtt-bench-web")
        let directory = URL(fileURLWithPath: files.path).appendingPathComponent("accessories")
        let shape = StartupScenario.shape
        let services = StartupScenario.servicesPerAccessory
        try HomeGenerator.write(to: directory, accessories: accessories, services: services, shape: shape)
        let characteristics = accessories * services * shape.characteristicsPerService
        return try await InProcessGateway.with(broker: broker, accessories: directory, web: true) { gateway in
            try await measure(gateway: gateway, accessories: accessories, characteristics: characteristics)
        }
    }

    static func measure(gateway: InProcessGateway, accessories: Int, characteristics: Int) async throws -> [Row] {
        try await waitUntil("the web view to listen", timeout: 10) { gateway.webPort > 0 }
        let port = gateway.webPort
        let url = "http://127.0.0.1:\(port)"
        let label = "\(accessories) acc (\(characteristics) char), \(changesPerSecond) changes/s"

        let brightness = Catalog.characteristicType(named: "brightness")?.uuid
        var targets: [CharacteristicAddress] = []
        for accessory in await gateway.home.accessories() {
            for service in accessory.services {
                for c in service.characteristics where c.type == brightness {
                    targets.append(CharacteristicAddress(accessoryID: accessory.id, iid: c.iid))
                }
            }
        }
        guard !targets.isEmpty else { throw BenchError("the generated home has no brightness to change") }

        let load = Load()
        // The load is a child of this scope, cancelled when the measurement ends either way.
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { [targets] in
                await load.run(home: gateway.home, targets: targets, perSecond: changesPerSecond)
            }
            defer { group.cancelAll() }
            // The changes run a moment before the page opens, as in a home already busy.
            try await Task.sleep(for: .seconds(1))

            var rows: [Row] = []
            let document = try await runChecked(
                "curl", ["-s", "-o", "/dev/null", "-w", "%{time_total} %{size_download}", url + "/api/home"])
            let parts = document.standardOutput.split(separator: " ").compactMap { Double($0) }
            if parts.count == 2 {
                rows.append(
                    Row(
                        name,
                        "\(label): the home document over HTTP (/api/home, \(Format.megabytes(Int(parts[1] / 1024))))",
                        ours: Format.seconds(parts[0])))
            }

            if let reason = browserUnavailable() {
                rows.append(
                    Row(name, "\(label): page open to every tile drawn", ours: "blocked", met: "blocked: \(reason)"))
            } else {
                let result = try await runProcess(
                    python, [script, "--url", url, "--scale", "\(accessories)"], timeout: 180)
                guard result.status == 0,
                    let line = result.standardOutput.split(separator: "\n").last(where: { $0.hasPrefix("{") }),
                    let json = try? JSONValue(parsing: String(line)),
                    let tiles = json["tiles_seconds"]?.doubleValue
                else {
                    throw BenchError("the browser's scale run failed: \(result.standardOutput) \(result.standardError)")
                }
                let checked = accessories >= 1000
                rows.append(
                    Row(
                        name, "\(label): page open to every tile drawn (headless chromium)",
                        ours: Format.seconds(tiles),
                        target: checked ? "< 2 s" : "—", met: checked ? Format.met(tiles < 2) : "—"))
                rows.append(
                    Row(
                        name, "\(label): updates the open page received",
                        ours: String(
                            format: "%.1f frames/s, %.0f values/s", json["frames_per_second"]?.doubleValue ?? 0,
                            json["values_per_second"]?.doubleValue ?? 0)))
                rows.append(
                    Row(
                        name, "\(label): a request from the page answered meanwhile (health)",
                        ours: Format.seconds(json["request_seconds"]?.doubleValue ?? 0)))
            }
            let achieved = load.rate
            rows.append(
                Row(
                    name, "\(label): value changes made in the simulator during the run",
                    ours: String(format: "%.0f/s", achieved), target: "≥ \(changesPerSecond)/s",
                    met: Format.met(achieved >= Double(changesPerSecond) * 0.95)))
            return rows
        }
    }

    static func browserUnavailable() -> String? {
        for (path, what) in [
            ("/usr/bin/chromium", "chromium"), ("/usr/bin/chromedriver", "chromium-driver"),
            (python, ".venv with selenium (Scripts/bootstrap.sh)"),
        ] where !FileManager.default.isExecutableFile(atPath: path) {
            return "no \(what)"
        }
        return nil
    }

    /// Brightness changes pushed into the simulator at a steady rate, in slices every 10 ms.
    final class Load: Sendable {
        private let counts = Mutex<(made: Int, start: ContinuousClock.Instant?, last: ContinuousClock.Instant?)>(
            (0, nil, nil))

        var rate: Double {
            counts.withLock { state in
                guard let start = state.start, let last = state.last, last > start else { return 0 }
                return Double(state.made) / elapsed(start, last)
            }
        }

        func run(home: SimulatedHome, targets: [CharacteristicAddress], perSecond: Int) async {
            let slice = Duration.milliseconds(10)
            let perSlice = max(perSecond / 100, 1)
            let clock = ContinuousClock()
            var next = clock.now
            var index = 0
            counts.withLock { $0.start = clock.now }
            while !Task.isCancelled {
                for _ in 0..<perSlice {
                    let address = targets[index % targets.count]
                    index += 1
                    try? await home.setValue(address, .int(Int64(index % 101)))
                }
                counts.withLock {
                    $0.made += perSlice
                    $0.last = clock.now
                }
                next += slice
                try? await Task.sleep(until: next, clock: clock)
            }
        }
    }
}
