import CoAP
import Foundation
import TestSupport
import XCTest

/// Our server's separate answer on the wire, read by a bare socket: the empty ACK first (same
/// message id, no token), then the answer as a confirmable message with the request's token,
/// sent again until acknowledged.
final class CoAPSeparateWireTests: XCTestCase {
    func testSeparateAnswerIsAnEmptyACKThenAConfirmableResponse() async throws {
        let routes: [String: CoAPRoute] = [
            "1": .separate { incoming in
                try? await Task.sleep(for: .milliseconds(200))
                return CoAPResponse(code: .changed, payload: incoming.payload)
            }
        ]
        try await withServer(routes) { server in
            let controller = try RawUDP()
            let token: [UInt8] = [0xA1, 0xB2, 0xC3]
            controller.send(
                coapMessage(type: 0, code: 2, mid: 0x1234, token: token, options: [(11, [0x31])], payload: [0x77]),
                to: server.address.port)
            let ack = try XCTUnwrap(controller.receive(timeout: 5), "the empty ACK")
            XCTAssertEqual(ack.bytes, [0x60, 0x00, 0x12, 0x34], "an empty ACK of the request")
            let response = try XCTUnwrap(controller.receive(timeout: 5), "the separate response")
            XCTAssertEqual(response.bytes[0] >> 4 & 0x03, 0, "confirmable")
            XCTAssertEqual(Int(response.bytes[0] & 0x0F), token.count)
            XCTAssertEqual(response.bytes[1], CoAPCode.changed.rawValue)
            XCTAssertEqual(Array(response.bytes[4..<7]), token)
            XCTAssertEqual(Array(response.bytes.suffix(2)), [0xFF, 0x77])
            // Not acknowledged: libcoap sends it again (ACK_TIMEOUT 2 s to 3 s later).
            let again = try XCTUnwrap(controller.receive(timeout: 6), "the response retransmitted")
            XCTAssertEqual(again.bytes, response.bytes)
            controller.send([0x60, 0x00, response.bytes[2], response.bytes[3]], to: server.address.port)
            XCTAssertNil(controller.receive(timeout: 3.5), "acknowledged: not sent a third time")
        }
    }
}
