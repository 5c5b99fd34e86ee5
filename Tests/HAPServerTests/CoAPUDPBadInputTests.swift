import CoAP
import HAP
import HAPServer
import HAPThread
import TestSupport
import XCTest

/// Bad input to our accessory over real UDP while a controller holds a session: garbage
/// datagrams, messages with tokens and ids nobody sent, strangers' requests and a flood of
/// confirmables. The session keeps working: its reads are answered, its events arrive, and it
/// never has to verify again.
final class CoAPUDPBadInputTests: XCTestCase {
    static let uriPath: UInt16 = 11

    func testGarbageAndStrangersLeaveTheSessionWorking() async throws {
        let peers = try CoAPUDPPeers()
        let database = peers.database
        let brightness = database.iid("43", "8")
        try await peers.serve { served in
            let pairing = try await CoAPUDPPeers.pair(served.address)
            try await CoAPUDPPeers.withController(pairing, served.address) { c in
                let controller = c.controller
                _ = try await controller.attributeDatabase()
                try await controller.subscribe([brightness])
                let port = served.address.port

                // Datagrams that are not CoAP, or not well-formed CoAP.
                let raw = try RawUDP()
                let garbage: [[UInt8]] = [
                    [], [0xFF], Array(repeating: 0xA5, count: 64),
                    [0x00, 0x02, 0x00, 0x01], // version 0
                    [0x49, 0x02, 0x00, 0x02], // token length 9 (reserved)
                    [0x48, 0x02, 0x00, 0x03, 1, 2], // token cut short
                ]
                for bytes in garbage { raw.send(bytes, to: port) }
                // Well-formed, but answers to nothing: an ACK and a response with ids and a
                // token the accessory never sent.
                raw.send(coapMessage(type: 2, code: 0, mid: 0x7777, token: []), to: port)
                raw.send(coapMessage(type: 0, code: 0x45, mid: 0x7778, token: [9, 9, 9, 9]), to: port)
                // A stranger's encrypted request with no session: 4.04, as a separate answer
                // after an empty ACK, to the stranger alone.
                raw.send(
                    coapMessage(
                        type: 0, code: 2, mid: 0x0100, token: [0xC0, 0xFE], payload: Array(repeating: 7, count: 40)),
                    to: port)
                var answer: [UInt8]?
                while let datagram = raw.receive(timeout: 10) {
                    let bytes = datagram.bytes
                    if bytes.count >= 6, bytes[1] == CoAP.CoAPCode.notFound.rawValue, bytes[0] & 0x0F == 2,
                        Array(bytes[4..<6]) == [0xC0, 0xFE]
                    {
                        answer = bytes
                        break
                    }
                }
                XCTAssertNotNil(answer, "the stranger's request was answered 4.04")

                // Strangers through a CoAP client: garbage on each resource, a wrong method.
                let stranger = try CoAPClient()
                let base = "coap://[::1]:\(port)/"
                let none = try await stranger.request(.post, base, payload: [1, 2, 3], deadline: .seconds(10))
                XCTAssertEqual(none.code, .notFound)
                let setup = try await stranger.request(.post, base + "1", payload: [0xFF], deadline: .seconds(10))
                XCTAssertEqual(setup.code, .badRequest)
                let verify = try await stranger.request(.post, base + "2", payload: [0xFF], deadline: .seconds(10))
                XCTAssertEqual(verify.code, .badRequest)
                let get = try await stranger.request(.get, base, deadline: .seconds(10))
                XCTAssertEqual(get.code, .methodNotAllowed)
                let identify = try await stranger.request(.post, base + "0", deadline: .seconds(10))
                XCTAssertEqual(identify.code, CoAP.CoAPCode(4, 1), "a paired accessory identifies only to its own")
                let nowhere = try await stranger.request(.post, base + "9", deadline: .seconds(10))
                XCTAssertEqual(nowhere.code, .notFound)
                await stranger.close()

                // The session is untouched: reads, writes and events, on the first verify.
                let read = try await controller.read(brightness)
                XCTAssertEqual(read, .int(80))
                let reached = await database.set(brightness, .int(44))
                XCTAssertEqual(reached, 1)
                let event = await controller.nextEvent()
                XCTAssertEqual(event?.value, .int(44))
                let verifications = await controller.verifications
                XCTAssertEqual(verifications, 1)
                XCTAssertEqual(served.accessory.sessionCount, 1)
                XCTAssertEqual(served.accessory.pairings.map(\.id), [pairing.controllerPairingID])
            }
        }
    }

    /// 200 confirmable POSTs from one socket that never acknowledges an answer, and 50 at once
    /// from a stranger's client, under the server's limit of separate answers (256): each is
    /// answered 4.04, and the controller's reads and write in the middle of them are answered.
    func testAFloodOfConfirmablesLeavesTheSessionWorking() async throws {
        let peers = try CoAPUDPPeers()
        let database = peers.database
        let brightness = database.iid("43", "8")
        try await peers.serve { served in
            let pairing = try await CoAPUDPPeers.pair(served.address)
            try await CoAPUDPPeers.withController(pairing, served.address) { c in
                let controller = c.controller
                _ = try await controller.attributeDatabase()
                let port = served.address.port
                let flooder = try RawUDP()
                for mid in UInt16(0)..<200 {
                    flooder.send(
                        coapMessage(
                            type: 0, code: 2, mid: mid, token: [UInt8(mid & 0xFF), 0x5A], payload: [1, 2, 3]),
                        to: port)
                }
                let stranger = try CoAPClient()
                let codes = try await withThrowingTaskGroup(of: CoAP.CoAPCode.self) { group in
                    for n in 0..<50 {
                        group.addTask {
                            try await stranger.request(
                                .post, "coap://[::1]:\(port)/", payload: [UInt8(n)], deadline: .seconds(30)
                            ).code
                        }
                    }
                    for n in 0..<5 {
                        let value = try await controller.read(brightness)
                        XCTAssertEqual(value, .int(80), "read \(n)")
                    }
                    try await controller.write(brightness, .int(61))
                    var codes: [CoAP.CoAPCode] = []
                    for try await code in group { codes.append(code) }
                    return codes
                }
                XCTAssertEqual(codes, Array(repeating: .notFound, count: 50))
                XCTAssertEqual(database.value(brightness), .int(61))
                let read = try await controller.read(brightness)
                XCTAssertEqual(read, .int(61))
                let verifications = await controller.verifications
                XCTAssertEqual(verifications, 1)
                XCTAssertEqual(served.accessory.sessionCount, 1)
                await stranger.close()
            }
        }
    }
}
