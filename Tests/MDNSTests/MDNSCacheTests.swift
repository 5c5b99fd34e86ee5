import XCTest

@testable import MDNS

/// The browser's record rules (RFC 6762): TTLs, goodbyes, cache flush, known answers, refresh.
/// (HAP's reading of the same records is `HAPTests/HAPResolveTests`.)
final class MDNSCacheTests: XCTestCase {
    let instance = "Peer Bridge AB12._hap._tcp.local"

    func announcement(port: Int, address: String = "127.0.0.1", ttl: UInt32 = 120, cn: String = "2")
        -> [DNSMessage.Record]
    {
        [
            DNSMessage.Record(name: "_hap._tcp.local", data: .ptr(instance), ttl: ttl * 10),
            DNSMessage.Record(name: instance, data: .srv(target: "peer.local", port: port), ttl: ttl, cacheFlush: true),
            DNSMessage.Record(
                name: instance, data: .txt(["id": "AA:BB:CC:DD:EE:FF", "c#": cn, "sf": "0"]), ttl: ttl * 10,
                cacheFlush: true),
            DNSMessage.Record(name: "peer.local", data: .a(address), ttl: ttl, cacheFlush: true),
        ]
    }

    func testAMovedAccessoryReplacesItsOldPortAndAGoodbyeRemovesIt() throws {
        var cache = MDNSCache(service: "_hap._tcp.local")
        cache.insert(announcement(port: 40001), now: 0)
        XCTAssertEqual(cache.instances().map(\.port), [40001])
        // Announced again later on another port, with the cache-flush bit: the old SRV goes.
        cache.insert(announcement(port: 40002, cn: "3"), now: 10)
        let moved = try XCTUnwrap(cache.instances().first)
        XCTAssertEqual(cache.instances().count, 1)
        XCTAssertEqual(moved.name, instance)
        XCTAssertEqual(moved.label, "Peer Bridge AB12")
        XCTAssertEqual(moved.port, 40002)
        XCTAssertEqual(moved.addresses, ["127.0.0.1"])
        XCTAssertEqual(moved.txt, ["id": "AA:BB:CC:DD:EE:FF", "c#": "3", "sf": "0"])
        // Goodbye: TTL 0 removes the records.
        cache.insert(announcement(port: 40002, ttl: 0, cn: "3"), now: 11)
        XCTAssertTrue(cache.instances().isEmpty)
        XCTAssertTrue(cache.entries.isEmpty)
    }

    func testRecordsExpireWithTheirTTLAndOthersAreNotKept() {
        var cache = MDNSCache(service: "_hap._tcp.local")
        cache.insert(
            announcement(port: 1) + [
                DNSMessage.Record(name: "x._airplay._tcp.local", data: .srv(target: "a", port: 1))
            ],
            now: 0)
        XCTAssertEqual(cache.entries.count, 4)
        XCTAssertFalse(cache.expire(now: 119))
        XCTAssertTrue(cache.expire(now: 121))
        // SRV and A (120 s) are gone; PTR and TXT (1200 s) stay; the accessory is incomplete.
        XCTAssertEqual(cache.entries.count, 2)
        XCTAssertTrue(cache.instances().isEmpty)
        XCTAssertEqual(
            cache.missing(),
            [DNSMessage.Question(name: instance, type: DNSMessage.RecordType.srv)])
    }

    func testKnownAnswersAreThoseWithMoreThanHalfTheirTTLLeft() {
        var cache = MDNSCache(service: "_hap._tcp.local")
        cache.insert(announcement(port: 1), now: 0)
        let ptr = DNSMessage.Question(name: "_hap._tcp.local", type: DNSMessage.RecordType.ptr)
        XCTAssertEqual(cache.knownAnswers(for: ptr, now: 100).map(\.ttl), [1100])
        XCTAssertEqual(cache.knownAnswers(for: ptr, now: 599).count, 1)
        XCTAssertEqual(cache.knownAnswers(for: ptr, now: 601).count, 0)
    }

    func testRefreshQueriesAtEightyToNinetyFivePercent() {
        var cache = MDNSCache(service: "_hap._tcp.local")
        cache.insert(announcement(port: 1), now: 0)
        XCTAssertEqual(cache.dueRefreshes(now: 95), [])
        let srv = DNSMessage.Question(name: instance, type: DNSMessage.RecordType.srv)
        let a = DNSMessage.Question(name: "peer.local", type: DNSMessage.RecordType.a)
        XCTAssertEqual(Set(cache.dueRefreshes(now: 96)), [srv, a])
        XCTAssertEqual(cache.dueRefreshes(now: 97), [])
        XCTAssertEqual(Set(cache.dueRefreshes(now: 102)), [srv, a])
        XCTAssertEqual(Set(cache.dueRefreshes(now: 115)), [srv, a])
        XCTAssertEqual(cache.dueRefreshes(now: 119), [])
        // An answer restarts the record's life and its refresh schedule.
        cache.insert(announcement(port: 1), now: 119)
        XCTAssertEqual(cache.dueRefreshes(now: 120), [])
    }
}

/// Another service type is browsed the same way: nothing in the cache is HAP's.
final class MDNSCacheServiceTypeTests: XCTestCase {
    func testTheCacheKeepsOnlyItsOwnServiceType() {
        var cache = MDNSCache(service: "_airplay._tcp.local")
        let instance = "Kitchen._airplay._tcp.local"
        cache.insert(
            [
                DNSMessage.Record(name: "_airplay._tcp.local", data: .ptr(instance), ttl: 4500),
                DNSMessage.Record(name: instance, data: .srv(target: "speaker.local", port: 7000), cacheFlush: true),
                DNSMessage.Record(name: instance, data: .txt(["model": "x"]), cacheFlush: true),
                DNSMessage.Record(name: "speaker.local", data: .a("10.0.0.9"), cacheFlush: true),
                DNSMessage.Record(name: "_hap._tcp.local", data: .ptr("Lamp._hap._tcp.local"), ttl: 4500),
                DNSMessage.Record(name: "Lamp._hap._tcp.local", data: .srv(target: "lamp.local", port: 1)),
            ], now: 0)
        XCTAssertEqual(cache.entries.count, 4)
        XCTAssertEqual(
            cache.instances(),
            [
                MDNSInstance(
                    name: instance, label: "Kitchen", target: "speaker.local", port: 7000, txt: ["model": "x"],
                    addresses: ["10.0.0.9"])
            ])
    }

    /// A link-local address is only reachable through the interface it was heard on: it keeps
    /// that interface as its scope; other addresses and records are left as they are.
    func testALinkLocalAddressHeardOnAnInterfaceKeepsItAsItsScope() {
        let host = "peer.local"
        let linkLocal = DNSMessage.Record(name: host, data: .aaaa("fe80::1c:2"), ttl: 120)
        XCTAssertEqual(linkLocal.scopingLinkLocal(to: "wlan0").data, .aaaa("fe80::1c:2%wlan0"))
        let global = DNSMessage.Record(name: host, data: .aaaa("fd00:77::2"), ttl: 120)
        XCTAssertEqual(global.scopingLinkLocal(to: "wlan0"), global)
        let scoped = DNSMessage.Record(name: host, data: .aaaa("fe80::1%eth0"), ttl: 120)
        XCTAssertEqual(scoped.scopingLinkLocal(to: "wlan0"), scoped)
        let v4 = DNSMessage.Record(name: host, data: .a("10.0.0.2"), ttl: 120)
        XCTAssertEqual(v4.scopingLinkLocal(to: "wlan0"), v4)
    }
}
