import Foundation
import TestSupport
import XCTest

@testable import MDNS

/// The mDNS parser reads packets anyone on the network can send: thousands of random and
/// mutated packets (truncated, compression loops, oversize labels, wrong counts) must each be
/// read or refused, never crash and never hang. Seeded, so a failure reproduces. The parser's
/// work per packet is bounded by its structure (9,000 bytes, 255-byte names, 32 pointer jumps per
/// name, pointers only backwards; `testHostileShapesAreRefused` checks the shapes); the fuzz run asserts no time per packet (it once failed at 86 ms against 50 ms at load 12: a
/// descheduled thread, not a slow parse) and only prints the slowest.
final class MDNSFuzzTests: XCTestCase {
    typealias Seeded = SeededGenerator

    /// A well-formed announcement like an accessory's, with compressed names.
    static func announcement(_ rng: inout Seeded) -> [UInt8] {
        let name = "Acc\(rng.next() % 1000)._hap._tcp.local"
        let host = "host-\(rng.next() % 100).local"
        let message = DNSMessage(
            isResponse: true,
            records: [
                DNSMessage.Record(name: "_hap._tcp.local", data: .ptr(name), ttl: 4500),
                DNSMessage.Record(
                    name: name, data: .srv(target: host, port: Int(rng.next() % 65536)), ttl: 120, cacheFlush: true),
                DNSMessage.Record(
                    name: name, data: .txt(["id": "AA:BB:CC:DD:EE:\(rng.next() % 90 + 10)", "c#": "2", "sf": "0"]),
                    ttl: 4500, cacheFlush: true),
                DNSMessage.Record(name: host, data: .a("10.0.0.\(rng.next() % 255)"), ttl: 120, cacheFlush: true),
                DNSMessage.Record(name: host, data: .aaaa("fe80::1"), ttl: 120, cacheFlush: true),
            ])
        return message.encoded()
    }

    /// One of several ways to break a packet.
    static func mutate(_ packet: [UInt8], _ rng: inout Seeded) -> [UInt8] {
        var p = packet
        func pos() -> Int { p.isEmpty ? 0 : Int(rng.next() % UInt64(p.count)) }
        switch rng.next() % 10 {
        case 0: // truncated anywhere
            p = Array(p.prefix(pos()))
        case 1: // random bytes flipped
            for _ in 0..<(1 + rng.next() % 8) where !p.isEmpty { p[pos()] = UInt8.random(in: 0...255, using: &rng) }
        case 2: // a pointer to itself or forwards: a compression loop
            if p.count > 14 {
                let at = max(12, pos())
                let target = rng.next() % 2 == 0 ? at : min(p.count - 1, at + Int(rng.next() % 40))
                p[at] = 0xC0 | UInt8((target >> 8) & 0x3F)
                if at + 1 < p.count { p[at + 1] = UInt8(target & 0xFF) }
            }
        case 3: // two pointers pointing at each other
            if p.count > 20 {
                p[12] = 0xC0
                p[13] = 14
                p[14] = 0xC0
                p[15] = 12
            }
        case 4: // oversize and reserved label lengths
            if !p.isEmpty { p[max(0, min(p.count - 1, 12 + Int(rng.next() % 30)))] = UInt8(64 + rng.next() % 192) }
        case 5: // counts that promise far more than the packet holds
            if p.count >= 12 {
                for i in 4..<12 { p[i] = UInt8.random(in: 0...255, using: &rng) }
            }
        case 6: // record data lengths that run past the end
            for _ in 0..<4 where p.count > 2 {
                let i = pos()
                p[i] = 0xFF
                if i + 1 < p.count { p[i + 1] = 0xFF }
            }
        case 7: // bytes inserted
            for _ in 0..<(1 + rng.next() % 16) { p.insert(UInt8.random(in: 0...255, using: &rng), at: pos()) }
        case 8: // a long chain of backward pointers, each two bytes before the next
            p = Array(p.prefix(12))
            p += [0]
            for i in 0..<400 { p += [0xC0 | UInt8(((12 + 2 * i) >> 8) & 0x3F), UInt8((12 + 2 * i) & 0xFF)] }
            p[7] = 200
        default: // pure noise
            p = (0..<Int(rng.next() % 600)).map { _ in UInt8.random(in: 0...255, using: &rng) }
        }
        return p
    }

    func testRandomAndMutatedPacketsNeverCrashOrHang() {
        var rng = Seeded(state: 0x1505_2024)
        var parsed = 0
        var refused = 0
        var slowest: Double = 0
        var cache = MDNSCache(service: "_hap._tcp.local")
        for i in 0..<20_000 {
            var packet = Self.announcement(&rng)
            for _ in 0..<(1 + rng.next() % 3) { packet = Self.mutate(packet, &rng) }
            let start = DispatchTime.now().uptimeNanoseconds
            let result = try? DNSMessage.parse(packet)
            let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
            slowest = max(slowest, seconds)
            if let result {
                parsed += 1
                // A cache as one browser would have it for a while (not 20,000 packets' worth).
                if parsed % 200 == 0 { cache = MDNSCache(service: "_hap._tcp.local") }
                // What parses goes into the browser's cache: that must hold up too.
                cache.insert(result.records, now: Double(i) / 100)
                _ = cache.instances()
                _ = cache.missing()
                _ = cache.dueRefreshes(now: Double(i) / 100)
            } else {
                refused += 1
            }
        }
        XCTAssertLessThanOrEqual(cache.entries.count, MDNSCache.maximumEntries)
        // Both paths were exercised: the mutations do not only produce garbage.
        XCTAssertGreaterThan(parsed, 1000)
        XCTAssertGreaterThan(refused, 1000)
        print("mDNS fuzz: \(parsed) parsed, \(refused) refused, slowest \(String(format: "%.1f", slowest * 1e6)) µs")
    }

    func testHostileShapesAreRefused() {
        let header: [UInt8] = [0, 0, 0x84, 0, 0, 0, 0, 1, 0, 0, 0, 0]
        // A name pointing at itself, and two names pointing at each other.
        XCTAssertThrowsError(try DNSMessage.parse(header + [0xC0, 12]))
        XCTAssertThrowsError(try DNSMessage.parse(header + [0xC0, 14, 0xC0, 12]))
        // A label longer than 63 bytes, and the reserved label types.
        XCTAssertThrowsError(try DNSMessage.parse(header + [64] + Array(repeating: 65, count: 64) + [0]))
        XCTAssertThrowsError(try DNSMessage.parse(header + [0x80, 0]))
        // A name longer than 255 bytes on the wire.
        let label: [UInt8] = [63] + Array(repeating: 66, count: 63)
        let long: [UInt8] = Array(repeating: label, count: 5).flatMap { $0 } + [0]
        XCTAssertThrowsError(try DNSMessage.parse(header + long + [0, 1, 0, 1, 0, 0, 0, 1, 0, 4, 1, 2, 3, 4]))
        // 65535 records promised, none there.
        XCTAssertThrowsError(try DNSMessage.parse([0, 0, 0x84, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]))
        // Larger than any mDNS packet.
        XCTAssertThrowsError(try DNSMessage.parse(header + Array(repeating: 0, count: 9000)))
    }

    func testEncodedMessagesReadBack() throws {
        var rng = Seeded(state: 7)
        for _ in 0..<100 {
            let bytes = Self.announcement(&rng)
            let message = try DNSMessage.parse(bytes)
            XCTAssertEqual(message.records.count, 5)
            XCTAssertEqual(message.encoded(), bytes)
        }
    }
}
