import Foundation

// Just enough DNS for mDNS service discovery (RFC 1035, RFC 6762): names with compression,
// questions, and PTR, SRV, TXT, A and AAAA records, read from packets that anyone on the
// network may send. Every read is bounds-checked and every loop is bounded by the packet's
// size, so a malformed or hostile packet is an error, never a crash or a hang.

/// One DNS message: its questions and its records (answers, authority and additional together).
public struct DNSMessage: Sendable, Hashable {
    public enum RecordData: Sendable, Hashable {
        case ptr(String)
        case srv(target: String, port: Int)
        case txt([String: String])
        case a(String)
        case aaaa(String)
        case other(UInt16)
    }

    public struct Record: Sendable, Hashable {
        public var name: String
        public var data: RecordData
        /// Seconds the record may be kept; 0 is a goodbye (RFC 6762 §10.1).
        public var ttl: UInt32
        /// The mDNS cache-flush bit: this record replaces older ones of its name and type.
        public var cacheFlush: Bool

        public init(name: String, data: RecordData, ttl: UInt32 = 120, cacheFlush: Bool = false) {
            self.name = name
            self.data = data
            self.ttl = ttl
            self.cacheFlush = cacheFlush
        }

        public var type: UInt16 {
            switch data {
            case .ptr: DNSMessage.RecordType.ptr
            case .srv: DNSMessage.RecordType.srv
            case .txt: DNSMessage.RecordType.txt
            case .a: DNSMessage.RecordType.a
            case .aaaa: DNSMessage.RecordType.aaaa
            case .other(let t): t
            }
        }
    }

    public struct Question: Sendable, Hashable {
        public var name: String
        public var type: UInt16
        /// The QU bit (RFC 6762 §5.4): the asker wants a unicast answer (a prober does).
        public var unicastResponse: Bool
        public init(name: String, type: UInt16, unicastResponse: Bool = false) {
            self.name = name
            self.type = type
            self.unicastResponse = unicastResponse
        }
    }

    public enum RecordType {
        public static let a: UInt16 = 1
        public static let ptr: UInt16 = 12
        public static let txt: UInt16 = 16
        public static let aaaa: UInt16 = 28
        public static let srv: UInt16 = 33
        /// A question for every type of a name (a probe asks it).
        public static let any: UInt16 = 255
    }

    /// A response (QR bit set) rather than a query.
    public var isResponse: Bool
    public var questions: [Question]
    public var records: [Record]
    /// The authority section: a prober's proposed records (RFC 6762 §8.2). Parsed, they are in
    /// `records` too, so that a reader of answers sees every record as before.
    public var authority: [Record] = []
    /// Zero in mDNS, except a legacy unicast query's (RFC 6762 §6.7), which its answer repeats.
    public var id: UInt16 = 0

    public init(isResponse: Bool, questions: [Question] = [], records: [Record] = [], authority: [Record] = []) {
        self.isResponse = isResponse
        self.questions = questions
        self.records = records
        self.authority = authority
    }

    /// The largest mDNS packet (RFC 6762 §17); anything bigger is not read at all.
    static let maximumPacketSize = 9000
    /// RFC 1035 §2.3.4: a label is at most 63 bytes, a name at most 255 on the wire.
    static let maximumLabelLength = 63
    static let maximumNameLength = 255
    /// Compression pointers followed for one name. Pointers must also go backwards, so a loop
    /// is impossible; the limit bounds the work of a long backward chain.
    static let maximumPointerJumps = 32

    static func bad(_ m: String) -> MDNSError { MDNSError(code: .malformed, message: "malformed mDNS packet: \(m)") }

    // MARK: reading

    /// Reads a (possibly compressed) name at `start`; returns it and the offset after it.
    static func readName(_ p: [UInt8], _ start: Int) throws(MDNSError) -> (String, Int) {
        var labels: [String] = []
        var pos = start
        var end: Int?
        var jumps = 0
        var wireLength = 1
        // Pointers must land before the lowest offset read so far: each jump strictly moves
        // backwards, which rules out loops whatever the jump limit.
        var lowest = start
        while true {
            guard pos >= 0, pos < p.count else { throw bad("name runs past the end") }
            let len = Int(p[pos])
            if len == 0 {
                pos += 1
                break
            }
            switch len & 0xC0 {
            case 0xC0:
                guard pos + 1 < p.count else { throw bad("truncated pointer") }
                if end == nil { end = pos + 2 }
                let target = (len & 0x3F) << 8 | Int(p[pos + 1])
                guard target < lowest else { throw bad("name pointer does not point backwards") }
                jumps += 1
                guard jumps <= maximumPointerJumps else { throw bad("too many name pointers") }
                pos = target
                lowest = target
            case 0x00:
                guard len <= maximumLabelLength else { throw bad("label of \(len) bytes") }
                guard pos + 1 + len <= p.count else { throw bad("label runs past the end") }
                wireLength += 1 + len
                guard wireLength <= maximumNameLength else { throw bad("name longer than 255 bytes") }
                labels.append(String(decoding: p[(pos + 1)..<(pos + 1 + len)], as: UTF8.self))
                pos += 1 + len
            default:
                // 0x40 and 0x80: extended label types (RFC 6891), not used by mDNS.
                throw bad("unknown label type \(len >> 6)")
            }
        }
        return (labels.joined(separator: "."), end ?? pos)
    }

    public static func parse(_ p: [UInt8]) throws(MDNSError) -> DNSMessage {
        guard p.count >= 12 else { throw bad("shorter than a header") }
        guard p.count <= maximumPacketSize else { throw bad("larger than \(maximumPacketSize) bytes") }
        func u16(_ i: Int) throws(MDNSError) -> Int {
            guard i >= 0, i + 1 < p.count else { throw bad("truncated") }
            return Int(p[i]) << 8 | Int(p[i + 1])
        }
        func u32(_ i: Int) throws(MDNSError) -> UInt32 {
            UInt32(try u16(i)) << 16 | UInt32(try u16(i + 2))
        }
        var message = DNSMessage(isResponse: p[2] & 0x80 != 0)
        message.id = UInt16(try u16(0))
        let questionCount = try u16(4)
        let answerCount = try u16(6)
        let authorityCount = try u16(8)
        let recordCount = try answerCount + authorityCount + u16(10)
        var pos = 12
        // Each question and record moves `pos` forward by at least 5 bytes or throws, so the
        // counts (up to 65535 each, whatever the packet says) cannot make this loop long.
        for _ in 0..<questionCount {
            let (name, after) = try readName(p, pos)
            let qclass = try u16(after + 2)
            message.questions.append(
                Question(name: name, type: UInt16(try u16(after)), unicastResponse: qclass & 0x8000 != 0))
            pos = after + 4
        }
        for index in 0..<recordCount {
            let (name, afterName) = try readName(p, pos)
            let type = UInt16(try u16(afterName))
            let rrClass = try u16(afterName + 2)
            let ttl = try u32(afterName + 4)
            let rdlen = try u16(afterName + 8)
            let rd = afterName + 10
            guard rd + rdlen <= p.count else { throw bad("record data runs past the end") }
            let data = try recordData(p, type: type, at: rd, length: rdlen)
            let record = Record(name: name, data: data, ttl: ttl, cacheFlush: rrClass & 0x8000 != 0)
            message.records.append(record)
            if index >= answerCount, index < answerCount + authorityCount { message.authority.append(record) }
            pos = rd + rdlen
        }
        return message
    }

    private static func recordData(_ p: [UInt8], type: UInt16, at rd: Int, length rdlen: Int) throws(MDNSError)
        -> RecordData
    {
        switch type {
        case RecordType.ptr:
            return .ptr(try readName(p, rd).0)
        case RecordType.srv:
            guard rdlen >= 7 else { throw bad("short SRV") }
            return .srv(target: try readName(p, rd + 6).0, port: Int(p[rd + 4]) << 8 | Int(p[rd + 5]))
        case RecordType.txt:
            var kv: [String: String] = [:]
            var i = rd
            while i < rd + rdlen {
                let l = Int(p[i])
                guard i + 1 + l <= rd + rdlen else { throw bad("TXT string runs past its record") }
                let s = String(decoding: p[(i + 1)..<(i + 1 + l)], as: UTF8.self)
                // Keys are case-insensitive (RFC 6763 §6.4); the first of a repeated key wins.
                if let eq = s.firstIndex(of: "=") {
                    let key = s[..<eq].lowercased()
                    if kv[key] == nil { kv[key] = String(s[s.index(after: eq)...]) }
                } else if !s.isEmpty, kv[s.lowercased()] == nil {
                    kv[s.lowercased()] = ""
                }
                i += 1 + l
            }
            return .txt(kv)
        case RecordType.a:
            guard rdlen == 4 else { throw bad("A record of \(rdlen) bytes") }
            return .a(p[rd..<rd + 4].map(String.init).joined(separator: "."))
        case RecordType.aaaa:
            guard rdlen == 16 else { throw bad("AAAA record of \(rdlen) bytes") }
            var address = in6_addr()
            withUnsafeMutableBytes(of: &address) { $0.copyBytes(from: p[rd..<rd + 16]) }
            var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
            guard inet_ntop(AF_INET6, &address, &text, socklen_t(text.count)) != nil else {
                throw bad("unreadable AAAA record")
            }
            return .aaaa(String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        default:
            return .other(type)
        }
    }

    // MARK: writing

    public static func encodeName(_ name: String) -> [UInt8] {
        var out: [UInt8] = []
        for label in name.split(separator: ".") {
            let bytes = Array(label.utf8.prefix(maximumLabelLength))
            out.append(UInt8(bytes.count))
            out += bytes
        }
        return out + [0]
    }

    public static func query(name: String, type: UInt16) -> [UInt8] {
        DNSMessage(isResponse: false, questions: [Question(name: name, type: type)]).encoded()
    }

    /// The message on the wire, names uncompressed. Records whose data cannot be written
    /// (`other`) are left out, as are records past `limit` bytes (a known-answer list may be
    /// long; RFC 6762 §7.2 allows sending it in parts, and the rest is answered again anyway).
    /// `authority` follows `records` (a probe has no answers, its proposals only).
    public func encoded(limit: Int = 1400) -> [UInt8] {
        var body: [UInt8] = []
        for q in questions {
            body +=
                Self.encodeName(q.name) + [UInt8(q.type >> 8), UInt8(q.type & 0xFF), q.unicastResponse ? 0x80 : 0, 1]
        }
        var written = 0
        var writtenAuthority = 0
        for (n, r) in (records + authority).enumerated() {
            guard let rdata = Self.encodeData(r.data) else { continue }
            let classField: UInt16 = r.cacheFlush ? 0x8001 : 1
            let bytes =
                Self.encodeName(r.name) + [UInt8(r.type >> 8), UInt8(r.type & 0xFF)]
                + [UInt8(classField >> 8), UInt8(classField & 0xFF)]
                + [UInt8(r.ttl >> 24), UInt8(r.ttl >> 16 & 0xFF), UInt8(r.ttl >> 8 & 0xFF), UInt8(r.ttl & 0xFF)]
                + [UInt8(rdata.count >> 8), UInt8(rdata.count & 0xFF)] + rdata
            guard 12 + body.count + bytes.count <= limit else { break }
            body += bytes
            if n < records.count { written += 1 } else { writtenAuthority += 1 }
        }
        let flags: UInt8 = isResponse ? 0x84 : 0
        let qd = min(questions.count, 0xFFFF)
        let ns = writtenAuthority
        return [
            UInt8(id >> 8), UInt8(id & 0xFF), flags, 0, UInt8(qd >> 8), UInt8(qd & 0xFF),
            UInt8(written >> 8), UInt8(written & 0xFF), UInt8(ns >> 8), UInt8(ns & 0xFF), 0, 0,
        ]
            + body
    }

    private static func encodeData(_ data: RecordData) -> [UInt8]? {
        switch data {
        case .ptr(let target): return encodeName(target)
        case .srv(let target, let port):
            return [0, 0, 0, 0, UInt8(port >> 8 & 0xFF), UInt8(port & 0xFF)] + encodeName(target)
        case .txt(let kv):
            let strings = kv.sorted { $0.key < $1.key }.map { Array("\($0.key)=\($0.value)".utf8.prefix(255)) }
            return strings.isEmpty ? [0] : strings.flatMap { [UInt8($0.count)] + $0 }
        case .a(let ip):
            let parts = ip.split(separator: ".").compactMap { UInt8($0) }
            return parts.count == 4 ? parts : nil
        case .aaaa(let ip):
            var address = in6_addr()
            guard inet_pton(AF_INET6, ip, &address) == 1 else { return nil }
            return withUnsafeBytes(of: &address) { Array($0) }
        case .other: return nil
        }
    }
}
