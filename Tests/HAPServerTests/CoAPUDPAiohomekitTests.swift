import CoAP
import Foundation
import HAP
import HAPServer
import HAPThread
import HomeModel
import TestSupport
import XCTest

/// Our accessory over real UDP held to aiohomekit 4.0.1's own CoAP controller on its own aiocoap
/// transport (`Scripts/aiohomekit-coap-udp.py`): the independent check of the accessory side
/// that CoAPAiohomekitTests makes over stdio, here over the wire, with aiohomekit's sockets,
/// retransmissions, separate answers and event endpoint.
final class CoAPUDPAiohomekitTests: XCTestCase {
    func testAiohomekitPairsReadsWritesAndHearsEventsOverUDP() async throws {
        if let reason = HAPPeer.unavailableReason {
            if HAPPeer.isRequired { XCTFail(reason) }
            throw XCTSkip(reason)
        }
        let peers = try CoAPUDPPeers()
        let database = peers.database
        let brightness = database.iid("43", "8")
        try await peers.serve { served in
            let script = HAPPeer.repositoryRoot.appendingPathComponent("Scripts/aiohomekit-coap-udp.py").path
            let child = try ChildProcess(
                HAPPeer.python.path,
                [script, "::1", String(served.address.port), CoAPUDPPeers.code.revealed, String(brightness), "33"])
            // Once it is subscribed, a change from inside: the event it is PUT.
            try await waitUntil("aiohomekit subscribed", timeout: 60, pollInterval: 0.02) {
                if child.outputLines.contains(where: { $0.hasPrefix("SUBSCRIBED ") }) { return true }
                if !child.isRunning { throw ProcessError("aiohomekit exited: \(child.standardError)") }
                return false
            }
            XCTAssertEqual(database.value(brightness), .int(33))
            XCTAssertEqual(served.accessory.sessionCount, 1)
            let reached = await database.set(brightness, .int(44))
            XCTAssertEqual(reached, 1)
            let status = try await child.waitForExit(timeout: 60)
            XCTAssertEqual(status, 0, child.standardError)

            let results = child.outputLines
            XCTAssertEqual(results.first, "PAIRED \(served.accessory.status.pairingID)")
            XCTAssertEqual(served.accessory.pairings.count, 1)
            let line = try XCTUnwrap(results.first { $0.hasPrefix("DATABASE ") }, child.standardError)
            let services = try JSONValue(parsing: Array(line.dropFirst("DATABASE ".count).utf8))
            XCTAssertEqual(
                services.arrayValue?.compactMap { $0["type"]?.stringValue },
                database.model.services.map(\.type) + [StandardUUID.longForm("55")])
            XCTAssertEqual(
                services.arrayValue?.dropLast().compactMap { $0["characteristics"]?.arrayValue?.count },
                database.model.services.map(\.characteristics.count))
            XCTAssertEqual(
                Array(results.dropFirst(2)),
                [
                    "READ \(brightness) 80", "WROTE \(brightness) {}", "SUBSCRIBED \(brightness) {}",
                    "EVENT \(brightness) 44", "DONE",
                ], child.standardError)
            XCTAssertEqual(database.value(brightness), .int(44))
        }
    }
}
