import CoAP
import Foundation
import Synchronization
import TestSupport
import XCTest

/// Garbage, lies and floods at our server and client: libcoap rejects them, nothing crashes,
/// and a well-behaved peer keeps being served.
final class CoAPBadInputTests: XCTestCase {
    static let uriPath: UInt16 = 11
    static let block2: UInt16 = 23
    static let block1: UInt16 = 27

    func testMalformedDatagramsAreRejectedAndOthersStillServed() async throws {
        let handled = Mutex(0)
        let routes: [String: CoAPRoute] = [
            "0": .immediate { incoming in
                handled.withLock { $0 += 1 }
                return CoAPResponse(code: .changed, payload: incoming.payload)
            }
        ]
        try await withServer(routes) { server in
            let port = server.address.port
            let stranger = try RawUDP()
            let garbage: [[UInt8]] = [
                [0x40], // truncated header
                [0x40, 0x02, 0x00], // three bytes
                [0x80, 0x02, 0x00, 0x01], // version 2
                [0x49, 0x02, 0x00, 0x02] + [UInt8](repeating: 1, count: 9), // token length 9 (reserved)
                [0x41, 0x02, 0x00, 0x03, 0x01, 0xF1, 0x00], // option delta 15 (reserved)
                [0x41, 0x02, 0x00, 0x04, 0x01, 0xB1, 0x30, 0xFF], // payload marker, no payload
                [0x41, 0x02, 0x00, 0x05, 0x01, 0xBD], // extended length byte missing
                // Block1 block 0 of SZX 0 (16 bytes), "more" set, carrying 100 bytes.
                coapMessage(
                    type: 0, code: 2, mid: 8, token: [8], options: [(Self.uriPath, [0x30]), (Self.block1, [0x08])],
                    payload: [UInt8](repeating: 0x55, count: 100)),
                [UInt8](repeating: 0x42, count: 3000), // oversized datagram
                coapMessage(type: 2, code: 0x45, mid: 7, token: [9, 9], payload: [1]), // an ACK nobody asked for
            ]
            for datagram in garbage { stranger.send(datagram, to: port) }
            let client = try CoAPClient()
            let answer = try await client.request(.post, "coap://[::1]:\(port)/0", payload: [5])
            XCTAssertEqual(answer, CoAPResponse(code: .changed, payload: [5]))
            XCTAssertEqual(handled.withLock { $0 }, 1, "no malformed datagram reached the route")
            // Block2 with the reserved SZX 7 (BERT, TCP only): libcoap ignores the option and
            // the request is answered whole, piggybacked.
            let reserved = coapMessage(
                type: 0, code: 2, mid: 6, token: [6], options: [(Self.uriPath, [0x30]), (Self.block2, [0x0F])],
                payload: [4])
            stranger.send(reserved, to: port)
            var answer6: [UInt8]?
            while answer6 == nil, let datagram = stranger.receive(timeout: 5) {
                if datagram.bytes.count >= 4, datagram.bytes[2] == 0, datagram.bytes[3] == 6 {
                    answer6 = datagram.bytes
                }
            }
            let piggybacked = try XCTUnwrap(answer6, "an answer to the Block2 SZX 7 request")
            XCTAssertEqual(piggybacked[0] >> 4 & 0x03, 2, "an ACK")
            XCTAssertEqual(piggybacked[1], CoAPCode.changed.rawValue)
            XCTAssertEqual(Array(piggybacked.suffix(2)), [0xFF, 4], "the payload echoed, no Block2")
            XCTAssertEqual(handled.withLock { $0 }, 2)
            await client.close()
        }
    }

    /// 2000 confirmable POSTs as fast as a socket sends them; another peer is still answered.
    func testFloodOfConfirmablesDoesNotStarveAnotherPeer() async throws {
        let routes: [String: CoAPRoute] = ["0": .immediate { _ in CoAPResponse(code: .changed) }]
        try await withServer(routes) { server in
            let port = server.address.port
            let flooder = try RawUDP()
            for mid in UInt16(0)..<2000 {
                flooder.send(
                    coapMessage(
                        type: 0, code: 2, mid: mid, token: [UInt8(mid & 0xFF)], options: [(Self.uriPath, [0x30])]),
                    to: port)
            }
            let client = try CoAPClient()
            let answer = try await client.request(.post, "coap://[::1]:\(port)/0", deadline: .seconds(10))
            XCTAssertEqual(answer.code, .changed)
            // The flooder was answered too (piggybacked 2.04 ACKs), as far as its socket kept them.
            let first = try XCTUnwrap(flooder.receive(timeout: 5))
            XCTAssertEqual(first.bytes[1], CoAPCode.changed.rawValue)
            await client.close()
        }
    }

    /// A separate response with a token we never sent is rejected with a reset; the request
    /// keeps waiting for its own answer (here: until its deadline).
    func testResponseWithAWrongTokenIsResetAndIgnored() async throws {
        let peer = try RawUDP()
        let client = try CoAPClient()
        let target = CoAPPeer(host: "::1", port: peer.port)
        async let outcome = attempt { try await client.request(.post, peer: target, path: "0", deadline: .seconds(2)) }
        let request = try XCTUnwrap(peer.receive(timeout: 5), "our request reached the peer")
        let mid = UInt16(request.bytes[2]) << 8 | UInt16(request.bytes[3])
        let tokenLength = Int(request.bytes[0] & 0x0F)
        XCTAssertGreaterThan(tokenLength, 0)
        // The empty ACK, then a separate 2.04 under a token that is not the request's.
        peer.send([0x60, 0x00, UInt8(mid >> 8), UInt8(mid & 0xFF)], to: request.port)
        peer.send(coapMessage(type: 0, code: 0x44, mid: 0x7777, token: [0xDE, 0xAD], payload: [1]), to: request.port)
        let reset = try XCTUnwrap(peer.receive(timeout: 5), "an answer to the wrong token")
        XCTAssertEqual(reset.bytes[0] >> 4 & 0x03, 3, "a reset")
        XCTAssertEqual(UInt16(reset.bytes[2]) << 8 | UInt16(reset.bytes[3]), 0x7777)
        let result = await outcome
        XCTAssertEqual(result.error, .deadlineExceeded)
        await client.close()
    }
}
