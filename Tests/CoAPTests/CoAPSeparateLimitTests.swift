import CoAP
import Foundation
import Synchronization
import TestSupport
import XCTest

/// Slow requests past the server's `separateLimit` are answered 5.03 at once, piggybacked;
/// those within it get their empty ACK and, once the handlers return, their answers.
final class CoAPSeparateLimitTests: XCTestCase {
    func testSeparateRequestsPastTheLimitAreAnswered503() async throws {
        let gate = AsyncStream.makeStream(of: Void.self)
        let started = Mutex(0)
        let routes: [String: CoAPRoute] = [
            "1": .separate { _ in
                started.withLock { $0 += 1 }
                for await _ in gate.stream {}
                return CoAPResponse(code: .changed)
            }
        ]
        let server = try CoAPServer(bind: CoAPPeer(host: "::1", port: 0), routes: routes, separateLimit: 4)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await server.run() }
            let stranger = try RawUDP()
            for mid in UInt16(1)...10 {
                stranger.send(
                    coapMessage(type: 0, code: 2, mid: mid, token: [UInt8(mid)], options: [(11, [0x31])]),
                    to: server.address.port)
            }
            var answers: [UInt16: [UInt8]] = [:]
            while answers.count < 10, let datagram = stranger.receive(timeout: 5) {
                answers[UInt16(datagram.bytes[2]) << 8 | UInt16(datagram.bytes[3])] = datagram.bytes
            }
            XCTAssertEqual(answers.count, 10, "every request answered at once")
            let emptyACKs = answers.values.filter { $0 == [0x60, 0x00] + $0[2..<4] }
            let refusals = answers.values.filter {
                $0[0] >> 4 & 0x03 == 2 && $0[1] == CoAPCode.serviceUnavailable.rawValue
            }
            XCTAssertEqual(emptyACKs.count, 4)
            XCTAssertEqual(refusals.count, 6)
            try await waitUntil("the four handlers to start") { started.withLock { $0 } == 4 }
            gate.continuation.finish()
            // The four separate answers, confirmable 2.04s, each acknowledged.
            var separate = 0
            while separate < 4, let datagram = stranger.receive(timeout: 5) {
                guard datagram.bytes[0] >> 4 & 0x03 == 0, datagram.bytes[1] == CoAPCode.changed.rawValue else {
                    continue
                }
                separate += 1
                stranger.send([0x60, 0x00, datagram.bytes[2], datagram.bytes[3]], to: server.address.port)
            }
            XCTAssertEqual(separate, 4)
            group.cancelAll()
        }
    }
}
