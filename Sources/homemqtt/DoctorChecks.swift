import Foundation

// What `homemqtt doctor` reads and concludes, apart from listening: the IPv6 settings of an
// interface under /proc/sys/net/ipv6/conf, the kernel's IPv6 routes (/proc/net/ipv6_route) and
// the interfaces with IPv6 (/proc/net/if_inet6). Everything is read under a root that is /proc on
// a host and a directory of the same layout in tests; nothing is written, nothing needs root.

/// One thing the doctor says: what it looked at, whether it is right, and what to do when not.
struct DoctorFinding: Sendable, Equatable {
    enum Level: String, Sendable {
        /// Right as it is.
        case ok = "OK"
        /// Works in some networks, not in most: said, but not a failure (exit status 0).
        case warning = "WARNING"
        /// Stops Thread accessories from being reached (exit status 1).
        case problem = "PROBLEM"
    }

    var level: Level
    /// `interface eth0`, `accessory Eve Energy 1A2B (fd12:…::1)`.
    var subject: String
    var message: String
    /// Commands that fix it, to run as root, in order.
    var fix: [String] = []
}

/// The files of /proc the doctor reads, under `root`.
struct ProcFiles: Sendable {
    var root: String

    func read(_ path: String) -> String? {
        try? String(contentsOfFile: root + "/" + path, encoding: .utf8)
    }

    /// An integer sysctl of an interface: `/proc/sys/net/ipv6/conf/<interface>/<key>`. nil when
    /// the kernel has no such key (built without it) or the interface has no IPv6.
    func ipv6Setting(_ interface: String, _ key: String) -> Int? {
        read("sys/net/ipv6/conf/\(interface)/\(key)").flatMap {
            Int($0.trimmingCharacters(in: .whitespacesAndNewlines))
        }
    }

    /// The interfaces that have an IPv6 address, in the order the kernel lists them, each once:
    /// an interface that is down has lost its addresses (and its link-local one), so these are
    /// the ones up with IPv6.
    func interfacesWithIPv6() -> [String] {
        var names: [String] = []
        for line in (read("net/if_inet6") ?? "").split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count == 6, !names.contains(String(fields[5])) else { continue }
            names.append(String(fields[5]))
        }
        return names
    }

    /// A network daemon that handles router advertisements itself when it manages an
    /// interface (setting the kernel's accept_ra to 0 there): NetworkManager, systemd-networkd.
    /// Read from each process's `comm`, which any user may read.
    func userspaceRAHandler() -> String? {
        let names = ["NetworkManager": "NetworkManager", "systemd-network": "systemd-networkd"]
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        for pid in entries where !pid.isEmpty && pid.allSatisfy(\.isNumber) {
            guard let comm = read("\(pid)/comm")?.trimmingCharacters(in: .whitespacesAndNewlines) else { continue }
            if let name = names[comm] { return name }
        }
        return nil
    }

    /// The kernel's IPv6 routes, every table it lists; nil when the file cannot be read.
    func ipv6Routes() -> [IPv6Route]? {
        read("net/ipv6_route").map { text in text.split(separator: "\n").compactMap(IPv6Route.init(line:)) }
    }
}

/// One line of /proc/net/ipv6_route: destination, prefix length, source, next hop, metric,
/// reference count, use, flags (hex), interface.
struct IPv6Route: Sendable, Equatable {
    var destination: [UInt8]
    var prefixLength: Int
    var nextHop: [UInt8]
    var metric: UInt32
    var flags: UInt32
    var interface: String

    // <linux/ipv6_route.h> and <linux/route.h>
    static let gatewayFlag: UInt32 = 0x0002
    static let rejectFlag: UInt32 = 0x0200
    static let routeInfoFlag: UInt32 = 0x0080_0000
    static let localFlag: UInt32 = 0x8000_0000

    init?(line: Substring) {
        let f = line.split(separator: " ", omittingEmptySubsequences: true)
        guard f.count == 10, let destination = IPv6Text.bytes(hex: f[0]), let plen = Int(f[1], radix: 16),
            let nextHop = IPv6Text.bytes(hex: f[4]), let metric = UInt32(f[5], radix: 16),
            let flags = UInt32(f[8], radix: 16), (0...128).contains(plen)
        else { return nil }
        self.destination = destination
        prefixLength = plen
        self.nextHop = nextHop
        self.metric = metric
        self.flags = flags
        interface = String(f[9])
    }

    var isReject: Bool { flags & Self.rejectFlag != 0 }
    var hasGateway: Bool { flags & Self.gatewayFlag != 0 }

    /// `fd12:3456::/64 via fe80::1 dev wlan0`, as `ip -6 route` writes it.
    var text: String {
        let prefix = prefixLength == 0 ? "default" : "\(IPv6Text.format(destination))/\(prefixLength)"
        let via = hasGateway ? " via \(IPv6Text.format(nextHop))" : ""
        return "\(prefix)\(via) dev \(interface)"
    }

    func contains(_ address: [UInt8]) -> Bool {
        var bits = prefixLength
        for i in 0..<16 where bits > 0 {
            let mask: UInt8 = bits >= 8 ? 0xFF : ~(0xFF >> UInt8(bits))
            guard address[i] & mask == destination[i] & mask else { return false }
            bits -= 8
        }
        return true
    }

    /// The route the kernel would choose for `address` in its tables as listed: the longest
    /// prefix that holds it, of the lowest metric among equals; nil when none does, or when the
    /// one chosen refuses (an unreachable route; an empty table's catch-all on loopback is one,
    /// of the highest metric, so any real default route wins over it).
    static func best(for address: [UInt8], in routes: [IPv6Route]) -> IPv6Route? {
        let best = routes.filter { $0.contains(address) }.max {
            ($0.prefixLength, $1.metric) < ($1.prefixLength, $0.metric)
        }
        return best?.isReject == false ? best : nil
    }
}

/// IPv6 addresses between text, bytes and the kernel's 32-digit hex.
enum IPv6Text {
    static func bytes(hex: Substring) -> [UInt8]? {
        guard hex.count == 32 else { return nil }
        var out: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            guard let byte = UInt8(hex[index..<next], radix: 16) else { return nil }
            out.append(byte)
            index = next
        }
        return out
    }

    /// The bytes of a textual address, its scope (`%wlan0`) dropped; nil for anything else.
    static func bytes(_ text: String) -> [UInt8]? {
        let address = text.split(separator: "%", maxSplits: 1).first.map(String.init) ?? text
        var storage = in6_addr()
        guard inet_pton(AF_INET6, address, &storage) == 1 else { return nil }
        return withUnsafeBytes(of: storage) { Array($0) }
    }

    static func format(_ bytes: [UInt8]) -> String {
        var storage = in6_addr()
        withUnsafeMutableBytes(of: &storage) { $0.copyBytes(from: bytes.prefix(16)) }
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        guard inet_ntop(AF_INET6, &storage, &buffer, socklen_t(buffer.count)) != nil else { return "?" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// The checks themselves, each giving findings.
enum DoctorChecks {
    /// Where the settings are kept across reboots: read by systemd-sysctl (and procps) at boot.
    static let sysctlFile = "/etc/sysctl.d/60-homemqtt-thread.conf"

    /// The sysctl name of an interface's key: a VLAN's dot (`eth0.10`) is written `/`.
    static func sysctlName(_ interface: String, _ key: String) -> String {
        "net.ipv6.conf.\(interface.replacingOccurrences(of: ".", with: "/")).\(key)"
    }

    /// The commands that set `key` to `value` now and at every boot.
    static func fix(_ interface: String, _ key: String, _ value: Int) -> [String] {
        let name = sysctlName(interface, key)
        return ["sysctl -w \(name)=\(value)", "echo '\(name) = \(value)' >> \(sysctlFile)"]
    }

    /// Whether `interface` takes the border router's advertisements and the routes in them:
    /// `accept_ra` 1 (2 when the host forwards, since forwarding turns 1 off) and
    /// `accept_ra_rt_info_max_plen` ≥ 64 (the route information option for a Thread /64; 0, the
    /// kernel's default, takes none).
    static func interface(_ interface: String, proc: ProcFiles) -> [DoctorFinding] {
        let subject = "interface \(interface)"
        guard let acceptRA = proc.ipv6Setting(interface, "accept_ra") else {
            return [
                DoctorFinding(
                    level: .problem, subject: subject,
                    message:
                        "no IPv6 settings (\(proc.root)/sys/net/ipv6/conf/\(interface)): the interface is gone, "
                        + "or IPv6 is off on this host (ipv6.disable=1 on the kernel's command line)")
            ]
        }
        if proc.ipv6Setting(interface, "disable_ipv6") == 1 {
            return [
                DoctorFinding(
                    level: .problem, subject: subject, message: "disable_ipv6 is 1: IPv6 is off on this interface",
                    fix: fix(interface, "disable_ipv6", 0))
            ]
        }
        var findings: [DoctorFinding] = []
        let forwarding = proc.ipv6Setting(interface, "forwarding") ?? 0
        let needed = forwarding == 0 ? 1 : 2
        if acceptRA == 0, let handler = proc.userspaceRAHandler() {
            // NetworkManager and systemd-networkd turn the kernel's handling off and take the
            // advertisements (and their route information) themselves: the kernel's settings
            // then say nothing, and the routes to the accessories below say whether it worked.
            return [
                DoctorFinding(
                    level: .warning, subject: subject,
                    message:
                        "accept_ra is 0: the kernel ignores router advertisements here, but \(handler) runs and "
                        + "takes them itself on the interfaces it manages; the routes to the accessories say "
                        + "whether it took the border router's. If it does not manage \(interface):",
                    fix: fix(interface, "accept_ra", needed))
            ]
        }
        switch acceptRA {
        case 0:
            findings.append(
                DoctorFinding(
                    level: .problem, subject: subject,
                    message:
                        "accept_ra is 0: router advertisements are ignored, so no border router's route is taken",
                    fix: fix(interface, "accept_ra", needed)))
        case 1 where forwarding != 0:
            findings.append(
                DoctorFinding(
                    level: .problem, subject: subject,
                    message:
                        "accept_ra is 1 but forwarding is 1: "
                        + "a forwarding host ignores router advertisements unless accept_ra is 2",
                    fix: fix(interface, "accept_ra", 2)))
        default:
            findings.append(
                DoctorFinding(
                    level: .ok, subject: subject,
                    message: "accept_ra is \(acceptRA) (forwarding \(forwarding)): router advertisements are taken"))
        }
        switch proc.ipv6Setting(interface, "accept_ra_rt_info_max_plen") {
        case nil:
            findings.append(
                DoctorFinding(
                    level: .problem, subject: subject,
                    message:
                        "the kernel has no accept_ra_rt_info_max_plen (built without CONFIG_IPV6_ROUTE_INFO): "
                        + "it cannot take a border router's route; add the route by hand "
                        + "(ip -6 route add <prefix>/64 via <router> dev \(interface))"
                ))
        case let plen? where plen < 64:
            findings.append(
                DoctorFinding(
                    level: .problem, subject: subject,
                    message:
                        "accept_ra_rt_info_max_plen is \(plen): "
                        + "a border router's route to a Thread /64 is ignored (it must be 64 or more)",
                    fix: fix(interface, "accept_ra_rt_info_max_plen", 64)))
        case let plen?:
            findings.append(
                DoctorFinding(
                    level: .ok, subject: subject,
                    message: "accept_ra_rt_info_max_plen is \(plen): routes to Thread /64 prefixes are taken"))
        }
        return findings
    }

    /// Whether the host has a route to an accessory's `address`, and which.
    static func route(to address: String, subject: String, routes: [IPv6Route]?) -> DoctorFinding {
        guard let bytes = IPv6Text.bytes(address) else {
            return DoctorFinding(
                level: .ok, subject: subject,
                message: "\(address) is not IPv6: not checked (HAP over Thread is IPv6 only)")
        }
        if bytes[0] == 0xFE && bytes[1] & 0xC0 == 0x80 {
            return DoctorFinding(
                level: .ok, subject: subject, message: "\(address) is link-local: on the link, no route needed")
        }
        guard let routes else {
            return DoctorFinding(
                level: .problem, subject: subject, message: "cannot read the IPv6 routes (net/ipv6_route)")
        }
        guard let route = IPv6Route.best(for: bytes, in: routes) else {
            return DoctorFinding(
                level: .problem, subject: subject,
                message:
                    "no route to \(address): no border router's route was taken (see the interfaces above), "
                    + "or no border router announces this prefix",
                fix: ["ip -6 route get \(address)", "ip -6 route show"])
        }
        if route.flags & IPv6Route.localFlag != 0 {
            return DoctorFinding(level: .ok, subject: subject, message: "\(address) is an address of this host")
        }
        if route.prefixLength == 0 {
            return DoctorFinding(
                level: .warning, subject: subject,
                message:
                    "\(address) is reached only through the default route (\(route.text)), "
                    + "not a border router's route: it works only when the default router is the border router "
                    + "or routes to it"
            )
        }
        let how =
            route.flags & IPv6Route.routeInfoFlag != 0
            ? "a border router's route, from its advertisement"
            : route.hasGateway ? "a route through a router" : "on the link"
        return DoctorFinding(level: .ok, subject: subject, message: "\(address): \(route.text) (\(how))")
    }
}
