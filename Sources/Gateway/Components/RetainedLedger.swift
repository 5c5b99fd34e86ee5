/// What the gateway holds retained on the broker, so that it publishes only what changed and
/// clears what it no longer has.
///
/// Characteristics' `state` and `meta` are not in it: they follow from the published tree and
/// the values (a large home has hundreds of thousands of them). For the rest (`$info`,
/// `$availability`, the tree document, discovery configs) it keeps a digest per topic, not the
/// payload, which a republication makes again from the tree.
struct RetainedLedger {
    private var digests: [String: PayloadDigest] = [:]

    var count: Int { digests.count }
    var topics: Dictionary<String, PayloadDigest>.Keys { digests.keys }

    func contains(_ topic: String) -> Bool { digests[topic] != nil }

    /// Records `payload` for `topic`, or forgets the topic for an empty payload (a clear);
    /// false when that is what the broker holds already, so there is nothing to publish.
    mutating func record(_ topic: String, _ payload: [UInt8]) -> Bool {
        if payload.isEmpty { return digests.removeValue(forKey: topic) != nil }
        let digest = PayloadDigest(payload)
        guard digests[topic] != digest else { return false }
        digests[topic] = digest
        return true
    }
}

/// A payload's length and 64-bit FNV-1a hash: enough to tell a changed payload from the one on
/// the broker.
struct PayloadDigest: Hashable, Sendable {
    var count: Int
    var hash: UInt64

    init(_ bytes: [UInt8]) {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01B3
        }
        self.count = bytes.count
        self.hash = hash
    }
}
