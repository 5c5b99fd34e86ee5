import Foundation
import HAP
import TestSupport
import XCTest

/// The gateway's host has two interfaces: loopback, where its default multicast route goes (as
/// `eth0` would), and a veth to another network namespace (as `wlan0` or a second LAN would),
/// where a HAP-python accessory lives and advertises itself. When the accessory restarts on
/// another port, the gateway finds it again only by asking on the second interface too.
final class MDNSInterfacesTests: XCTestCase {
    final class Rig: @unchecked Sendable {
        let gatewaySide: NetworkNamespace
        let accessorySide: NetworkNamespace
        let directory: TemporaryDirectory
        var processes: [ChildProcess] = []
        var peer: HAPPeer?
        init(gatewaySide: NetworkNamespace, accessorySide: NetworkNamespace, directory: TemporaryDirectory) {
            self.gatewaySide = gatewaySide
            self.accessorySide = accessorySide
            self.directory = directory
        }
        func stop() async {
            await peer?.stop()
            for p in processes.reversed() { await p.terminate(grace: 5) }
            await accessorySide.delete()
            await gatewaySide.delete()
        }
    }

    static let gatewayAddress = "10.231.0.1"
    static let accessoryAddress = "10.231.0.2"

    func testAnAccessoryOnTheSecondInterfaceIsFollowedThereAndNotWhenItIsDenied() async throws {
        try PeerProcess.requireVenv()
        let gatewaySide = try await NetworkNamespace.create()
        let accessorySide: NetworkNamespace
        do { accessorySide = try await NetworkNamespace.create() } catch {
            await gatewaySide.delete()
            throw error
        }
        let rig = Rig(
            gatewaySide: gatewaySide, accessorySide: accessorySide,
            directory: try TemporaryDirectory(prefix: "homemqtt-mdns-if"))
        addTeardownBlock { await rig.stop() }
        // The second interface: a veth pair between the namespaces; on the accessory's side it
        // carries the multicast route, on the gateway's side loopback keeps it.
        let suffix = String(UUID().uuidString.prefix(6).lowercased())
        let (near, far) = ("hg\(suffix)", "ha\(suffix)")
        try await runChecked("ip", ["link", "add", near, "type", "veth", "peer", "name", far])
        try await runChecked("ip", ["link", "set", near, "netns", gatewaySide.name])
        try await runChecked("ip", ["link", "set", far, "netns", accessorySide.name])
        for (ns, device, address) in [
            (gatewaySide, near, Self.gatewayAddress), (accessorySide, far, Self.accessoryAddress),
        ] {
            try await runChecked("ip", ns.exec + ["ip", "addr", "add", "\(address)/24", "dev", device])
            try await runChecked("ip", ns.exec + ["ip", "link", "set", device, "up"])
        }
        try await runChecked("ip", accessorySide.exec + ["ip", "route", "replace", "224.0.0.0/4", "dev", far])

        let homemqtt = try builtProduct("homemqtt")
        let config = rig.directory.file("gateway.yml")
        let peerState = rig.directory.file("peer.state")
        let broker = try ChildProcess("ip", gatewaySide.exec + ["mosquitto", "-p", "1883"])
        rig.processes.append(broker)
        try await waitUntil("mosquitto in the namespace", timeout: 10, pollInterval: 0.1) {
            let r = try await runProcess(
                "ip", gatewaySide.exec + ["mosquitto_pub", "-p", "1883", "-t", "p", "-m", "x"])
            return r.status == 0
        }
        func writeConfig(_ interfaces: String) throws {
            try """
            broker:
              url: mqtt://127.0.0.1:1883
            state-directory: \(rig.directory.file("state"))
            poll-interval: 0
            sources:
              - type: hap
                \(interfaces)
            homeassistant:
              enabled: false
            """.write(toFile: config, atomically: true, encoding: .utf8)
        }
        try writeConfig("")
        func startPeer(_ port: Int) async throws {
            rig.peer = try await HAPPeer.start(
                port: port, state: peerState, advertise: true, launcher: accessorySide.launcher,
                address: Self.accessoryAddress)
        }
        try await startPeer(40_001)
        var paired = false
        for _ in 0..<4 where !paired {
            let r = try await runProcess(
                "ip",
                gatewaySide.exec + [
                    homemqtt, "pair", "--config", config, "--host", Self.accessoryAddress, "--port", "40001", "--code",
                    HAPPeer.defaultSetupCode,
                ], timeout: 60)
            paired = r.status == 0
            guard
                paired || r.standardError.contains("(wrong-setup-code)") || r.standardError.contains("(bad-signature)")
            else { return XCTFail("pair failed: \(r.standardError)") }
        }

        let sub = try ChildProcess(
            "ip", gatewaySide.exec + ["stdbuf", "-oL", "mosquitto_sub", "-p", "1883", "-v", "-t", "home/#"])
        rig.processes.append(sub)
        func availability(_ value: String, from: Int, timeout: Double) async throws {
            try await waitUntil("an accessory \(value)", timeout: timeout, pollInterval: 0.05) {
                sub.outputLines.dropFirst(from).contains { $0.contains("/peer-light/$availability \(value)") }
            }
        }
        var gateway = try ChildProcess("ip", gatewaySide.exec + [homemqtt, "run", "--config", config])
        rig.processes.append(gateway)
        try await availability("online", from: 0, timeout: 30)

        // Restarted on another port: found again through the second interface.
        var mark = sub.outputLines.count
        await rig.peer?.stop()
        try await availability("offline", from: mark, timeout: 20)
        mark = sub.outputLines.count
        try await startPeer(40_002)
        do {
            try await availability("online", from: mark, timeout: 30)
        } catch {
            XCTFail("gateway stderr: \(gateway.standardError.suffix(3000))")
            throw error
        }

        // The same with that interface denied: the accessory is not found on its new port.
        await gateway.terminate(grace: 5)
        await rig.peer?.stop()
        try writeConfig("mdns-interfaces: { deny: [\(near)] }")
        try await startPeer(40_003)
        mark = sub.outputLines.count
        gateway = try ChildProcess("ip", gatewaySide.exec + [homemqtt, "run", "--config", config])
        rig.processes.append(gateway)
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
}
