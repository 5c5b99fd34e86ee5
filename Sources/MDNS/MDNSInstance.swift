// A service instance as DNS-SD (RFC 6763) describes it: a PTR from the service type names the
// instance, whose SRV gives host and port and whose TXT gives its key/value pairs; the host's
// A and AAAA records give its addresses. What the TXT keys mean is the service's business
// (HAP's `id`, `c#`, `sf` are read in HAP).

/// One instance of a service type, joined from its records.
public struct MDNSInstance: Sendable, Hashable {
    /// The full instance name, `Living Room._hap._tcp.local`.
    public var name: String
    /// The instance label alone (the name without the service type).
    public var label: String
    /// The SRV target host and port.
    public var target: String
    public var port: Int
    /// The TXT pairs, merged over every TXT record of the instance (a later one wins).
    public var txt: [String: String]
    /// The target's addresses, IPv4 first, each once.
    public var addresses: [String]

    /// Joins PTR, SRV, TXT, A and AAAA records into the instances of `service` that have an
    /// SRV record, sorted by name; an instance without an address has none listed.
    public static func resolve(service: String, _ records: [DNSMessage.Record]) -> [MDNSInstance] {
        let service = service.lowercased()
        let names = Set(
            records.compactMap { r -> String? in
                if case .ptr(let target) = r.data, r.name.lowercased() == service { return target }
                return nil
            })
        var out: [MDNSInstance] = []
        for name in names.sorted() {
            var txt: [String: String] = [:]
            var srv: (String, Int)?
            for r in records where r.name.lowercased() == name.lowercased() {
                switch r.data {
                case .txt(let kv): txt.merge(kv) { _, new in new }
                case .srv(let target, let port): srv = (target, port)
                default: break
                }
            }
            guard let (target, port) = srv else { continue }
            var v4: [String] = []
            var v6: [String] = []
            for r in records where r.name.lowercased() == target.lowercased() {
                switch r.data {
                case .a(let ip) where !v4.contains(ip): v4.append(ip)
                case .aaaa(let ip) where !v6.contains(ip): v6.append(ip)
                default: break
                }
            }
            let suffix = "." + service
            let label = name.lowercased().hasSuffix(suffix) ? String(name.dropLast(suffix.count)) : name
            out.append(
                MDNSInstance(name: name, label: label, target: target, port: port, txt: txt, addresses: v4 + v6))
        }
        return out
    }
}
