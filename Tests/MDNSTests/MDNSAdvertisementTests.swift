import XCTest

@testable import MDNS

/// The responder's packets (RFC 6762), as pure functions of one instance: the probe, the
/// answers to queries, conflicts and renaming, the announcement and the goodbye, each written
/// to the wire and read back with the codec the browser uses.
final class MDNSAdvertisementTests: XCTestCase {
    let instance = MDNSServiceInstance(
        name: "HomeMQTT My Home", type: "_hap._tcp.local", host: "homemqtt-aabbccddeeff.local", port: 51826,
        txt: ["id": "AA:BB:CC:DD:EE:FF", "c#": "3", "sf": "1", "ci": "2"])
    var advertisement: MDNSAdvertisement { MDNSAdvertisement(instance: instance, addresses: ["192.0.2.7", "fe80::1"]) }
    let full = "HomeMQTT My Home._hap._tcp.local"

    /// The message as another host reads it.
    func wire(_ message: DNSMessage) throws -> DNSMessage { try DNSMessage.parse(message.encoded(limit: 9000)) }

    func testTheProbeAsksForBothNamesAndProposesTheRecordsAsAuthority() throws {
        let probe = try wire(advertisement.probe)
        XCTAssertFalse(probe.isResponse)
        XCTAssertEqual(probe.questions.map(\.name), [full, "homemqtt-aabbccddeeff.local"])
        XCTAssertEqual(probe.questions.map(\.type), [255, 255])
        XCTAssertFalse(probe.questions.contains(where: \.unicastResponse), "answers by multicast: 5353 is shared")
        XCTAssertEqual(Set(probe.authority.map(\.type)), [33, 16, 1, 28])
        XCTAssertEqual(probe.authority.count, 4)
        // Our own probe, looped back, is no conflict; nor is it a query to answer.
        XCTAssertFalse(advertisement.conflicts(with: probe))
    }

    func testABrowsersQueryIsAnsweredWithWhatResolvesTheInstance() throws {
        let query = try wire(DNSMessage(isResponse: false, questions: [.init(name: "_hap._tcp.local", type: 12)]))
        let answer = try wire(try XCTUnwrap(advertisement.answer(to: query)))
        XCTAssertTrue(answer.isResponse)
        XCTAssertEqual(answer.records.first?.data, .ptr(full))
        let srv = try XCTUnwrap(answer.records.first { $0.type == 33 })
        XCTAssertEqual(srv.data, .srv(target: "homemqtt-aabbccddeeff.local", port: 51826))
        XCTAssertTrue(srv.cacheFlush)
        XCTAssertEqual(answer.records.first { $0.type == 16 }?.data, .txt(instance.txt))
        XCTAssertEqual(answer.records.filter { $0.type == 1 }.map(\.data), [.a("192.0.2.7")])
        XCTAssertEqual(answer.records.filter { $0.type == 28 }.map(\.data), [.aaaa("fe80::1")])
        // Case does not matter in names; another type's query is not ours.
        XCTAssertNotNil(
            advertisement.answer(
                to: DNSMessage(isResponse: false, questions: [.init(name: "_HAP._tcp.local", type: 12)])))
        XCTAssertNil(
            advertisement.answer(
                to: DNSMessage(isResponse: false, questions: [.init(name: "_ipp._tcp.local", type: 12)])))
        // A response is never answered.
        XCTAssertNil(advertisement.answer(to: advertisement.announcement))
    }

    func testKnownAnswersWithHalfTheirTTLLeftAreNotRepeated() throws {
        let ptr = advertisement.records[0]
        var fresh = ptr
        fresh.ttl = MDNSAdvertisement.otherTTL / 2
        let known = DNSMessage(
            isResponse: false, questions: [.init(name: "_hap._tcp.local", type: 12)], records: [fresh])
        XCTAssertNil(advertisement.answer(to: try wire(known)), "the asker knows the PTR")
        var stale = ptr
        stale.ttl = MDNSAdvertisement.otherTTL / 2 - 1
        let old = DNSMessage(isResponse: false, questions: [.init(name: "_hap._tcp.local", type: 12)], records: [stale])
        XCTAssertEqual(try XCTUnwrap(advertisement.answer(to: try wire(old))).records.first?.data, .ptr(full))
    }

    func testQuestionsForTheInstanceAndTheHostGetTheirRecords() throws {
        let srv = try XCTUnwrap(
            advertisement.answer(
                to: DNSMessage(isResponse: false, questions: [.init(name: full, type: 33, unicastResponse: true)])))
        XCTAssertEqual(srv.records.first?.type, 33)
        XCTAssertTrue(srv.records.contains { $0.type == 1 }, "the addresses as additional records")
        let txt = try XCTUnwrap(
            advertisement.answer(to: DNSMessage(isResponse: false, questions: [.init(name: full, type: 16)])))
        XCTAssertEqual(txt.records.map(\.type), [16])
        let host = try XCTUnwrap(
            advertisement.answer(
                to: DNSMessage(isResponse: false, questions: [.init(name: "homemqtt-aabbccddeeff.local", type: 255)])))
        XCTAssertEqual(Set(host.records.map(\.type)), [1, 28])
        // The service enumeration (`avahi-browse -a`, `dns-sd -B _services._dns-sd._udp`).
        let services = try XCTUnwrap(
            advertisement.answer(
                to: DNSMessage(isResponse: false, questions: [.init(name: "_services._dns-sd._udp.local", type: 12)])))
        XCTAssertEqual(services.records.map(\.data), [.ptr("_hap._tcp.local")])
    }

    func testAnotherRespondersRecordsForOurNameAreAConflictOurOwnAreNot() throws {
        XCTAssertFalse(advertisement.conflicts(with: try wire(advertisement.announcement)))
        XCTAssertFalse(advertisement.conflicts(with: try wire(advertisement.goodbye)))
        // Another host answers with an SRV of the name: its host and port.
        let other = DNSMessage(
            isResponse: true,
            records: [.init(name: full.uppercased(), data: .srv(target: "holder.local", port: 9), cacheFlush: true)])
        XCTAssertTrue(advertisement.conflicts(with: try wire(other)))
        // Its goodbye is not a claim.
        var gone = other
        gone.records[0].ttl = 0
        XCTAssertFalse(advertisement.conflicts(with: try wire(gone)))
        // Another's probe for the name with other records: a simultaneous probe.
        var rival = MDNSAdvertisement(instance: instance, addresses: ["192.0.2.99"])
        rival.instance.port = 40000
        XCTAssertTrue(advertisement.conflicts(with: try wire(rival.probe)))
        // Another's TXT alone is not (our own previous TXT may come back after a change).
        let txt = DNSMessage(isResponse: true, records: [.init(name: full, data: .txt(["sf": "0"]), cacheFlush: true)])
        XCTAssertFalse(advertisement.conflicts(with: try wire(txt)))
        // Records of other names never are.
        let unrelated = DNSMessage(
            isResponse: true, records: [.init(name: "Lamp._hap._tcp.local", data: .srv(target: "x.local", port: 1))])
        XCTAssertFalse(advertisement.conflicts(with: try wire(unrelated)))
    }

    func testAConflictRenamesTheInstanceAndItsHostByNumber() {
        let second = MDNSAdvertisement.renamed(instance, base: instance)
        XCTAssertEqual(second.name, "HomeMQTT My Home (2)")
        XCTAssertEqual(second.host, "homemqtt-aabbccddeeff-2.local")
        XCTAssertEqual(second.fullName, "HomeMQTT My Home (2)._hap._tcp.local")
        let third = MDNSAdvertisement.renamed(second, base: instance)
        XCTAssertEqual(third.name, "HomeMQTT My Home (3)")
        XCTAssertEqual(third.host, "homemqtt-aabbccddeeff-3.local")
        XCTAssertEqual(third.txt, instance.txt)
    }

    func testTheAnnouncementCarriesEverythingAndTheGoodbyeTheSameWithTTLZero() throws {
        let announcement = try wire(advertisement.announcement)
        XCTAssertTrue(announcement.isResponse)
        XCTAssertEqual(
            announcement.records.map(\.type), [12, 33, 16, 1, 28, 12], "PTR, SRV, TXT, A, AAAA, service enumeration")
        XCTAssertTrue(announcement.records.allSatisfy { $0.ttl > 0 })
        let goodbye = try wire(advertisement.goodbye)
        XCTAssertEqual(goodbye.records.map(\.data), announcement.records.map(\.data))
        XCTAssertTrue(goodbye.records.allSatisfy { $0.ttl == 0 })
        // A browser's cache drops the instance on it.
        var cache = MDNSCache(service: "_hap._tcp.local")
        cache.insert(announcement.records, now: 0)
        XCTAssertEqual(cache.instances().map(\.port), [51826])
        cache.insert(goodbye.records, now: 1)
        _ = cache.expire(now: 3)
        XCTAssertEqual(cache.instances().count, 0)
    }

    func testALegacyQuerysIDSurvivesTheWire() throws {
        var query = DNSMessage(isResponse: false, questions: [.init(name: full, type: 16)])
        query.id = 0x1234
        XCTAssertEqual(try wire(query).id, 0x1234)
    }
}
