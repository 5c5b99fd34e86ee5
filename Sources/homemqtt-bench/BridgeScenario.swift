import Foundation
import Harness
import MQTT

/// Scenario 8: the gateway as a HomeKit bridge. The `homemqtt` binary beside the bench serves a
/// generated home (`HomeGenerator`: one colour lightbulb service per accessory) with `homekit`
/// on 127.0.0.1, and HAP-python serves the same accessories (Scripts/bench-hap-python-bridge.py);
/// one aiohomekit driver (Scripts/bench-bridge-aiohomekit.py) pairs with both and measures them
/// in turn, alternating which goes first, three rounds: pair-verify, GET /accessories, reads,
/// writes, the server process's CPU per read and per write (/proc/<pid>/stat around each loop),
/// and events per second to the subscribed driver. The changes behind the events come from MQTT
/// `set` messages on our side (the way a change reaches the bridge in use) and from inside
/// HAP-python on theirs (`Characteristic.value` and an immediate publish), so the two figures
/// compare the whole path to a controller's event, not the same work.
enum BridgeScenario {
    static let name = "8 bridge"
    static let rounds = 3
    static let pin = HAPPeer.defaultSetupCode
    static let (ours, theirs) = ("homemqtt", "hap-python")

    struct Sizes {
        var accessories: Int
        var verifies: Int
        var documents: Int
        var operations: Int
        var events: Int
    }

    /// One server's figures in one round: latencies are medians in seconds, CPU in seconds per
    /// request (or per event delivered).
    struct Figures {
        var verify = 0.0
        var document = 0.0
        var read = 0.0
        var write = 0.0
        var readCPU = 0.0
        var writeCPU = 0.0
        var eventCPU = 0.0
        var eventsPerSecond = 0.0
        var delivered = 0
    }

    /// A bridge under measurement, as the driver knows it.
    struct Side {
        var name: String
        var pid: pid_t
        /// The brightness read and written (accessory 1's) and the one driven for events (accessory 2's).
        var readID: [Int]
        var eventID: [Int]
        /// What /accessories lists: accessories, services, characteristics.
        var served: (Int, Int, Int)
        /// Starts `count` changes of the event brightness, the last to 100.
        var drive: (Int) async throws -> Void
        /// Returns once the server has done all the work the changes made (ours: the last `state`
        /// is on MQTT), so that its CPU time is all counted and none spills into the next loop.
        var settle: () async throws -> Void
    }

    static func run(scale: Scale) async throws -> [Row] {
        if let reason = HAPPeer.unavailableReason {
            return [Row(name, "bridge rows against HAP-python", ours: "blocked", met: "blocked: \(reason)")]
        }
        let homemqtt: String
        do {
            homemqtt = try builtProduct("homemqtt")
        } catch {
            return [Row(name, "bridge rows against HAP-python", ours: "blocked", met: "blocked: \(error)")]
        }
        var sizes =
            scale == .full
            // 149 and the bridge: the 150 accessory objects HAP allows a bridge (HomeKitConfig.maxAccessories).
            // 5,000 requests: a loop's CPU time is hundreds of clock ticks (10 ms) on either side.
            ? Sizes(accessories: 149, verifies: 30, documents: 20, operations: 5000, events: 10_000)
            : Sizes(accessories: 10, verifies: 2, documents: 2, operations: 20, events: 20)
        // Under callgrind (`callgrindDump`): enough reads and writes that a loop's own costs dwarf its edges.
        if let operations = ProcessInfo.processInfo.environment["HOMEMQTT_BENCH_BRIDGE_OPERATIONS"].flatMap(Int.init) {
            sizes.operations = operations
        }
        let files = try TemporaryDirectory(prefix: "homemqtt-bench-bridge")
        let directory = URL(fileURLWithPath: files.path).appendingPathComponent("accessories")
        try HomeGenerator.write(to: directory, accessories: sizes.accessories, services: 1, shape: .colourLight)
        let home = files.file("hap-python-home.json")
        try HomeGenerator.hapPythonHome(accessories: sizes.accessories, services: 1, shape: .colourLight)
            .write(toFile: home, atomically: false, encoding: .utf8)
        return try await withBroker { broker in
            let port = try freePort()
            let config = try writeConfig(files: files, broker: broker, accessories: directory, port: port)
            return try await CountingSubscriber.with(
                broker: broker, filter: "home/#", statusTopic: "home/$gateway/status"
            ) { subscriber in
                subscriber.reset(recording: true)
                let gateway = try ChildProcess(homemqtt, ["run", "--config", config])
                var peer: HAPPythonBridge?
                var driver: BridgeDriver?
                do {
                    _ = try await subscriber.waitOnline(timeout: 300, what: "homemqtt to say online") {
                        gateway.isRunning
                            ? nil
                            : "homemqtt exited (\(gateway.exitStatus ?? -1)): \(gateway.standardError.suffix(600))"
                    }
                    let setTopic = try eventSetTopic(subscriber.recorded, accessories: sizes.accessories)
                    let stateTopic = String(setTopic.dropLast("set".count)) + "state"
                    subscriber.reset()
                    try await waitUntil("homemqtt's bridge to listen on \(port)", timeout: 60) {
                        if !gateway.isRunning { throw BenchError("homemqtt exited: \(gateway.standardError)") }
                        return accepts(port: port)
                    }
                    let started = try await HAPPythonBridge(home: home, state: files.file("hap-python.state"), pin: pin)
                    peer = started
                    let controller = try await BridgeDriver()
                    driver = controller
                    let client = subscriber.client
                    let rows = try await measure(
                        driver: controller, sizes: sizes, files: files, version: started.version,
                        sides: [
                            (
                                ours, port, gateway.pid,
                                { count in
                                    subscriber.reset(recording: true)
                                    try await drive(client, setTopic, count)
                                },
                                { try await lastState(subscriber, stateTopic) }
                            ),
                            (
                                theirs, started.port, started.process.pid,
                                { count in
                                    try started.drive(
                                        accessory: HomeGenerator.name(2, of: sizes.accessories),
                                        service: HomeGenerator.serviceName(1), count: count)
                                },
                                {}
                            ),
                        ])
                    await controller.stop()
                    await started.stop()
                    await gateway.terminate(grace: 10)
                    return rows
                } catch {
                    await driver?.stop()
                    await peer?.stop()
                    await gateway.terminate(grace: 5)
                    throw error
                }
            }
        }
    }

    /// Pairs with both servers, then runs the rounds, alternating which server goes first.
    static func measure(
        driver: BridgeDriver, sizes: Sizes, files: TemporaryDirectory, version: String,
        sides list: [(String, Int, pid_t, (Int) async throws -> Void, () async throws -> Void)]
    ) async throws -> [Row] {
        let targets = [1, 2].map { [HomeGenerator.name($0, of: sizes.accessories), HomeGenerator.serviceName(1)] }
        var sides: [Side] = []
        var aiohomekit = "?"
        for (side, port, pid, drive, settle) in list {
            let file = files.file("\(side)-pairing.json")
            _ = try await driver.call(
                "pair", ["side": side, "port": port, "pin": pin, "file": file], timeout: 120)
            let opened = try await driver.call("open", ["side": side, "file": file, "targets": targets])
            guard let ids = opened["ids"] as? [[Int]], ids.count == 2, let accessories = opened["accessories"] as? Int,
                let services = opened["services"] as? Int, let characteristics = opened["characteristics"] as? Int
            else { throw BenchError("aiohomekit's open of \(side) answered \(opened)") }
            // The bridge itself and every generated accessory, on both sides alike.
            guard accessories == sizes.accessories + 1 else {
                throw BenchError("\(side) serves \(accessories) accessories, not the bridge and \(sizes.accessories)")
            }
            aiohomekit = opened["version"] as? String ?? "?"
            _ = try await driver.call("subscribe", ["side": side, "id": ids[1]])
            sides.append(
                Side(
                    name: side, pid: pid, readID: ids[0], eventID: ids[1],
                    served: (accessories, services, characteristics), drive: drive, settle: settle))
        }
        var figures: [String: [Figures]] = [:]
        for round in 0..<rounds {
            for side in round % 2 == 0 ? sides : sides.reversed() {
                figures[side.name, default: []].append(try await measure(side, driver: driver, sizes: sizes))
            }
        }
        return rows(figures, sides: sides, sizes: sizes, versions: (version, aiohomekit))
    }

    /// One round on one server.
    static func measure(_ side: Side, driver: BridgeDriver, sizes: Sizes) async throws -> Figures {
        var figures = Figures()
        let name = side.name
        figures.verify = Stats.median(try await driver.samples("verify", ["side": name, "count": sizes.verifies]))
        figures.document = Stats.median(
            try await driver.samples("accessories", ["side": name, "count": sizes.documents]))
        try await callgrindDump(side, "before-reads")
        var cpu = try cpuSeconds(side.pid)
        let count = sizes.operations
        figures.read = Stats.median(
            try await driver.samples("reads", ["side": name, "count": count, "id": side.readID]))
        figures.readCPU = (try cpuSeconds(side.pid) - cpu) / Double(count)
        try await callgrindDump(side, "reads")
        cpu = try cpuSeconds(side.pid)
        figures.write = Stats.median(
            try await driver.samples("writes", ["side": name, "count": count, "id": side.readID]))
        figures.writeCPU = (try cpuSeconds(side.pid) - cpu) / Double(count)
        try await callgrindDump(side, "writes")
        // Timed from the first event to the last: what the server delivers, not how fast it is told.
        _ = try await driver.call("listen", ["side": name, "id": side.eventID])
        cpu = try cpuSeconds(side.pid)
        try await side.drive(sizes.events)
        let heard = try await driver.call("wait", ["side": name, "timeout": 120], timeout: 150)
        try await side.settle()
        figures.eventCPU = (try cpuSeconds(side.pid) - cpu) / Double(sizes.events)
        guard let delivered = heard["count"] as? Int, let first = heard["first"] as? Double,
            let last = heard["last"] as? Double, delivered > 1, last > first
        else { throw BenchError("\(name)'s events: \(heard)") }
        figures.delivered = delivered
        figures.eventsPerSecond = Double(delivered - 1) / (last - first)
        return figures
    }

    /// With HOMEMQTT_BENCH_BRIDGE_CALLGRIND set (our `homemqtt` started under valgrind's callgrind by
    /// a wrapper next to the bench), asks callgrind to write its profile so far and start a new one:
    /// the profile dumped as "reads" holds the read loop's instructions alone, "writes" the write loop's.
    static func callgrindDump(_ side: Side, _ label: String) async throws {
        guard ProcessInfo.processInfo.environment["HOMEMQTT_BENCH_BRIDGE_CALLGRIND"] != nil, side.name == ours else {
            return
        }
        let result = try await runProcess("callgrind_control", ["-d", label, String(side.pid)], timeout: 120)
        guard result.status == 0 else { throw BenchError("callgrind_control -d \(label): \(result.standardError)") }
    }
}
