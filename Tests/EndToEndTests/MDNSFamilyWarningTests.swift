import Foundation
import TestSupport
import XCTest

/// What the gateway says when mDNS cannot use IPv4: on a host without IPv4 multicast it still
/// follows accessories over IPv6 and must say so, not that `_hap._tcp.local` is not followed.
/// The real binary with a `hap` source in a network namespace of its own: first with loopback
/// only (nothing to ask on), then with an IPv6-only interface (a veth pair, no IPv4 address and
/// no IPv4 multicast route).
final class MDNSFamilyWarningTests: XCTestCase {
    func gatewayLog(in ns: NetworkNamespace, until match: String) async throws -> String {
        let directory = try TemporaryDirectory(prefix: "homemqtt-mdns-family")
        let config = directory.file("gateway.yml")
        // No broker: the HAP source and its browser start while the gateway waits for one.
        try """
        broker:
          url: mqtt://127.0.0.1:1883
        state-directory: \(directory.file("state"))
        sources:
          - type: hap
        homeassistant:
          enabled: false
        log-level: info
        """.write(toFile: config, atomically: true, encoding: .utf8)
        TestCensus.record(.binary)
        let gateway = try ChildProcess("ip", ns.exec + [try builtProduct("homemqtt"), "run", "--config", config])
        do {
            try await waitUntil("the gateway to say what mDNS follows", timeout: 20, pollInterval: 0.1) {
                gateway.standardError.contains(match)
            }
        } catch {
            await gateway.terminate(grace: 5)
            throw ProcessError("\(error)\n\(gateway.standardError)")
        }
        // A second or so more: a contradicting line would come right after.
        try await Task.sleep(for: .seconds(1))
        await gateway.terminate(grace: 5)
        return gateway.standardError
    }

    func testAHostWithoutIPv4SaysItFollowsOverIPv6Only() async throws {
        let ns = try await NetworkNamespace.create()
        addTeardownBlock { await ns.delete() }
        // `create` routes IPv4 multicast over loopback: taken away, IPv4 mDNS has no route.
        try await runChecked("ip", ns.exec + ["ip", "route", "del", "224.0.0.0/4", "dev", "lo"])

        // Each browser says it, `_hap._tcp` and `_hap._udp` (HAP over Thread), in either order.
        let nothing = try await gatewayLog(in: ns, until: "mDNS: _hap._tcp.local")
        XCTAssertTrue(
            nothing.contains(
                "mDNS: _hap._tcp.local is not followed: no IPv4 multicast (cannot join 224.0.0.251: "),
            nothing)
        XCTAssertTrue(nothing.contains("and no IPv6 interface to ask on"), nothing)

        // An interface with an IPv6 address and none of IPv4, as on an IPv6-only network.
        let (near, far) = (
            "v6a\(UUID().uuidString.prefix(4).lowercased())", "v6b\(UUID().uuidString.prefix(4).lowercased())"
        )
        try await runChecked("ip", ns.exec + ["ip", "link", "add", near, "type", "veth", "peer", "name", far])
        for (device, address) in [(near, "fd00:39::1"), (far, "fd00:39::2")] {
            try await runChecked("ip", ns.exec + ["ip", "-6", "addr", "add", "\(address)/64", "dev", device, "nodad"])
            try await runChecked("ip", ns.exec + ["ip", "link", "set", device, "up"])
        }
        let ipv6 = try await gatewayLog(in: ns, until: "mDNS: _hap._tcp.local")
        let line = ipv6.split(separator: "\n").first { $0.contains("mDNS: _hap._tcp.local") }.map(String.init) ?? ""
        XCTAssertTrue(line.contains("mDNS: _hap._tcp.local is followed over IPv6 only, on "), ipv6)
        XCTAssertTrue(line.contains(near) && line.contains(far), line)
        XCTAssertTrue(line.contains(": no IPv4 multicast (cannot join 224.0.0.251: "), line)
        XCTAssertTrue(line.contains(" warning "), "not a warning: \(line)")
        XCTAssertFalse(ipv6.contains("is not followed"), ipv6)
        XCTAssertFalse(ipv6.contains("cannot send a query"), ipv6)
    }
}
