import Foundation
import HAP
import TestSupport
import XCTest

/// The gateway's host has two interfaces (`NamespaceRig`): loopback, where its default
/// multicast route goes, and a veth to another namespace, where a HAP-python accessory lives and
/// advertises itself, over IPv4 or over IPv6 only. When the accessory restarts on another port,
/// the gateway finds it again only by asking on the second interface, in the accessory's
/// address family.
final class MDNSInterfacesTests: XCTestCase {
    func makeRig(gateway: String, accessory: String, port: Int) async throws -> NamespaceRig {
        try await NamespaceRig.make(self, gateway: [gateway], accessory: [accessory], port: port)
    }

    /// Stops the accessory and starts it on `port`; waits for the gateway to find it there.
    func restart(_ rig: NamespaceRig, _ sub: ChildProcess, on port: Int, gateway: ChildProcess) async throws {
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
        let pairings = try await rig.pairings()
        XCTAssertTrue(pairings.contains("fd00:77::2:40012"), pairings)
        // `homemqtt discover` hears it too, on a host whose multicast is IPv6 only (its IPv4
        // question cannot even be sent).
        try await runChecked("ip", rig.gatewaySide.exec + ["ip", "route", "del", "224.0.0.0/4", "dev", "lo"])
        let discovered = try await rig.discover()
        XCTAssertTrue(discovered.contains("  paired  c#") && discovered.contains("[fd00:77::2]:40012"), discovered)

        // Controlled over IPv6: a set reaches the accessory.
        try await rig.setBrightness(61, seenBy: sub)
    }
}
