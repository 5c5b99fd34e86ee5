import Foundation
import HomeModel
import TestSupport
import XCTest

/// `homemqtt doctor` on conditions built in a directory laid out as /proc (`--proc-root`): each
/// finding a user meets — router advertisements ignored, a forwarding host with accept_ra 1,
/// route information ignored, no route, a route through the default router only, a border
/// router's route — as the real binary prints it, with its exit status. Without listening
/// (`--timeout 0`): the address is given (`--address`), so no other test's mDNS can change what
/// is seen. The real `_hap._udp` announcement is DoctorNamespaceTests'.
final class DoctorTests: XCTestCase {
    static let accessory = "fd11:22::5"
    static let zero = String(repeating: "0", count: 32)

    /// A line of /proc/net/ipv6_route: destination, prefix length (hex), no source, next hop,
    /// metric, reference count, use, flags, interface.
    static func route(
        _ destination: String, _ plen: String, via hop: String, metric: String, flags: String, _ dev: String
    )
        -> String
    {
        [destination, plen, zero, "00", hop, metric, "00000001", "00000000", flags, dev].joined(separator: " ")
    }

    /// fd11:22::/64 via fe80::1 dev eth0, from a router advertisement's route information
    /// (RTF_UP | RTF_GATEWAY | RTF_ROUTEINFO | RTF_EXPIRES), as a border router's route is listed.
    static let borderRouterRoute = route(
        "fd110022000000000000000000000000", "40", via: "fe800000000000000000000000000001", metric: "00000400",
        flags: "00c00003", "eth0")
    /// default via fe80::99 dev eth0, from an advertisement (RTF_UP | RTF_GATEWAY | RTF_DEFAULT |
    /// RTF_ADDRCONF | RTF_EXPIRES).
    static let defaultRoute = route(
        zero, "00", via: "fe800000000000000000000000000099", metric: "00000400", flags: "00450003", "eth0")
    /// What every table has: fe80::/64 on the interface, and the catch-all that refuses (loopback,
    /// RTF_REJECT | RTF_NONEXTHOP, the highest metric).
    static let baseRoutes = [
        route("fe800000000000000000000000000000", "40", via: zero, metric: "00000100", flags: "00000001", "eth0"),
        route(zero, "00", via: zero, metric: "ffffffff", flags: "00200200", "lo"),
    ]

    /// A /proc of one interface with IPv6 besides loopback (and `eth9`, which the config denies),
    /// with these settings of `interface` and these routes.
    func proc(
        interface: String = "eth0", acceptRA: Int = 1, forwarding: Int = 0, rtInfoMaxPlen: Int? = 64,
        disableIPv6: Int = 0, routes: [String] = []
    ) throws -> (root: String, config: String) {
        let directory = try TemporaryDirectory(prefix: "homemqtt-doctor")
        let root = directory.file("proc")
        for (name, ra, fw, plen) in [(interface, acceptRA, forwarding, rtInfoMaxPlen), ("eth9", 0, 0, 0)] {
            let conf = "\(root)/sys/net/ipv6/conf/\(name)"
            try FileManager.default.createDirectory(atPath: conf, withIntermediateDirectories: true)
            try "\(ra)\n".write(toFile: conf + "/accept_ra", atomically: true, encoding: .utf8)
            try "\(fw)\n".write(toFile: conf + "/forwarding", atomically: true, encoding: .utf8)
            try "\(name == interface ? disableIPv6 : 0)\n".write(
                toFile: conf + "/disable_ipv6", atomically: true, encoding: .utf8)
            if let plen {
                try "\(plen)\n".write(toFile: conf + "/accept_ra_rt_info_max_plen", atomically: true, encoding: .utf8)
            }
        }
        try FileManager.default.createDirectory(atPath: root + "/net", withIntermediateDirectories: true)
        try """
        00000000000000000000000000000001 01 80 10 80       lo
        fe800000000000000000000000000002 02 40 20 80 \(interface)
        fe800000000000000000000000000003 03 40 20 80     eth9

        """.write(toFile: root + "/net/if_inet6", atomically: true, encoding: .utf8)
        try ((Self.baseRoutes + routes).joined(separator: "\n") + "\n").write(
            toFile: root + "/net/ipv6_route", atomically: true, encoding: .utf8)
        let config = directory.file("gateway.yml")
        try """
        state-directory: \(directory.file("state"))
        sources:
          - type: hap
            mdns-interfaces:
              deny: [eth9]

        """.write(toFile: config, atomically: true, encoding: .utf8)
        // Kept until the test ends: the binary reads it.
        addTeardownBlock { _ = directory }
        return (root, config)
    }

    func doctor(_ setup: (root: String, config: String), _ extra: [String] = []) async throws -> ProcessResult {
        TestCensus.record(.binary)
        return try await runProcess(
            homemqttBinary,
            [
                "doctor", "--config", setup.config, "--proc-root", setup.root, "--timeout", "0", "--address",
                Self.accessory,
            ]
                + extra, timeout: 20)
    }

    func testRouterAdvertisementsIgnoredIsAProblemWithTheCommandsThatFixIt() async throws {
        let result = try await doctor(proc(acceptRA: 0, routes: [Self.borderRouterRoute]))
        XCTAssertEqual(result.status, 1, result.standardOutput)
        let out = result.standardOutput
        XCTAssertTrue(out.contains("Checking every interface with IPv6, as none heard _hap._udp: eth0\n"), out)
        XCTAssertTrue(
            out.contains(
                "PROBLEM  interface eth0: accept_ra is 0: router advertisements are ignored, "
                    + "so no border router's route is taken\n"
                    + "         to fix it (as root; the second line keeps it after a reboot):\n"
                    + "           sysctl -w net.ipv6.conf.eth0.accept_ra=1\n"
                    + "           echo 'net.ipv6.conf.eth0.accept_ra = 1' >> /etc/sysctl.d/60-homemqtt-thread.conf\n"),
            out)
        XCTAssertTrue(out.contains("OK       interface eth0: accept_ra_rt_info_max_plen is 64"), out)
        XCTAssertFalse(out.contains("eth9"), "the config denies eth9: \(out)")
        XCTAssertTrue(out.hasSuffix("1 problem: Thread accessories cannot be reached until it is fixed.\n"), out)
        XCTAssertEqual(result.standardError, "")
    }

    func testAForwardingHostWithAcceptRA1IsToldToSet2() async throws {
        let result = try await doctor(proc(acceptRA: 1, forwarding: 1, routes: [Self.borderRouterRoute]))
        XCTAssertEqual(result.status, 1, result.standardOutput)
        let out = result.standardOutput
        XCTAssertTrue(
            out.contains(
                "PROBLEM  interface eth0: accept_ra is 1 but forwarding is 1: "
                    + "a forwarding host ignores router advertisements unless accept_ra is 2\n"
            ), out)
        XCTAssertTrue(out.contains("           sysctl -w net.ipv6.conf.eth0.accept_ra=2\n"), out)
        XCTAssertTrue(
            out.contains(
                "           echo 'net.ipv6.conf.eth0.accept_ra = 2' >> /etc/sysctl.d/60-homemqtt-thread.conf\n"),
            out)
        // accept_ra 0 on a forwarding host: the fix is 2 as well, not 1.
        let off = try await doctor(proc(acceptRA: 0, forwarding: 1, routes: [Self.borderRouterRoute]))
        XCTAssertEqual(off.status, 1, off.standardOutput)
        XCTAssertTrue(off.standardOutput.contains("sysctl -w net.ipv6.conf.eth0.accept_ra=2\n"), off.standardOutput)
        XCTAssertFalse(off.standardOutput.contains("accept_ra=1"), off.standardOutput)
        // accept_ra 2 on a forwarding host is right.
        let two = try await doctor(proc(acceptRA: 2, forwarding: 1, routes: [Self.borderRouterRoute]))
        XCTAssertEqual(two.status, 0, two.standardOutput)
        XCTAssertTrue(two.standardOutput.contains("OK       interface eth0: accept_ra is 2 (forwarding 1)"))
    }

    func testRouteInformationIgnoredIsAProblem() async throws {
        let result = try await doctor(proc(rtInfoMaxPlen: 0, routes: [Self.borderRouterRoute]))
        XCTAssertEqual(result.status, 1, result.standardOutput)
        let out = result.standardOutput
        XCTAssertTrue(
            out.contains(
                "PROBLEM  interface eth0: accept_ra_rt_info_max_plen is 0: "
                    + "a border router's route to a Thread /64 is ignored (it must be 64 or more)\n"
            ), out)
        XCTAssertTrue(out.contains("           sysctl -w net.ipv6.conf.eth0.accept_ra_rt_info_max_plen=64\n"), out)
        XCTAssertTrue(out.contains("OK       interface eth0: accept_ra is 1 (forwarding 0)"), out)
        // A kernel built without route information has no such key: it says so.
        let none = try await doctor(proc(rtInfoMaxPlen: nil, routes: [Self.borderRouterRoute]))
        XCTAssertEqual(none.status, 1, none.standardOutput)
        XCTAssertTrue(none.standardOutput.contains("built without CONFIG_IPV6_ROUTE_INFO"), none.standardOutput)
    }

    func testNoRouteToTheAccessoryIsAProblem() async throws {
        let result = try await doctor(proc())
        XCTAssertEqual(result.status, 1, result.standardOutput)
        let out = result.standardOutput
        XCTAssertTrue(
            out.contains(
                "PROBLEM  address fd11:22::5: no route to fd11:22::5: "
                    + "no border router's route was taken (see the interfaces above), "
                    + "or no border router announces this prefix\n"
            ), out)
        XCTAssertTrue(out.contains("           ip -6 route get fd11:22::5\n"), out)
        XCTAssertTrue(out.hasSuffix("1 problem: Thread accessories cannot be reached until it is fixed.\n"), out)
    }

    func testARouteThroughTheDefaultRouterOnlyIsAWarningNotAFailure() async throws {
        let result = try await doctor(proc(routes: [Self.defaultRoute]))
        XCTAssertEqual(result.status, 0, result.standardOutput)
        let out = result.standardOutput
        XCTAssertTrue(
            out.contains(
                "WARNING  address fd11:22::5: fd11:22::5 is reached only through the default route "
                    + "(default via fe80::99 dev eth0), not a border router's route"
            ), out)
        XCTAssertTrue(out.hasSuffix("Nothing wrong found (1 warning).\n"), out)
    }

    func testABorderRoutersRouteIsOKAndSaidInJSONToo() async throws {
        // The border router's /64 wins over the default route: the longest prefix.
        let setup = try proc(routes: [Self.defaultRoute, Self.borderRouterRoute])
        let result = try await doctor(setup)
        XCTAssertEqual(result.status, 0, result.standardOutput)
        let out = result.standardOutput
        XCTAssertTrue(
            out.contains(
                "OK       address fd11:22::5: fd11:22::5: fd11:22::/64 via fe80::1 dev eth0 "
                    + "(a border router's route, from its advertisement)\n"
            ), out)
        XCTAssertFalse(out.contains("PROBLEM"), out)
        XCTAssertFalse(out.contains("WARNING"), out)
        XCTAssertTrue(out.hasSuffix("Nothing wrong found.\n"), out)

        let json = try await doctor(setup, ["--json"])
        XCTAssertEqual(json.status, 0, json.standardOutput)
        let document = try JSONValue(parsing: Array(json.standardOutput.utf8))
        XCTAssertEqual(document["ok"]?.boolValue, true)
        XCTAssertEqual(document["problems"]?.intValue, 0)
        XCTAssertEqual(document["interfaces"], .array(["eth0"]))
        let findings = document["findings"]?.arrayValue ?? []
        XCTAssertEqual(findings.compactMap { $0["level"]?.stringValue }, ["ok", "ok", "ok"], "\(findings)")
        XCTAssertEqual(
            findings.last?["message"]?.stringValue,
            "fd11:22::5: fd11:22::/64 via fe80::1 dev eth0 (a border router's route, from its advertisement)")

        // A problem in JSON: not ok, exit 1, the fix as commands.
        let bad = try await doctor(proc(acceptRA: 0, routes: [Self.borderRouterRoute]), ["--json"])
        XCTAssertEqual(bad.status, 1, bad.standardOutput)
        let badDocument = try JSONValue(parsing: Array(bad.standardOutput.utf8))
        XCTAssertEqual(badDocument["ok"]?.boolValue, false)
        let problem = badDocument["findings"]?.arrayValue?.first { $0["level"]?.stringValue == "problem" }
        XCTAssertEqual(problem?["subject"]?.stringValue, "interface eth0")
        XCTAssertEqual(problem?["fix"]?[0]?.stringValue, "sysctl -w net.ipv6.conf.eth0.accept_ra=1")
    }

    /// NetworkManager (as systemd-networkd) sets the kernel's accept_ra to 0 and takes the
    /// advertisements itself (home-assistant/operating-system#4803): a warning, and the route decides.
    func testAcceptRA0UnderNetworkManagerIsAWarningAndTheRouteDecides() async throws {
        let setup = try proc(acceptRA: 0, rtInfoMaxPlen: 0, routes: [Self.borderRouterRoute])
        try FileManager.default.createDirectory(atPath: setup.root + "/812", withIntermediateDirectories: true)
        try "NetworkManager\n".write(toFile: setup.root + "/812/comm", atomically: true, encoding: .utf8)
        let result = try await doctor(setup)
        XCTAssertEqual(result.status, 0, result.standardOutput)
        let out = result.standardOutput
        XCTAssertTrue(
            out.contains(
                "WARNING  interface eth0: accept_ra is 0: the kernel ignores router advertisements here, "
                    + "but NetworkManager runs and takes them itself on the interfaces it manages"), out)
        XCTAssertFalse(out.contains("accept_ra_rt_info_max_plen"), "moot while the kernel ignores them: \(out)")
        XCTAssertTrue(out.contains("OK       address fd11:22::5: fd11:22::5: fd11:22::/64 via fe80::1 dev eth0"), out)
        XCTAssertTrue(out.hasSuffix("Nothing wrong found (1 warning).\n"), out)

        // Without the border router's route the accessory cannot be reached: a problem still.
        let noRoute = try proc(acceptRA: 0)
        try FileManager.default.createDirectory(atPath: noRoute.root + "/77", withIntermediateDirectories: true)
        try "systemd-network\n".write(toFile: noRoute.root + "/77/comm", atomically: true, encoding: .utf8)
        let failed = try await doctor(noRoute)
        XCTAssertEqual(failed.status, 1, failed.standardOutput)
        XCTAssertTrue(failed.standardOutput.contains("but systemd-networkd runs"), failed.standardOutput)
        XCTAssertTrue(failed.standardOutput.contains("PROBLEM  address fd11:22::5: no route to fd11:22::5"))
    }

    func testIPv6TurnedOffOnTheInterfaceIsAProblem() async throws {
        let result = try await doctor(proc(disableIPv6: 1, routes: [Self.borderRouterRoute]))
        XCTAssertEqual(result.status, 1, result.standardOutput)
        let out = result.standardOutput
        XCTAssertTrue(
            out.contains(
                "PROBLEM  interface eth0: disable_ipv6 is 1: IPv6 is off on this interface\n"
                    + "         to fix it (as root; the second line keeps it after a reboot):\n"
                    + "           sysctl -w net.ipv6.conf.eth0.disable_ipv6=0\n"), out)
        // Its other settings mean nothing while it is off: not judged.
        XCTAssertFalse(out.contains("accept_ra"), out)
    }

    func testAVLANsSysctlNameHasASlash() async throws {
        let result = try await doctor(proc(interface: "eth0.10", acceptRA: 0, routes: [Self.borderRouterRoute]))
        XCTAssertEqual(result.status, 1, result.standardOutput)
        XCTAssertTrue(
            result.standardOutput.contains("PROBLEM  interface eth0.10: accept_ra is 0"), result.standardOutput)
        XCTAssertTrue(
            result.standardOutput.contains("sysctl -w net.ipv6.conf.eth0/10.accept_ra=1\n"), result.standardOutput)
    }

    func testUsageErrorsExit2() async throws {
        let setup = try proc()
        for (arguments, expected) in [
            (["--timeout", "99"], "homemqtt doctor: --timeout must be between 0 and 60 seconds, got 99.0\n"),
            (
                ["--address", "not-an-address"],
                "homemqtt doctor: --address must be an IPv6 address, got 'not-an-address'\n"
            ),
        ] {
            TestCensus.record(.binary)
            let result = try await runProcess(
                homemqttBinary, ["doctor", "--config", setup.config, "--proc-root", setup.root] + arguments)
            XCTAssertEqual(result.status, 2, "\(arguments): \(result.standardError)")
            XCTAssertEqual(result.standardError, expected)
            XCTAssertEqual(result.standardOutput, "")
        }
        // A config that cannot be read is the config's error: exit 2, as every command says it.
        let missing = try await runProcess(
            homemqttBinary, ["doctor", "--config", setup.root + "/nope.yml", "--timeout", "0"])
        XCTAssertEqual(missing.status, 2, missing.standardError)
        XCTAssertTrue(missing.standardError.contains("nope.yml"), missing.standardError)
    }
}
