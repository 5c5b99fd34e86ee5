import Foundation
import HAP
import TestSupport
import XCTest

/// A dual-stack accessory whose addresses change one family at a time, as after a DHCP renewal
/// or a new IPv6 prefix, and some of whose announced addresses stop answering: the gateway
/// follows the accessory and connects to whichever address answers.
///
/// The accessory's veth has fixed addresses for python-zeroconf (`.2`, `::2`) and the addresses
/// the accessory announces and is reached at (`.3`/`.4`, `::3`/`::4`); HAP-python listens on
/// every address, so taking one off the veth is what makes it stop answering there.
final class AddressChangeTests: XCTestCase {
    let v4 = (old: "10.232.0.3", new: "10.232.0.4")
    let v6 = (old: "fd00:78::3", new: "fd00:78::4")

    func testTheGatewayFollowsEachFamilysChangeAndConnectsToTheAddressThatAnswers() async throws {
        let port = 40_021
        let rig = try await NamespaceRig.make(
            self, gateway: ["10.232.0.1", "fd00:78::1"],
            accessory: ["10.232.0.2", "fd00:78::2", v4.old, v4.new, v6.old, v6.new], port: port,
            peerAddress: "10.232.0.2,fd00:78::2", listen: ["0.0.0.0", "::"], announced: [v4.old, v6.old],
            pairAt: v4.old)
        let sub = try rig.subscribe()
        let gateway = try rig.startGateway()
        /// Waits until the pairing's first address is `host` and the accessory is online again
        /// after the subscriber's first `mark` lines.
        func connects(at host: String, after mark: Int, _ what: String) async throws {
            do {
                try await waitUntil(what, timeout: 30, pollInterval: 0.2) {
                    try await rig.pairings().contains("\(host):\(port)")
                }
                try await availability(sub, "online", from: mark, timeout: 20)
            } catch {
                XCTFail("gateway stderr: \(gateway.standardError.suffix(3000))")
                throw error
            }
        }
        try await connects(at: v4.old, after: 0, "the first connection, over IPv4")

        // The IPv4 address changes; the IPv6 one does not. (A record with the cache-flush bit
        // replaces only records heard more than a second before it, RFC 6762 §10.2: the
        // gateway has just heard the first ones. Should it hear them late under load, the old
        // address stays announced and keepalive ends the connection instead, within 30 s.)
        try await Task.sleep(for: .seconds(1.5))
        var mark = sub.outputLines.count
        var announced = try await rig.peer!.command("announce \(v4.new),\(v6.old)")
        XCTAssertEqual(announced, "OK")
        try await rig.removeFromAccessory(v4.old)
        try await availability(sub, "offline", from: mark, timeout: 40)
        try await connects(at: v4.new, after: mark, "the new IPv4 address followed")
        try await rig.setBrightness(41, seenBy: sub)

        // The IPv4 address goes without a word (no FIN can leave from it) and is still
        // announced: TCP keepalive finds the connection dead (30 s), and the IPv6 address,
        // tried 0.25 s after the IPv4 one, answers.
        mark = sub.outputLines.count
        try await rig.removeFromAccessory(v4.new)
        try await availability(sub, "offline", from: mark, timeout: 45)
        try await connects(at: v6.old, after: mark, "the IPv6 address, which answers")
        try await rig.setBrightness(42, seenBy: sub)

        // The IPv6 address changes; the IPv4 one (which does not answer) does not.
        try await Task.sleep(for: .seconds(1.5))
        mark = sub.outputLines.count
        announced = try await rig.peer!.command("announce \(v4.new),\(v6.new)")
        XCTAssertEqual(announced, "OK")
        try await rig.removeFromAccessory(v6.old)
        try await availability(sub, "offline", from: mark, timeout: 40)
        try await connects(at: v6.new, after: mark, "the new IPv6 address followed")
        try await rig.setBrightness(43, seenBy: sub)
    }

    /// An accessory announced at its link-local address only (as a Thread border router's or an
    /// IPv6-only network's accessories often are) is reached through the interface mDNS heard
    /// it on: the address is kept with that interface as its scope.
    func testAnAccessoryAtALinkLocalAddressIsReachedThroughTheInterfaceItWasHeardOn() async throws {
        let port = 40_031
        let rig = try await NamespaceRig.make(
            self, gateway: ["fd00:79::1"], accessory: ["fd00:79::2", "fd00:79::3"], port: port,
            peerAddress: "fd00:79::2", listen: ["::"], announced: ["fd00:79::3"], pairAt: "fd00:79::3")
        let sub = try rig.subscribe()
        _ = try rig.startGateway()
        try await availability(sub, "online", from: 0, timeout: 30)

        let linkLocal = try await rig.accessoryLinkLocalAddress()
        try await Task.sleep(for: .seconds(1.5))
        let mark = sub.outputLines.count
        let announced = try await rig.peer!.command("announce \(linkLocal)")
        XCTAssertEqual(announced, "OK")
        try await rig.removeFromAccessory("fd00:79::3")
        try await availability(sub, "offline", from: mark, timeout: 40)
        try await waitUntil("the pairing at the link-local address", timeout: 30, pollInterval: 0.2) {
            try await rig.pairings().contains("\(linkLocal)%\(rig.near):\(port)")
        }
        try await availability(sub, "online", from: mark, timeout: 20)
        try await rig.setBrightness(44, seenBy: sub)
    }
}
