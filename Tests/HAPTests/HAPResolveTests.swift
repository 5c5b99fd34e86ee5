import MDNS
import XCTest

@testable import HAP

/// HAP's reading of `_hap._tcp` records (the record rules are `MDNSTests/MDNSCacheTests`): the
/// pairing id, `c#` and `sf` of an accessory that moved, and nothing for an instance without `id`.
final class HAPResolveTests: XCTestCase {
    let instance = "Peer Bridge AB12._hap._tcp.local"

    func announcement(port: Int, cn: String) -> [DNSMessage.Record] {
        [
            DNSMessage.Record(name: "_hap._tcp.local", data: .ptr(instance), ttl: 1200),
            DNSMessage.Record(name: instance, data: .srv(target: "peer.local", port: port), cacheFlush: true),
            DNSMessage.Record(
                name: instance, data: .txt(["id": "AA:BB:CC:DD:EE:FF", "c#": cn, "sf": "0"]), ttl: 1200,
                cacheFlush: true),
            DNSMessage.Record(name: "peer.local", data: .a("127.0.0.1"), cacheFlush: true),
        ]
    }

    func testAnAnnouncementIsAnAccessoryWithItsPairingIDAndConfiguration() throws {
        let found = HAPDiscovery.resolve(announcement(port: 40002, cn: "3"))
        XCTAssertEqual(found.map(\.instance), [instance])
        let accessory = try XCTUnwrap(found.first?.accessory)
        XCTAssertEqual(accessory.id, "AA:BB:CC:DD:EE:FF")
        XCTAssertEqual(accessory.name, "Peer Bridge AB12")
        XCTAssertEqual(accessory.port, 40002)
        XCTAssertEqual(accessory.host, "127.0.0.1")
        XCTAssertEqual(accessory.configurationNumber, 3)
        XCTAssertEqual(accessory.isPaired, true)
    }

    func testAnInstanceWithoutAPairingIDIsNoAccessory() {
        let records = announcement(port: 1, cn: "1").map { record -> DNSMessage.Record in
            guard case .txt = record.data else { return record }
            var bare = record
            bare.data = .txt(["c#": "1"])
            return bare
        }
        XCTAssertTrue(HAPDiscovery.resolve(records).isEmpty)
    }
}
