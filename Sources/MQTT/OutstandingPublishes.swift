/// The publishes libmosquitto has accepted and not yet written (QoS 0) or had acknowledged
/// (QoS 1/2), by message id, with the bytes of their packets kept as they come and go.
/// libmosquitto holds a copy of each packet until then, so the bytes, not only the count, are
/// what a publisher must wait on: a thousand tree pages of 256 KB would be 250 MB in its queue.
struct OutstandingPublishes: Sequence {
    private var entries: [Int32: Connection.Sent] = [:]
    /// The packet sizes of `entries`, summed.
    private(set) var bytes = 0

    var count: Int { entries.count }
    var isEmpty: Bool { entries.isEmpty }
    var values: Dictionary<Int32, Connection.Sent>.Values { entries.values }

    /// Keeps `sent` under `mid`, in place of any entry of that id. One look-up, and `sent` is
    /// moved once: a `Sent` is ~150 bytes, and an optional setter moved it through two
    /// optionals (~2 k instructions a publish, callgrind).
    mutating func insert(_ sent: Connection.Sent, mid: Int32) {
        bytes += sent.size
        if let old = entries.updateValue(sent, forKey: mid) { bytes -= old.size }
    }

    @discardableResult
    mutating func removeValue(forKey mid: Int32) -> Connection.Sent? {
        guard let sent = entries.removeValue(forKey: mid) else { return nil }
        bytes -= sent.size
        return sent
    }

    mutating func removeAll() {
        entries.removeAll()
        bytes = 0
    }

    func filter(_ isIncluded: (Dictionary<Int32, Connection.Sent>.Element) -> Bool) -> OutstandingPublishes {
        var kept = OutstandingPublishes()
        for entry in entries where isIncluded(entry) { kept.insert(entry.value, mid: entry.key) }
        return kept
    }

    /// `other`'s entries added, each replacing one of the same id.
    mutating func merge(_ other: [Int32: Connection.Sent]) {
        for (mid, sent) in other { insert(sent, mid: mid) }
    }

    func makeIterator() -> Dictionary<Int32, Connection.Sent>.Iterator { entries.makeIterator() }

    /// Room for one more: fewer than `limit` messages and `byteLimit` bytes outstanding, or none
    /// at all (a packet larger than `byteLimit` still goes, alone).
    func hasRoom(limit: Int, bytes byteLimit: Int) -> Bool {
        isEmpty || (count < limit && bytes < byteLimit)
    }
}
