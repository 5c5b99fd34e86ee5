import Foundation
import HAP
import TestSupport
import XCTest

/// The gateway's host has two interfaces: loopback, where its default multicast route goes (as
/// `eth0` would), and a veth to another network namespace (as `wlan0` or a second LAN would),
/// where a HAP-python accessory lives and advertises itself, over IPv4 or over IPv6 only. When
/// the accessory restarts on another port, the gateway finds it again only by asking on the
/// second interface, in the accessory's address family.
final class MDNSInterfacesTests: XCTestCase {
    /// Two namespaces joined by a veth, a mosquitto on the gateway side's loopback, and what the
    /// test starts; all stopped and deleted at the end.
    final class Rig: @unchecked Sendable {
        let gatewaySide: NetworkNamespace
        let accessorySide: NetworkNamespace
        let directory: TemporaryDirectory
        /// The veth's end on the gateway's side, and the accessory's address beyond it.
        let near: String
        let accessoryAddress: String
        var processes: [ChildProcess] = []
        var peer: HAPPeer?
        var config: String { directory.file("gateway.yml") }
        init(
            gatewaySide: NetworkNamespace, accessorySide: NetworkNamespace, directory: TemporaryDirectory,
            near: String, accessoryAddress: String
        ) {
            self.gatewaySide = gatewaySide
            self.accessorySide = accessorySide
            self.directory = directory
            self.near = near
            self.accessoryAddress = accessoryAddress
        }
        func stop() async {
            await peer?.stop()
            for p in processes.reversed() { await p.terminate(grace: 5) }
            await accessorySide.delete()
            await gatewaySide.delete()
        }

        func writeConfig(_ hapSourceKeys: String = "") throws {
            try """
            broker:
              url: mqtt://127.0.0.1:1883
            state-directory: \(directory.file("state"))
            poll-interval: 0
            sources:
              - type: hap
                \(hapSourceKeys)
            homeassistant:
              enabled: false
            """.write(toFile: config, atomically: true, encoding: .utf8)
        }

        func startPeer(_ port: Int) async throws {
            peer = try await HAPPeer.start(
                port: port, state: directory.file("peer.state"), advertise: true, launcher: accessorySide.launcher,
                address: accessoryAddress)
        }

        func startGateway() throws -> ChildProcess {
            let gateway = try ChildProcess(
                "ip", gatewaySide.exec + [try builtProduct("homemqtt"), "run", "--config", config])
            processes.append(gateway)
            return gateway
        }

        func subscribe() throws -> ChildProcess {
            let sub = try ChildProcess(
                "ip", gatewaySide.exec + ["stdbuf", "-oL", "mosquitto_sub", "-p", "1883", "-v", "-t", "home/#"])
            processes.append(sub)
            return sub
        }
    }

    /// The namespaces, the veth with `gateway`/`accessory` addresses (IPv4 /24 or IPv6 /64), the
    /// broker, a config, and the accessory paired on `port`.
    func makeRig(gateway: String, accessory: String, port: Int) async throws -> Rig {
        try PeerProcess.requireVenv()
        let gatewaySide = try await NetworkNamespace.create()
        let accessorySide: NetworkNamespace
        do { accessorySide = try await NetworkNamespace.create() } catch {
            await gatewaySide.delete()
            throw error
        }
        let suffix = String(UUID().uuidString.prefix(6).lowercased())
        let (near, far) = ("hg\(suffix)", "ha\(suffix)")
        let rig = Rig(
            gatewaySide: gatewaySide, accessorySide: accessorySide,
            directory: try TemporaryDirectory(prefix: "homemqtt-mdns-if"), near: near, accessoryAddress: accessory)
        addTeardownBlock { await rig.stop() }
        let ipv6 = accessory.contains(":")
        try await runChecked("ip", ["link", "add", near, "type", "veth", "peer", "name", far])
        try await runChecked("ip", ["link", "set", near, "netns", gatewaySide.name])
        try await runChecked("ip", ["link", "set", far, "netns", accessorySide.name])
        for (ns, device, address) in [(gatewaySide, near, gateway), (accessorySide, far, accessory)] {
            let prefix =
                ipv6
                ? ["-6", "addr", "add", "\(address)/64", "dev", device, "nodad"]
                : [
                    "addr", "add", "\(address)/24", "dev", device,
                ]
            try await runChecked("ip", ns.exec + ["ip"] + prefix)
            try await runChecked("ip", ns.exec + ["ip", "link", "set", device, "up"])
        }
        // On the accessory's side the veth carries IPv4 multicast; on the gateway's, loopback
        // keeps the default route, as eth0 would. (IPv6 multicast goes by interface anyway.)
        try await runChecked("ip", accessorySide.exec + ["ip", "route", "replace", "224.0.0.0/4", "dev", far])

        let broker = try ChildProcess("ip", gatewaySide.exec + ["mosquitto", "-p", "1883"])
        rig.processes.append(broker)
        try await waitUntil("mosquitto in the namespace", timeout: 10, pollInterval: 0.1) {
            let r = try await runProcess(
                "ip", gatewaySide.exec + ["mosquitto_pub", "-p", "1883", "-t", "p", "-m", "x"])
            return r.status == 0
        }
        try rig.writeConfig()
        try await rig.startPeer(port)
        var paired = false
        for _ in 0..<4 where !paired {
            let r = try await runProcess(
                "ip",
                gatewaySide.exec + [
                    try builtProduct("homemqtt"), "pair", "--config", rig.config, "--host", accessory, "--port",
                    String(port), "--code", HAPPeer.defaultSetupCode,
                ], timeout: 60)
            paired = r.status == 0
            guard
                paired || r.standardError.contains("(wrong-setup-code)") || r.standardError.contains("(bad-signature)")
            else { throw ProcessError("pair failed: \(r.standardError)") }
        }
        return rig
    }

    func availability(_ sub: ChildProcess, _ value: String, from: Int, timeout: Double) async throws {
        try await waitUntil("an accessory \(value)", timeout: timeout, pollInterval: 0.05) {
            sub.outputLines.dropFirst(from).contains { $0.contains("/peer-light/$availability \(value)") }
        }
    }

    /// Stops the accessory and starts it on `port`; waits for the gateway to find it there.
    func restart(_ rig: Rig, _ sub: ChildProcess, on port: Int, gateway: ChildProcess) async throws {
        var mark = sub.outputLines.count
        await rig.peer?.stop()
        try await availability(sub, "offline", from: mark, timeout: 20)
        mark = sub.outputLines.count
        try await rig.startPeer(port)
        do {
            try await availability(sub, "online", from: mark, timeout: 30)
        } catch {
            XCTFail("gateway stderr: \(gateway.standardError.suffix(3000))")
            throw error
        }
    }

    func testAnAccessoryOnTheSecondInterfaceIsFollowedThereAndNotWhenItIsDenied() async throws {
        let rig = try await makeRig(gateway: "10.231.0.1", accessory: "10.231.0.2", port: 40_001)
        let sub = try rig.subscribe()
        var gateway = try rig.startGateway()
        try await availability(sub, "online", from: 0, timeout: 30)
        try await restart(rig, sub, on: 40_002, gateway: gateway)

        // The same with that interface denied: the accessory is not found on its new port.
        await gateway.terminate(grace: 5)
        await rig.peer?.stop()
        try rig.writeConfig("mdns-interfaces: { deny: [\(rig.near)] }")
        try await rig.startPeer(40_003)
        let mark = sub.outputLines.count
        gateway = try rig.startGateway()
        // The gateway runs and tries (the old port is closed, so it asks the network)…
        try await waitUntil("the gateway online", timeout: 20, pollInterval: 0.05) {
            sub.outputLines.dropFirst(mark).contains("home/$gateway/status online")
        }
        // …but hears nothing on the one interface where the accessory answers.
        try await Task.sleep(for: .seconds(10))
        XCTAssertFalse(
            sub.outputLines.dropFirst(mark).contains { $0.hasSuffix("/peer-light/$availability online") },
            "found through an interface the config denies")
    }

    func testAnAccessoryReachableOnlyOverIPv6IsFoundAndControlled() async throws {
        let rig = try await makeRig(gateway: "fd00:77::1", accessory: "fd00:77::2", port: 40_011)
        let sub = try rig.subscribe()
        let gateway = try rig.startGateway()
        try await availability(sub, "online", from: 0, timeout: 30)
        // Restarted on another port, announced over IPv6 only (AAAA on ff02::fb): found again.
        try await restart(rig, sub, on: 40_012, gateway: gateway)
        let pairings = try await runChecked(
            "ip", rig.gatewaySide.exec + [try builtProduct("homemqtt"), "pairings", "--config", rig.config])
        XCTAssertTrue(pairings.standardOutput.contains("fd00:77::2:40012"), pairings.standardOutput)

        // Controlled over IPv6: a set reaches the accessory.
        let found = try await rig.peer!.command("find Brightness")
        let ids = found.split(separator: " ")
        XCTAssertEqual(ids.first, "OK", found)
        let line = try XCTUnwrap(
            sub.outputLines.first { $0.contains("/peer-light/") && $0.contains("/brightness/state ") })
        let topic = String(line.split(separator: " ")[0].dropLast("/state".count))
        try await runChecked(
            "ip", rig.gatewaySide.exec + ["mosquitto_pub", "-p", "1883", "-t", "\(topic)/set", "-m", "61"])
        try await waitUntil("the accessory's brightness 61", timeout: 15, pollInterval: 0.1) {
            try await rig.peer!.value(aid: UInt64(ids[1]) ?? 0, iid: UInt64(ids[2]) ?? 0) == "61"
        }
    }
}
