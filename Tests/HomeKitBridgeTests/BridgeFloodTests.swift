import Foundation
import Glibc
import HAP
import HAPServerTestSupport
import HomeKitBridgeTestSupport
import HomeModel
import TestSupport
import XCTest

/// A thousand strangers that connect and never finish pair-verify, and a few sending garbage,
/// against the running gateway's bridge: each gets a clear answer or a close, the gateway's MQTT
/// keeps answering, and a paired controller keeps its session and still gets a new one while
/// strangers fill the connection cap (the oldest unverified connection makes room).
final class BridgeFloodTests: XCTestCase {
    static let light = "home/garage/garage-door-opener/garage-light"
    /// `HomeKitConfig`'s connection cap, which the bridge's server keeps (HAP asks for 8 at least).
    static let cap = 32
    static let strangers = 1000

    func testStrangersThatNeverVerifyCannotShutOutAPairedController() async throws {
        let state = try TemporaryDirectory(prefix: "homekit-flood")
        try await BridgedGateway.run(state: state) { gw in
            let (pairing, paired) = try await Controller.pair(gw, state: state)
            let ids = try IDsFile(state: state)
            let brightness = try await ids.hapID(gw, topic: "\(Self.light)/brightness")
            let heard = StreamCollector(paired.events)
            _ = try await paired.writeCharacteristics([brightness: ["ev": true]])
            XCTAssertEqual(gw.bridge.connectionCount?.verified, 1)

            // The strangers, one after another on a thread of their own: each starts pair-verify
            // (M1), reads its M2 and goes quiet. Each has its answer before the next connects, so
            // the server has taken every one when the loop ends.
            let port = gw.port
            let flood = FloodClients()
            async let flooded: Int = blocking {
                var answered = 0
                for _ in 0..<Self.strangers {
                    let client = try RawHAPClient(port: port)
                    flood.append(client)
                    let key = (0..<32).map { _ in UInt8.random(in: 0...255) }
                    let m2 = try client.tlv("/pair-verify", [(6, [1]), (3, key)])
                    if m2.status == 200 && m2.tlv?[6] == [2] { answered += 1 }
                }
                return answered
            }

            // While strangers fill the cap: MQTT answers a set, and the paired session hears it
            // and reads.
            try await waitUntil("strangers to fill the cap", timeout: 30) {
                (gw.bridge.connectionCount?.open ?? 0) >= Self.cap
            }
            try await gw.publish("\(Self.light)/brightness/set", "33")
            try await gw.seen.waitFor("the set answered ok during the flood", timeout: 10) {
                $0.topic == "\(Self.light)/brightness/result" && $0.string.contains("\"ok\"")
            }
            try await heard.waitFor("the paired session hears 33 during the flood", timeout: 10) {
                HAPConnection.eventValues($0).contains { $0.0 == brightness && $0.1 == 33 }
            }
            let during = try await paired.readCharacteristics([brightness])
            XCTAssertEqual(try during[brightness]?.get(), 33)

            // Every stranger was answered M2; all but those the cap holds were closed to make room.
            let answered = try await flooded
            XCTAssertEqual(answered, Self.strangers)
            let held = Self.cap - 1
            try await waitUntil("the oldest strangers closed", timeout: 30) {
                flood.closedCount() == Self.strangers - held
            }
            XCTAssertEqual(flood.openOnes(), Array(Self.strangers - held..<Self.strangers), "the newest are held")
            XCTAssertEqual(gw.bridge.connectionCount?.open, Self.cap)
            XCTAssertEqual(gw.bridge.connectionCount?.verified, 1)
            XCTAssertTrue(gw.logs.lines.contains { $0.contains("making room: 32 connections are open") })

            // The cap is full of strangers, and the paired controller still gets a new session:
            // the oldest stranger makes room for it.
            let second = try await Controller.connect(pairing, gw)
            let read = try await second.readCharacteristics([brightness])
            XCTAssertEqual(try read[brightness]?.get(), 33)
            try await waitUntil("one more stranger closed", timeout: 10) {
                flood.closedCount() == Self.strangers - held + 1
            }
            XCTAssertEqual(gw.bridge.connectionCount?.verified, 2)

            // Garbage gets HTTP 400 and a close; the sessions do not notice.
            let garbage = [
                "HELLO\r\n\r\n", "\u{16}\u{03}\u{01}\u{02}\u{00}\u{01}\r\n\r\n",
                "GET /accessories HTTP/1.1\r\nContent-Length: x\r\n\r\n",
            ]
            for garbage in garbage {
                let client = try await blocking { try RawHAPClient(port: port) }
                let answer = try await blocking { () throws -> (RawHAPClient.Message, Bool) in
                    try client.sendRaw(Array(garbage.utf8))
                    return (try client.next(), client.isClosed(within: 10))
                }
                XCTAssertEqual(answer.0.status, 400, garbage)
                XCTAssertTrue(answer.1, garbage)
            }

            // After: both sessions hear a set made on MQTT, and it is answered ok.
            let secondHeard = StreamCollector(second.events)
            _ = try await second.writeCharacteristics([brightness: ["ev": true]])
            try await gw.publish("\(Self.light)/brightness/set", "66")
            try await gw.seen.waitFor(count: 2, "sets answered ok, the second after the flood", timeout: 10) {
                $0.topic == "\(Self.light)/brightness/result" && $0.string.contains("\"ok\"")
            }
            for (name, collector) in [("first", heard), ("second", secondHeard)] {
                try await collector.waitFor("the \(name) session hears 66", timeout: 10) {
                    HAPConnection.eventValues($0).contains { $0.0 == brightness && $0.1 == 66 }
                }
            }
            await paired.close()
            await second.close()
            flood.closeAll()
        }
    }
}

/// The strangers' sockets, shared between the thread that opens them and the test's checks.
final class FloodClients: @unchecked Sendable {
    private let lock = NSLock()
    private var clients: [RawHAPClient] = []
    private var closed: Set<Int> = []

    func append(_ client: RawHAPClient) { lock.withLock { clients.append(client) } }
    var count: Int { lock.withLock { clients.count } }

    /// How many the server has closed: their socket reads end of file (what they were sent
    /// before is drained).
    func closedCount() -> Int {
        lock.withLock {
            var buffer = [UInt8](repeating: 0, count: 4096)
            for (n, client) in clients.enumerated() where !closed.contains(n) {
                while true {
                    let got = buffer.withUnsafeMutableBytes {
                        recv(client.descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT))
                    }
                    // A reset is a close too (nothing the server had not read was left).
                    if got == 0 || (got < 0 && errno == ECONNRESET) { closed.insert(n) }
                    if got <= 0 { break }
                }
            }
            return closed.count
        }
    }

    /// The indexes of those still open.
    func openOnes() -> [Int] { lock.withLock { clients.indices.filter { !closed.contains($0) } } }

    func closeAll() { lock.withLock { clients = [] } }
}
