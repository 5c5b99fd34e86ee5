import Foundation

// The browser's memory of one service type's records (`_hap._tcp.local`, say): what arrived,
// when it expires, which records a query should list as known answers, which need
// refreshing, and which are still missing to resolve an instance. Pure state with the time
// passed in, so its rules are tested without a network.

struct MDNSCache {
    /// The service type browsed, lower-cased: `_hap._tcp.local`.
    let service: String
    let serviceSuffix: String
    /// A flood of records (hostile or a busy network) must not grow the cache without bound.
    static let maximumEntries = 4096
    /// RFC 6762 §5.2: refresh queries at 80%, 85%, 90% and 95% of a record's lifetime.
    static let refreshFractions: [Double] = [0.80, 0.85, 0.90, 0.95]

    struct Key: Hashable {
        var name: String
        var type: UInt16
        var data: DNSMessage.RecordData
    }

    struct Entry {
        var record: DNSMessage.Record
        /// When it arrived (seconds on the caller's clock) with its `record.ttl`.
        var received: Double
        /// How many of the refresh queries (`refreshFractions`) were sent for it.
        var refreshesSent = 0

        func remaining(at now: Double) -> Double { Double(record.ttl) - (now - received) }
    }

    private(set) var entries: [Key: Entry] = [:]

    init(service: String) {
        self.service = service.lowercased()
        serviceSuffix = "." + self.service
    }

    static func key(_ r: DNSMessage.Record) -> Key { Key(name: r.name.lowercased(), type: r.type, data: r.data) }

    /// Whether a record concerns HAP accessories: the service's PTR, an instance's SRV or
    /// TXT, or the address of a host an instance's SRV names. Everything else on the network
    /// (AirPlay, printers, …) is not kept.
    private func isRelevant(_ r: DNSMessage.Record, targets: Set<String>) -> Bool {
        let name = r.name.lowercased()
        switch r.data {
        case .ptr: return name == service
        case .srv, .txt: return name.hasSuffix(serviceSuffix)
        case .a, .aaaa: return targets.contains(name)
        case .other: return false
        }
    }

    /// The hosts named by the SRV records known (and about to be known).
    private func srvTargets(also records: [DNSMessage.Record]) -> Set<String> {
        var targets = Set<String>()
        for r in records where r.name.lowercased().hasSuffix(serviceSuffix) {
            if case .srv(let target, _) = r.data { targets.insert(target.lowercased()) }
        }
        for e in entries.values {
            if case .srv(let target, _) = e.record.data { targets.insert(target.lowercased()) }
        }
        return targets
    }

    /// Takes the records of one response. A goodbye (TTL 0) removes its record; a record with
    /// the cache-flush bit replaces those of its name and type that arrived more than a second
    /// earlier (RFC 6762 §10.2: a moved accessory's old port or address goes at once).
    /// Returns whether anything changed.
    @discardableResult
    mutating func insert(_ records: [DNSMessage.Record], now: Double) -> Bool {
        let targets = srvTargets(also: records)
        let relevant = records.filter { isRelevant($0, targets: targets) }
        var changed = false
        var flushed = Set<String>()
        for r in relevant where r.cacheFlush && r.ttl > 0 {
            let id = "\(r.name.lowercased())/\(r.type)"
            guard flushed.insert(id).inserted else { continue }
            for (k, e) in entries where k.name == r.name.lowercased() && k.type == r.type && now - e.received > 1 {
                entries[k] = nil
                changed = true
            }
        }
        for r in relevant {
            let k = Self.key(r)
            if r.ttl == 0 {
                if entries.removeValue(forKey: k) != nil { changed = true }
                continue
            }
            if entries[k] == nil {
                guard entries.count < Self.maximumEntries else { continue }
                changed = true
            }
            entries[k] = Entry(record: r, received: now)
        }
        return changed
    }

    /// Drops the records whose TTL ran out; returns whether any did.
    mutating func expire(now: Double) -> Bool {
        let before = entries.count
        entries = entries.filter { $0.value.remaining(at: now) > 0 }
        return entries.count != before
    }

    /// Forgets an instance's records (not its PTR): a lookup wants them answered afresh.
    mutating func forget(instance: String) {
        let name = instance.lowercased()
        entries = entries.filter { $0.key.name != name }
    }

    /// Records for a query's answer section (RFC 6762 §7.1): those answering `question` with
    /// more than half their TTL left, with the TTL they have left.
    func knownAnswers(for question: DNSMessage.Question, now: Double) -> [DNSMessage.Record] {
        let name = question.name.lowercased()
        return entries.values.filter {
            $0.record.name.lowercased() == name && $0.record.type == question.type
                && $0.remaining(at: now) > Double($0.record.ttl) / 2
        }
        .sorted { $0.received < $1.received }
        .map {
            var r = $0.record
            r.ttl = UInt32(max(1, $0.remaining(at: now)))
            return r
        }
    }

    /// The questions refreshing records that reached 80%, 85%, 90% or 95% of their lifetime
    /// (one query at each step), marking them sent.
    mutating func dueRefreshes(now: Double) -> [DNSMessage.Question] {
        var questions = Set<DNSMessage.Question>()
        for (k, e) in entries where e.refreshesSent < Self.refreshFractions.count {
            let age = now - e.received
            let due = Self.refreshFractions[e.refreshesSent] * Double(e.record.ttl)
            guard age >= due else { continue }
            var updated = e
            // Past several steps at once (a long sleep): count them all, ask once.
            while updated.refreshesSent < Self.refreshFractions.count,
                age >= Self.refreshFractions[updated.refreshesSent] * Double(e.record.ttl)
            {
                updated.refreshesSent += 1
            }
            entries[k] = updated
            questions.insert(DNSMessage.Question(name: e.record.name, type: e.record.type))
        }
        return questions.sorted { ($0.name, $0.type) < ($1.name, $1.type) }
    }

    /// What is still needed to resolve the instances known: their SRV and TXT, and the
    /// address of each SRV target.
    func missing() -> [DNSMessage.Question] {
        let records = entries.values.map(\.record)
        var have = Set<String>()
        for r in records { have.insert("\(r.name.lowercased())/\(r.type)") }
        var out: [DNSMessage.Question] = []
        for r in records {
            switch r.data {
            case .ptr(let instance):
                for type in [DNSMessage.RecordType.srv, DNSMessage.RecordType.txt]
                where !have.contains("\(instance.lowercased())/\(type)") {
                    out.append(DNSMessage.Question(name: instance, type: type))
                }
            case .srv(let target, _):
                if !have.contains("\(target.lowercased())/\(DNSMessage.RecordType.a)")
                    && !have.contains("\(target.lowercased())/\(DNSMessage.RecordType.aaaa)")
                {
                    out.append(DNSMessage.Question(name: target, type: DNSMessage.RecordType.a))
                }
            default: break
            }
        }
        return Array(Set(out)).sorted { ($0.name, $0.type) < ($1.name, $1.type) }
    }

    /// Every record held, oldest first: what a resolver joins into instances.
    func records() -> [DNSMessage.Record] {
        entries.values.sorted { $0.received < $1.received }.map(\.record)
    }

    /// The instances the records describe completely (PTR, SRV and an address).
    func instances() -> [MDNSInstance] {
        MDNSInstance.resolve(service: service, records()).filter { !$0.addresses.isEmpty }
    }
}
