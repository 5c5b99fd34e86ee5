import Foundation
import HAP
import TestSupport
import XCTest

/// The gateway's host with two interfaces: loopback, where its default multicast route goes (as
/// `eth0` would), and a veth to another network namespace (as `wlan0` or a second LAN would),
/// where a HAP-python accessory lives and advertises itself. A mosquitto runs on the gateway
/// side's loopback. Everything is stopped and deleted when the test ends.
final class NamespaceRig: @unchecked Sendable {
    let gatewaySide: NetworkNamespace
    let accessorySide: NetworkNamespace
    let directory: TemporaryDirectory
    /// The veth's end on each side.
    let near: String
    let far: String
    /// The peer's `--address`: where it runs mDNS (and listens, unless `listen` says otherwise).
    let peerAddress: String
    let listen: [String]
    let announced: [String]
    var processes: [ChildProcess] = []
    var peer: HAPPeer?
    var config: String { directory.file("gateway.yml") }

    private init(
        gatewaySide: NetworkNamespace, accessorySide: NetworkNamespace, directory: TemporaryDirectory,
        near: String, far: String, peerAddress: String, listen: [String], announced: [String]
    ) {
        self.gatewaySide = gatewaySide
        self.accessorySide = accessorySide
        self.directory = directory
        self.near = near
        self.far = far
        self.peerAddress = peerAddress
        self.listen = listen
        self.announced = announced
    }

    /// The namespaces and the veth with the `gateway` and `accessory` addresses (IPv4 /24,
    /// IPv6 /64), the broker, a config, and the accessory started on `port` and paired at
    /// `pairAt`. The peer runs mDNS on `peerAddress` (default: the accessory's addresses),
    /// listens on `listen` and announces `announced` (default: where it runs mDNS).
    static func make(
        _ test: XCTestCase, gateway: [String], accessory: [String], port: Int, peerAddress: String? = nil,
        listen: [String] = [], announced: [String] = [], pairAt: String? = nil
    ) async throws -> NamespaceRig {
        try PeerProcess.requireVenv()
        let gatewaySide = try await NetworkNamespace.create()
        let accessorySide: NetworkNamespace
        do { accessorySide = try await NetworkNamespace.create() } catch {
            await gatewaySide.delete()
            throw error
        }
        let suffix = String(UUID().uuidString.prefix(6).lowercased())
        let rig = NamespaceRig(
            gatewaySide: gatewaySide, accessorySide: accessorySide,
            directory: try TemporaryDirectory(prefix: "homemqtt-mdns-if"), near: "hg\(suffix)", far: "ha\(suffix)",
            peerAddress: peerAddress ?? accessory.joined(separator: ","), listen: listen, announced: announced)
        test.addTeardownBlock { await rig.stop() }
        try await runChecked("ip", ["link", "add", rig.near, "type", "veth", "peer", "name", rig.far])
        try await runChecked("ip", ["link", "set", rig.near, "netns", gatewaySide.name])
        try await runChecked("ip", ["link", "set", rig.far, "netns", accessorySide.name])
        for (ns, device, addresses) in [(gatewaySide, rig.near, gateway), (accessorySide, rig.far, accessory)] {
            for address in addresses { try await rig.add(address, in: ns, device: device) }
            try await runChecked("ip", ns.exec + ["ip", "link", "set", device, "up"])
        }
        // On the accessory's side the veth carries IPv4 multicast; on the gateway's, loopback
        // keeps the default route, as eth0 would. (IPv6 multicast goes by interface anyway.)
        try await runChecked("ip", accessorySide.exec + ["ip", "route", "replace", "224.0.0.0/4", "dev", rig.far])

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
                    try builtProduct("homemqtt"), "pair", "--config", rig.config, "--host", pairAt ?? accessory[0],
                    "--port", String(port), "--code", HAPPeer.defaultSetupCode,
                ], timeout: 60)
            paired = r.status == 0
            guard
                paired || r.standardError.contains("wrong-setup-code") || r.standardError.contains("bad-signature")
            else { throw ProcessError("pair failed: \(r.standardError)") }
        }
        return rig
    }

    /// Adds an address to a side's veth (IPv4 /24, IPv6 /64 without duplicate detection).
    func add(_ address: String, in ns: NetworkNamespace, device: String) async throws {
        let arguments =
            address.contains(":")
            ? ["-6", "addr", "add", "\(address)/64", "dev", device, "nodad"]
            : ["addr", "add", "\(address)/24", "dev", device]
        try await runChecked("ip", ns.exec + ["ip"] + arguments)
    }

    /// Takes an address off the accessory's veth: nothing answers there any more.
    func removeFromAccessory(_ address: String) async throws {
        let prefix = address.contains(":") ? "/64" : "/24"
        try await runChecked("ip", accessorySide.exec + ["ip", "addr", "del", address + prefix, "dev", far])
    }

    /// The link-local IPv6 address of the accessory's veth, once it is usable (past duplicate
    /// address detection).
    func accessoryLinkLocalAddress() async throws -> String {
        var address = ""
        try await waitUntil("a link-local address on the accessory's veth", timeout: 10, pollInterval: 0.1) {
            let shown = try await runChecked(
                "ip", accessorySide.exec + ["ip", "-6", "-o", "addr", "show", "dev", far, "scope", "link"]
            ).standardOutput
            guard !shown.contains("tentative"),
                let field = shown.split(separator: " ").first(where: { $0.hasPrefix("fe80:") })
            else { return false }
            address = String(field.split(separator: "/")[0])
            return true
        }
        return address
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
            address: peerAddress, listen: listen, announced: announced)
    }

    func startGateway() throws -> ChildProcess {
        TestCensus.record(.binary)
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

    /// `homemqtt pairings`: each pairing with the address it will connect to first.
    func pairings() async throws -> String {
        try await runChecked(
            "ip", gatewaySide.exec + [try builtProduct("homemqtt"), "pairings", "--config", config]
        ).standardOutput
    }

    /// `homemqtt discover` on the gateway's side: a line per accessory heard.
    func discover() async throws -> String {
        try await runChecked(
            "ip", gatewaySide.exec + [try builtProduct("homemqtt"), "discover", "--config", config, "--timeout", "4"]
        ).standardOutput
    }

    /// Sets the light's brightness over MQTT, as a user would, and waits for the accessory to
    /// have it.
    func setBrightness(_ value: Int, seenBy sub: ChildProcess) async throws {
        let found = try await peer!.command("find Brightness")
        let ids = found.split(separator: " ")
        XCTAssertEqual(ids.first, "OK", found)
        let line = try XCTUnwrap(
            sub.outputLines.first { $0.contains("/peer-light/") && $0.contains("/brightness/state ") })
        let topic = String(line.split(separator: " ")[0].dropLast("/state".count))
        try await runChecked(
            "ip", gatewaySide.exec + ["mosquitto_pub", "-p", "1883", "-t", "\(topic)/set", "-m", String(value)])
        try await waitUntil("the accessory's brightness \(value)", timeout: 15, pollInterval: 0.1) {
            try await peer!.value(aid: UInt64(ids[1]) ?? 0, iid: UInt64(ids[2]) ?? 0) == String(value)
        }
    }
}

/// Waits until `sub` (subscribed to `home/#`) printed the peer light's `$availability` `value`
/// after its first `from` lines.
func availability(_ sub: ChildProcess, _ value: String, from: Int, timeout: Double) async throws {
    try await waitUntil("an accessory \(value)", timeout: timeout, pollInterval: 0.05) {
        sub.outputLines.dropFirst(from).contains { $0.contains("/peer-light/$availability \(value)") }
    }
}
