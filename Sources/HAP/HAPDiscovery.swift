import Foundation
import NIOCore
import NIOPosix

// Finding HAP accessories on the local network: one-shot mDNS queries for _hap._tcp and the DNS
// parsing they need.

/// An accessory found by mDNS (`_hap._tcp`).
public struct HAPDiscoveredAccessory: Sendable, Hashable {
    /// The accessory's pairing id (TXT `id`).
    public var id: String
    /// The service instance name (usually the accessory's name).
    public var name: String
    public var model: String
    /// HAP category (TXT `ci`), 1 when absent.
    public var category: Int
    /// TXT `sf` = 0: paired with a controller already.
    public var isPaired: Bool
    /// TXT `c#`: grows when the accessory's `/accessories` changes.
    public var configurationNumber: Int
    /// TXT `ff`: pairing feature flags (bit 0 selects pair-setup method 1).
    public var featureFlags: Int
    public var host: String
    public var port: Int
}

/// Browses `_hap._tcp.local` with one-shot mDNS queries (answers come back by unicast).
public enum HAPDiscovery {
    static let service = "_hap._tcp.local"

    public static func browse(timeout: Double = 3) async throws(HAPError) -> [HAPDiscoveredAccessory] {
        let (inbound, continuation) = AsyncStream.makeStream(of: [UInt8].self)
        let channel: any Channel
        do {
            channel = try await DatagramBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .channelInitializer { ch in
                    ch.eventLoop.makeCompletedFuture {
                        try ch.pipeline.syncOperations.addHandler(DatagramCollector(continuation))
                    }
                }
                .bind(host: "0.0.0.0", port: 0).get()
        } catch {
            throw HAPError(code: .io, message: "cannot open a UDP socket for mDNS: \(error)")
        }
        defer { channel.close(promise: nil) }
        let query = DNSMessage.query(name: service, type: 12)
        do {
            let target = try SocketAddress(ipAddress: "224.0.0.251", port: 5353)
            var buffer = channel.allocator.buffer(capacity: query.count)
            buffer.writeBytes(query)
            try await channel.writeAndFlush(AddressedEnvelope(remoteAddress: target, data: buffer)).get()
        } catch {
            throw HAPError(code: .unreachable, message: "cannot send the mDNS query (no multicast route?): \(error)")
        }
        var records: [DNSMessage.Record] = []
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                try? await Task.sleep(nanoseconds: UInt64(max(0.1, timeout) * 1_000_000_000))
                continuation.finish()
            }
            for await packet in inbound {
                if let msg = try? DNSMessage.parse(packet) { records += msg.records }
            }
            group.cancelAll()
        }
        return accessories(from: records)
    }

    /// Joins PTR, SRV, TXT and A records into accessories.
    public static func accessories(from records: [DNSMessage.Record]) -> [HAPDiscoveredAccessory] {
        let instances = Set(
            records.compactMap { r -> String? in
                if case .ptr(let target) = r.data, r.name.lowercased() == service { return target }
                return nil
            })
        var out: [HAPDiscoveredAccessory] = []
        for instance in instances.sorted() {
            var txt: [String: String] = [:]
            var srv: (String, Int)?
            for r in records where r.name.lowercased() == instance.lowercased() {
                switch r.data {
                case .txt(let kv): txt.merge(kv) { _, new in new }
                case .srv(let target, let port): srv = (target, port)
                default: break
                }
            }
            guard let id = txt["id"], let (target, port) = srv else { continue }
            let address =
                records.compactMap { r -> String? in
                    if case .a(let ip) = r.data, r.name.lowercased() == target.lowercased() { return ip }
                    return nil
                }.first ?? target
            let name = instance.hasSuffix("." + service) ? String(instance.dropLast(service.count + 1)) : instance
            out.append(
                HAPDiscoveredAccessory(
                    id: id, name: name, model: txt["md"] ?? "", category: Int(txt["ci"] ?? "") ?? 1,
                    isPaired: txt["sf"] == "0", configurationNumber: Int(txt["c#"] ?? "") ?? 1,
                    featureFlags: Int(txt["ff"] ?? "") ?? 0, host: address, port: port))
        }
        return out
    }
}

private final class DatagramCollector: ChannelInboundHandler, Sendable {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    let continuation: AsyncStream<[UInt8]>.Continuation
    init(_ c: AsyncStream<[UInt8]>.Continuation) { continuation = c }
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var envelope = unwrapInboundIn(data)
        if let bytes = envelope.data.readBytes(length: envelope.data.readableBytes) { continuation.yield(bytes) }
    }
}

/// Just enough DNS to read mDNS answers: names with compression, PTR, SRV, TXT and A.
public struct DNSMessage: Sendable {
    public enum RecordData: Sendable, Hashable {
        case ptr(String)
        case srv(target: String, port: Int)
        case txt([String: String])
        case a(String)
        case other(UInt16)
    }

    public struct Record: Sendable, Hashable {
        public var name: String
        public var data: RecordData
        public init(name: String, data: RecordData) { self.name = name; self.data = data }
    }

    public var records: [Record]

    static func encodeName(_ name: String) -> [UInt8] {
        var out: [UInt8] = []
        for label in name.split(separator: ".") {
            let bytes = Array(label.utf8.prefix(63))
            out.append(UInt8(bytes.count))
            out += bytes
        }
        return out + [0]
    }

    public static func query(name: String, type: UInt16) -> [UInt8] {
        [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0] + encodeName(name) + [UInt8(type >> 8), UInt8(type & 0xFF), 0, 1]
    }

    static func bad(_ m: String) -> HAPError { HAPError(code: .protocolError, message: "malformed mDNS packet: \(m)") }

    static func readName(_ p: [UInt8], _ start: Int) throws(HAPError) -> (String, Int) {
        var labels: [String] = []
        var pos = start
        var end: Int?
        var jumps = 0
        while true {
            guard pos < p.count else { throw bad("name runs past the end") }
            let len = Int(p[pos])
            if len == 0 { pos += 1; break }
            if len & 0xC0 == 0xC0 {
                guard pos + 1 < p.count else { throw bad("truncated pointer") }
                if end == nil { end = pos + 2 }
                pos = (len & 0x3F) << 8 | Int(p[pos + 1])
                jumps += 1
                guard jumps < 32 else { throw bad("name pointer loop") }
                continue
            }
            guard pos + 1 + len <= p.count else { throw bad("label runs past the end") }
            labels.append(String(decoding: p[(pos + 1)..<(pos + 1 + len)], as: UTF8.self))
            pos += 1 + len
        }
        return (labels.joined(separator: "."), end ?? pos)
    }

    public static func parse(_ p: [UInt8]) throws(HAPError) -> DNSMessage {
        guard p.count >= 12 else { throw bad("shorter than a header") }
        func u16(_ i: Int) throws(HAPError) -> Int {
            guard i + 1 < p.count else { throw bad("truncated") }
            return Int(p[i]) << 8 | Int(p[i + 1])
        }
        let qd = try u16(4)
        let rrCount = try u16(6) + u16(8) + u16(10)
        var pos = 12
        for _ in 0..<qd {
            pos = try readName(p, pos).1 + 4
        }
        var records: [Record] = []
        for _ in 0..<rrCount {
            let (name, afterName) = try readName(p, pos)
            let type = try u16(afterName)
            let rdlen = try u16(afterName + 8)
            let rd = afterName + 10
            guard rd + rdlen <= p.count else { throw bad("record data runs past the end") }
            let data: RecordData
            switch type {
            case 12: data = .ptr(try readName(p, rd).0)
            case 33:
                guard rdlen >= 7 else { throw bad("short SRV") }
                data = .srv(target: try readName(p, rd + 6).0, port: try u16(rd + 4))
            case 16:
                var kv: [String: String] = [:]
                var i = rd
                while i < rd + rdlen {
                    let l = Int(p[i])
                    guard i + 1 + l <= rd + rdlen else { throw bad("TXT string runs past its record") }
                    let s = String(decoding: p[(i + 1)..<(i + 1 + l)], as: UTF8.self)
                    if let eq = s.firstIndex(of: "=") {
                        kv[String(s[..<eq])] = String(s[s.index(after: eq)...])
                    } else if !s.isEmpty {
                        kv[s] = ""
                    }
                    i += 1 + l
                }
                data = .txt(kv)
            case 1:
                guard rdlen == 4 else { throw bad("A record of \(rdlen) bytes") }
                data = .a(p[rd..<rd + 4].map(String.init).joined(separator: "."))
            default:
                data = .other(UInt16(type))
            }
            records.append(Record(name: name, data: data))
            pos = rd + rdlen
        }
        return DNSMessage(records: records)
    }
}
