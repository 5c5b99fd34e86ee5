import Foundation

// What a responder says for one service instance (RFC 6762, RFC 6763), as pure functions of
// the instance and the host's addresses: its records, the answer to a query, the probe, whether
// another's records conflict with it, the next name after a conflict, and its goodbye.
// `MDNSResponder` sends them; the tests read them without a socket.

/// One service instance to advertise: `Name._hap._tcp.local` on `host`:`port`, with its TXT.
public struct MDNSServiceInstance: Sendable, Hashable {
    /// The instance's label, as people read it ("HomeMQTT My Home"); the responder renames it
    /// "HomeMQTT My Home (2)" when another holds it.
    public var name: String
    /// The service type, `_hap._tcp.local`.
    public var type: String
    /// The host's name, `something.local`: its own A/AAAA records, so the instance never
    /// competes with the machine's own name (avahi's).
    public var host: String
    public var port: Int
    public var txt: [String: String]

    public init(name: String, type: String, host: String, port: Int, txt: [String: String]) {
        self.name = name
        self.type = type
        self.host = host
        self.port = port
        self.txt = txt
    }

    /// The full name, `Name._hap._tcp.local`. A dot in the label would split it (the codec
    /// writes names label by label, unescaped), so it is a space here.
    public var fullName: String { "\(name.replacingOccurrences(of: ".", with: " ")).\(type)" }
}

/// The records of one instance and what follows from them.
public struct MDNSAdvertisement: Sendable, Hashable {
    /// RFC 6762 §10: 120 s for records with a host name or address, 75 minutes for the others.
    public static let hostTTL: UInt32 = 120
    public static let otherTTL: UInt32 = 4500
    static let servicesName = "_services._dns-sd._udp.local"

    public var instance: MDNSServiceInstance
    /// The host's addresses, IPv4 and IPv6, as text.
    public var addresses: [String]

    public init(instance: MDNSServiceInstance, addresses: [String]) {
        self.instance = instance
        self.addresses = addresses
    }

    var ptr: DNSMessage.Record {
        .init(name: instance.type, data: .ptr(instance.fullName), ttl: Self.otherTTL)
    }
    var services: DNSMessage.Record {
        .init(name: Self.servicesName, data: .ptr(instance.type), ttl: Self.otherTTL)
    }
    var srv: DNSMessage.Record {
        .init(
            name: instance.fullName, data: .srv(target: instance.host, port: instance.port), ttl: Self.hostTTL,
            cacheFlush: true)
    }
    var txt: DNSMessage.Record {
        .init(name: instance.fullName, data: .txt(instance.txt), ttl: Self.otherTTL, cacheFlush: true)
    }
    var addressRecords: [DNSMessage.Record] {
        addresses.map {
            .init(name: instance.host, data: $0.contains(":") ? .aaaa($0) : .a($0), ttl: Self.hostTTL, cacheFlush: true)
        }
    }

    /// The records this instance owns alone (RFC 6762 §2 "unique"): a probe proposes them and
    /// another's different data for their names is a conflict.
    var unique: [DNSMessage.Record] { [srv, txt] + addressRecords }

    /// Everything, as an announcement sends it.
    public var records: [DNSMessage.Record] { [ptr, srv, txt] + addressRecords + [services] }

    /// The announcement: every record, unsolicited (RFC 6762 §8.3).
    public var announcement: DNSMessage { DNSMessage(isResponse: true, records: records) }

    /// The goodbye: every record with TTL 0 (RFC 6762 §10.1); browsers drop the instance.
    public var goodbye: DNSMessage {
        DNSMessage(
            isResponse: true,
            records: records.map {
                var r = $0; r.ttl = 0; return r
            })
    }

    /// The probe (RFC 6762 §8.1): "any" questions for the instance's and host's names, with the
    /// records proposed in the authority section. Asked for multicast answers, not unicast as
    /// §8.1 suggests: port 5353 is shared (avahi, zeroconf), and a unicast answer to it reaches
    /// one of the sockets bound there, not necessarily ours; a multicast one reaches all.
    public var probe: DNSMessage {
        DNSMessage(
            isResponse: false,
            questions: [instance.fullName, instance.host].map { .init(name: $0, type: DNSMessage.RecordType.any) },
            authority: unique)
    }

    /// Whether `message` from another responder claims one of this instance's names with other
    /// data: a response with an SRV or address record of our names that we would not send (our
    /// own, looped back, is no conflict), or a probe proposing such a record for them (a
    /// simultaneous probe: RFC 6762 §8.2 would compare the two; whoever sees the other yields,
    /// both then pick new names, which is safe if not minimal). TXT is left out: our own
    /// announcement of the TXT before a change may come back after it, and another responder
    /// holding the name differs in its SRV (another host or port) anyway.
    public func conflicts(with message: DNSMessage) -> Bool {
        let ours = Set(unique.map { Self.key($0) })
        let names = Set([instance.fullName.lowercased(), instance.host.lowercased()])
        let claimed = message.isResponse ? message.records : message.authority
        return claimed.contains { record in
            names.contains(record.name.lowercased()) && record.ttl > 0 && !ours.contains(Self.key(record))
                && [DNSMessage.RecordType.srv, DNSMessage.RecordType.a, DNSMessage.RecordType.aaaa]
                    .contains(record.type)
        }
    }

    /// A record's name (case-insensitive) and data: what makes two records the same.
    static func key(_ record: DNSMessage.Record) -> String {
        "\(record.name.lowercased()) \(record.data)"
    }

    /// The answer to a query: the records its questions ask for, less those the asker already
    /// knows with at least half their TTL left (known-answer suppression, RFC 6762 §7.1), with
    /// what resolves them as additional records (§12: SRV, TXT and addresses for a PTR).
    /// Nil when nothing is asked of this instance.
    public func answer(to query: DNSMessage) -> DNSMessage? {
        guard !query.isResponse else { return nil }
        var answers: [DNSMessage.Record] = []
        for question in query.questions {
            let name = question.name.lowercased()
            let matching =
                records.filter { $0.name.lowercased() == name }
                .filter { question.type == DNSMessage.RecordType.any || $0.type == question.type }
            answers += matching
        }
        let known = Set(
            query.records.filter { !query.authority.contains($0) }.compactMap { record -> String? in
                let ours = records.first { Self.key($0) == Self.key(record) }
                guard let ours, record.ttl >= ours.ttl / 2 else { return nil }
                return Self.key(record)
            })
        answers = unique(answers).filter { !known.contains(Self.key($0)) }
        guard !answers.isEmpty else { return nil }
        var additional: [DNSMessage.Record] = []
        if answers.contains(where: { $0.type == DNSMessage.RecordType.ptr && $0.name == instance.type }) {
            additional += [srv, txt]
        }
        if answers.contains(where: { $0.type == DNSMessage.RecordType.srv }) || additional.contains(srv) {
            additional += addressRecords
        }
        let inAnswers = Set(answers.map { Self.key($0) })
        return DNSMessage(
            isResponse: true, records: answers + unique(additional).filter { !inAnswers.contains(Self.key($0)) })
    }

    private func unique(_ records: [DNSMessage.Record]) -> [DNSMessage.Record] {
        var seen: Set<String> = []
        return records.filter { seen.insert(Self.key($0)).inserted }
    }

    /// The name after a conflict (RFC 6763 §9 style, as Apple's responders do): "Name" becomes
    /// "Name (2)", "Name (2)" becomes "Name (3)"; the host's name gets the same number.
    public static func renamed(_ instance: MDNSServiceInstance, base: MDNSServiceInstance) -> MDNSServiceInstance {
        var next = instance
        let n = number(in: instance.name, base: base.name) + 1
        next.name = "\(base.name) (\(n))"
        let hostLabel = base.host.hasSuffix(".local") ? String(base.host.dropLast(".local".count)) : base.host
        next.host = "\(hostLabel)-\(n).local"
        return next
    }

    /// 1 for the base name, n for "Base (n)".
    static func number(in name: String, base: String) -> Int {
        guard name.hasPrefix(base + " ("), name.hasSuffix(")") else { return 1 }
        return Int(name.dropFirst(base.count + 2).dropLast()) ?? 1
    }
}
