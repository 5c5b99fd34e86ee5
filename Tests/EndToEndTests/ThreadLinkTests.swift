import Foundation
import HAP
import HomeModel
import TestSupport
import XCTest

/// A Thread accessory reached over a bad link (issue 42), with the real parts: two network
/// namespaces joined by a veth, as a border router's link to the mesh is. On one side gateway A
/// (`homemqtt run`, its own mosquitto) serves the simulator's Kilgo garage door opener as a
/// Thread accessory (`homekit: thread`, HAP over CoAP on `fd11:22::2`); on the other, gateway B
/// (`homemqtt run` with a `hap` source, its own mosquitto) pairs with it by setup code
/// (`homemqtt pair --thread`) and controls it on MQTT, through a relay on its side of the link
/// (`udp_impair.py`: the kernels the tests run on have no `tc netem`). Then the relay drops 20 %
/// of the datagrams in each direction and delays the others by 1 s: a `set` on B's topic still
/// reaches the accessory, a change made on A's side still comes back to B as an event, and
/// after A restarts (the accessory forgets the session: 4.04, a new pair-verify) B controls it
/// again.
final class ThreadLinkTests: XCTestCase {
    static let (near, far) = ("fd11:22::1", "fd11:22::2")

    /// Everything the test started, stopped in reverse order, then the namespaces deleted.
    final class Rig: @unchecked Sendable {
        let controllerSide: NetworkNamespace
        let accessorySide: NetworkNamespace
        let directory: TemporaryDirectory
        let nearDevice: String
        let farDevice: String
        var processes: [ChildProcess] = []
        var accessoryGateway: ChildProcess?
        var relay: ChildProcess?

        init(
            controllerSide: NetworkNamespace, accessorySide: NetworkNamespace, directory: TemporaryDirectory,
            nearDevice: String, farDevice: String
        ) {
            self.controllerSide = controllerSide
            self.accessorySide = accessorySide
            self.directory = directory
            self.nearDevice = nearDevice
            self.farDevice = farDevice
        }

        var accessoryConfig: String { directory.file("a.yml") }
        var controllerConfig: String { directory.file("b.yml") }

        func stop() async {
            if let relay {
                relay.closeInput()
                await relay.terminate()
            }
            if let accessoryGateway { await accessoryGateway.terminate(grace: 5) }
            for p in processes.reversed() { await p.terminate(grace: 5) }
            await accessorySide.delete()
            await controllerSide.delete()
        }

        func homemqtt(_ ns: NetworkNamespace, _ arguments: [String], timeout: Double = 60) async throws
            -> ProcessResult
        {
            try await runChecked("ip", ns.exec + [try builtProduct("homemqtt")] + arguments, timeout: timeout)
        }

        func startAccessoryGateway() throws {
            TestCensus.record(.binary)
            accessoryGateway = try ChildProcess(
                "ip", accessorySide.exec + [try builtProduct("homemqtt"), "run", "--config", accessoryConfig])
        }

        func subscribe(_ ns: NetworkNamespace) throws -> ChildProcess {
            let sub = try ChildProcess(
                "ip", ns.exec + ["stdbuf", "-oL", "mosquitto_sub", "-p", "1883", "-v", "-t", "home/#"])
            processes.append(sub)
            return sub
        }

        func publish(_ ns: NetworkNamespace, _ topic: String, _ payload: String) async throws {
            try await runChecked(
                "ip", ns.exec + ["mosquitto_pub", "-p", "1883", "-q", "1", "-t", topic, "-m", payload])
        }
    }

    func makeRig() async throws -> Rig {
        try PeerProcess.requireVenv()
        let controllerSide = try await NetworkNamespace.create()
        let accessorySide: NetworkNamespace
        do { accessorySide = try await NetworkNamespace.create() } catch {
            await controllerSide.delete()
            throw error
        }
        let suffix = String(UUID().uuidString.prefix(6).lowercased())
        let rig = Rig(
            controllerSide: controllerSide, accessorySide: accessorySide,
            directory: try TemporaryDirectory(prefix: "homemqtt-thread-link"), nearDevice: "tn\(suffix)",
            farDevice: "tf\(suffix)")
        addTeardownBlock { await rig.stop() }
        try await runChecked("ip", ["link", "add", rig.nearDevice, "type", "veth", "peer", "name", rig.farDevice])
        try await runChecked("ip", ["link", "set", rig.nearDevice, "netns", controllerSide.name])
        try await runChecked("ip", ["link", "set", rig.farDevice, "netns", accessorySide.name])
        for (ns, device, address) in [
            (controllerSide, rig.nearDevice, Self.near), (accessorySide, rig.farDevice, Self.far),
        ] {
            try await runChecked("ip", ns.exec + ["ip", "-6", "addr", "add", "\(address)/64", "dev", device, "nodad"])
            try await runChecked("ip", ns.exec + ["ip", "link", "set", device, "up"])
            let broker = try ChildProcess("ip", ns.exec + ["mosquitto", "-p", "1883"])
            rig.processes.append(broker)
            try await waitUntil("mosquitto in \(ns.name)", timeout: 10, pollInterval: 0.1) {
                try await runProcess("ip", ns.exec + ["mosquitto_pub", "-p", "1883", "-t", "probe", "-m", "x"])
                    .status == 0
            }
        }
        // Gateway A: the shipped home, its garage served as a Thread accessory on the veth's address.
        let accessories = rig.directory.file("accessories")
        try FileManager.default.copyItem(
            atPath: HAPPeer.repositoryRoot.appendingPathComponent("Config/accessories").path, toPath: accessories)
        let garage = accessories + "/garage.yml"
        let text = try String(contentsOfFile: garage, encoding: .utf8)
        try ("homekit: thread\n" + text).write(toFile: garage, atomically: true, encoding: .utf8)
        try """
        broker:
          url: mqtt://127.0.0.1:1883
          client-id: thread-accessory
        state-directory: \(rig.directory.file("a-state"))
        poll-interval: 0
        sources:
          - type: simulator
            directory: \(accessories)
        homeassistant:
          enabled: false
        homekit:
          enabled: true
          port: 40120
          listen: [\"\(Self.far)\"]
        log-level: info
        """.write(toFile: rig.accessoryConfig, atomically: true, encoding: .utf8)
        // Gateway B: a hap source only, polling off (the events must carry the change).
        try """
        broker:
          url: mqtt://127.0.0.1:1883
          client-id: thread-controller
        state-directory: \(rig.directory.file("b-state"))
        poll-interval: 0
        sources:
          - type: hap
        homeassistant:
          enabled: false
        log-level: info
        """.write(toFile: rig.controllerConfig, atomically: true, encoding: .utf8)
        return rig
    }

    /// The Thread garage's UDP port and setup code, from gateway A's own commands.
    func served(_ rig: Rig) async throws -> (port: Int, code: String) {
        var port: Int?
        try await waitUntil("the Thread garage to listen", timeout: 30, pollInterval: 0.2) {
            // Refused until the gateway has started the accessory's server: asked again.
            let status = try await runProcess(
                "ip",
                rig.accessorySide.exec + [
                    try builtProduct("homemqtt"), "homekit", "status", "--accessory", "sim:garage", "--config",
                    rig.accessoryConfig,
                ], timeout: 30)
            port = (try? JSONValue(parsing: Array(status.standardOutput.utf8)))?["port"]?.intValue
            return port != nil
        }
        let codes = try await rig.homemqtt(
            rig.accessorySide, ["homekit", "code", "--no-qr", "--config", rig.accessoryConfig])
        let line = try XCTUnwrap(
            codes.standardOutput.split(separator: "\n").first { $0.contains("sim:garage, standalone, Thread") },
            codes.standardOutput)
        return (try XCTUnwrap(port), String(line.split(separator: " ")[0]))
    }

    /// The topic under `prefix` whose line a subscriber printed with `payload`, waited for.
    func line(
        _ sub: ChildProcess, _ what: String, timeout: Double, from: Int = 0, _ match: @escaping (String) -> Bool
    ) async throws -> String {
        var found: String?
        try await waitUntil(what, timeout: timeout, pollInterval: 0.1) {
            found = sub.outputLines.dropFirst(from).first(where: match)
            return found != nil
        }
        return try XCTUnwrap(found)
    }

    func testAThreadAccessoryIsControlledOverALossySlowLinkAndAfterItRestarts() async throws {
        let rig = try await makeRig()
        try rig.startAccessoryGateway()
        let (port, code) = try await served(rig)
        let accessorySub = try rig.subscribe(rig.accessorySide)
        let controllerSub = try rig.subscribe(rig.controllerSide)

        // The relay on B's side of the link, a clean link for now.
        let relay = try ChildProcess(
            "ip",
            rig.controllerSide.exec + [
                HAPPeer.python.path, "-u",
                HAPPeer.repositoryRoot.appendingPathComponent("Tests/HAPTests/peer/udp_impair.py").path,
                "--listen", Self.near, "0", "--target", Self.far, String(port),
            ], standardInput: true)
        rig.relay = relay
        try await relay.waitForOutput(containing: "\"ready\"", timeout: 30)
        let relayPort = try XCTUnwrap(
            relay.outputLines.compactMap { try? JSONValue(parsing: Array($0.utf8)) }.first?["port"]?.intValue)

        // B pairs with the code over CoAP while it runs, through the relay.
        let gatewayB = try ChildProcess(
            "ip", rig.controllerSide.exec + [try builtProduct("homemqtt"), "run", "--config", rig.controllerConfig])
        rig.processes.append(gatewayB)
        TestCensus.record(.binary)
        try await waitUntil("gateway B online", timeout: 60, pollInterval: 0.1) {
            controllerSub.outputLines.contains { $0.hasPrefix("home/$gateway/status online") }
        }
        let paired = try await rig.homemqtt(
            rig.controllerSide,
            [
                "pair", "--thread", "--config", rig.controllerConfig, "--host", Self.near, "--port", String(relayPort),
                "--code", code,
            ], timeout: 120)
        XCTAssertTrue(paired.standardOutput.contains("Garage"), paired.standardOutput + paired.standardError)
        let targetState = try await line(controllerSub, "B's garage door target on MQTT", timeout: 30) {
            $0.contains("/garage-door/target-door-state/state ")
        }
        let targetTopic = String(targetState.split(separator: " ")[0].dropLast("/state".count))

        // The link turns bad: 20 % of datagrams lost each way, the others 1 s late.
        try relay.write("impair 0.2 1.0\n")
        try await relay.waitForOutput(containing: "\"impaired\"", timeout: 10)

        // A `set` on B reaches the accessory: A's own topic says the door is to open.
        var seen = accessorySub.outputLines.count
        try await rig.publish(rig.controllerSide, targetTopic + "/set", "0")
        _ = try await line(accessorySub, "the open target on A's side", timeout: 90, from: seen) {
            $0.hasSuffix("/garage-door/target-door-state/state 0")
        }
        // A change made on A's side comes back to B as an event (polling is off).
        let accessoryTarget = try await line(accessorySub, "A's target topic", timeout: 5) {
            $0.contains("/garage-door/target-door-state/state ")
        }
        let aTopic = String(accessoryTarget.split(separator: " ")[0].dropLast("/state".count))
        seen = controllerSub.outputLines.count
        try await rig.publish(rig.accessorySide, aTopic + "/set", "1")
        _ = try await line(controllerSub, "the close target on B, by an event", timeout: 90, from: seen) {
            $0 == "\(targetTopic)/state 1"
        }

        // A restarts (its accessory forgets every session): B verifies again and controls it.
        await rig.accessoryGateway?.terminate(grace: 10)
        try rig.startAccessoryGateway()
        seen = accessorySub.outputLines.count
        try await waitUntil("A online again", timeout: 60, pollInterval: 0.1) {
            accessorySub.outputLines.dropFirst(seen).contains { $0.hasPrefix("home/$gateway/status online") }
        }
        seen = accessorySub.outputLines.count
        try await rig.publish(rig.controllerSide, targetTopic + "/set", "0")
        _ = try await line(accessorySub, "the open target on A's side after its restart", timeout: 120, from: seen) {
            $0.hasSuffix("/garage-door/target-door-state/state 0")
        }
        // The link really was bad, and B never stopped.
        try relay.write("stats\n")
        try await relay.waitForOutput(containing: "\"stats\"", timeout: 10)
        let stats = try XCTUnwrap(
            relay.outputLines.compactMap { try? JSONValue(parsing: Array($0.utf8)) }.last { $0["event"] == "stats" })
        XCTAssertGreaterThan(stats["dropped"]?.intValue ?? 0, 0, "\(stats)")
        XCTAssertTrue(gatewayB.isRunning, gatewayB.standardError.suffix(2000).description)
    }
}
