import XCTest
@testable import HAP
import MDNS

final class DiscoveryTests: XCTestCase {
    /// Builds an mDNS answer like an accessory sends (with a compressed name) and reads it back.
    func testParsesAnAccessoryAnnouncement() throws {
        func name(_ s: String) -> [UInt8] { DNSMessage.encodeName(s) }
        func rr(_ n: [UInt8], _ type: UInt16, _ data: [UInt8]) -> [UInt8] {
            n + [
                UInt8(type >> 8), UInt8(type & 0xFF), 0x80, 1, 0, 0, 0x11, 0x94, UInt8(data.count >> 8),
                UInt8(data.count & 0xFF),
            ] + data
        }
        func txt(_ items: [String]) -> [UInt8] { items.flatMap { [UInt8($0.utf8.count)] + Array($0.utf8) } }
        let header: [UInt8] = [0, 0, 0x84, 0, 0, 0, 0, 4, 0, 0, 0, 0]
        let serviceName = name("_hap._tcp.local")
        // The PTR answer's owner name sits at offset 12; the instance name points back to it.
        let instance = [UInt8(10)] + Array("Peer Light".utf8) + [0xC0, 12]
        var packet = header + rr(serviceName, 12, instance)
        let instanceOffset = packet.count - instance.count
        let pointer: [UInt8] = [0xC0 | UInt8(instanceOffset >> 8), UInt8(instanceOffset & 0xFF)]
        packet += rr(
            pointer, 16, txt(["c#=3", "ff=0", "id=AA:BB:CC:DD:EE:FF", "md=Peer Light", "s#=1", "sf=1", "ci=5"]))
        packet += rr(pointer, 33, [0, 0, 0, 0, 0xCA, 0x13] + name("peer.local"))
        packet += rr(name("peer.local"), 1, [127, 0, 0, 1])
        let found = HAPDiscovery.accessories(from: try DNSMessage.parse(packet).records)
        XCTAssertEqual(
            found,
            [
                HAPDiscoveredAccessory(
                    id: "AA:BB:CC:DD:EE:FF", name: "Peer Light", model: "Peer Light", category: 5, isPaired: false,
                    configurationNumber: 3, featureFlags: 0, host: "127.0.0.1", port: 0xCA13,
                    addresses: ["127.0.0.1"])
            ])
    }

    /// What the one-shot question and the browser heard of one accessory is one entry with the
    /// addresses of both; a host that was only the SRV target's name gives way to an address.
    func testWhatBothListenersHeardIsJoinedByPairingID() {
        func found(_ id: String, _ host: String, _ addresses: [String]) -> HAPDiscoveredAccessory {
            HAPDiscoveredAccessory(
                id: id, name: "Light", model: "", category: 5, isPaired: false, configurationNumber: 1,
                featureFlags: 0, host: host, port: 51826, addresses: addresses)
        }
        let asked = [found("AA:BB:CC:DD:EE:01", "10.0.0.2", ["10.0.0.2"]), found("AA:BB:CC:DD:EE:02", "b.local", [])]
        let heard = [
            found("aa:bb:cc:dd:ee:01", "10.0.0.2", ["10.0.0.2", "fd00::2"]),
            found("AA:BB:CC:DD:EE:02", "fd00::3", ["fd00::3"]), found("AA:BB:CC:DD:EE:03", "fd00::4", ["fd00::4"]),
        ]
        let joined = HAPDiscovery.merged(asked, heard)
        XCTAssertEqual(joined.map(\.id), ["AA:BB:CC:DD:EE:01", "AA:BB:CC:DD:EE:02", "AA:BB:CC:DD:EE:03"])
        XCTAssertEqual(joined.map(\.host), ["10.0.0.2", "fd00::3", "fd00::4"])
        XCTAssertEqual(joined[0].addresses, ["10.0.0.2", "fd00::2"])
    }

    func testMalformedPacketsAreErrorsNotCrashes() {
        XCTAssertThrowsError(try DNSMessage.parse([0, 1, 2]))
        XCTAssertThrowsError(try DNSMessage.parse([0, 0, 0x84, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0xC0, 12]))
        XCTAssertThrowsError(try DNSMessage.parse([0, 0, 0x84, 0, 0, 0, 0, 1, 0, 0, 0, 0, 5, 65]))
    }
}
