import CoAP
import Foundation
import Synchronization
import TestSupport
import XCTest

/// Our client and server against aiocoap, a CoAP implementation independent of libcoap.
final class CoAPAiocoapTests: XCTestCase {
    // MARK: Our client, aiocoap's server

    func testPiggybackedAnswerFromAiocoap() async throws {
        let peer = try await CoAPTestPeer(["server"])
        let client = try CoAPClient()
        let answer = try await client.request(.post, "coap://[::1]:\(peer.port)/piggy", payload: Array("hi".utf8))
        XCTAssertEqual(answer, CoAPResponse(code: .content, payload: Array("piggy:hi".utf8)))
        await client.close()
    }

    /// aiocoap answers /slow after 3.5 s with an empty ACK first; our retransmission budget is
    /// 3 s, so only the empty ACK keeps the request alive, and aiocoap saw it once.
    func testSeparateAnswerFromAiocoap() async throws {
        let peer = try await CoAPTestPeer(["server"])
        var configuration = CoAPClient.Configuration()
        configuration.transmission = impatient
        let client = try CoAPClient(configuration: configuration)
        let answer = try await client.request(
            .post, "coap://[::1]:\(peer.port)/slow", payload: [0x2A], deadline: .seconds(20))
        XCTAssertEqual(answer, CoAPResponse(code: .changed, payload: Array("slow:".utf8) + [0x2A]))
        XCTAssertEqual(peer.lines("slow-request").count, 1)
        await client.close()
    }

    func testBlock2AnswerFromAiocoapIsReassembled() async throws {
        let peer = try await CoAPTestPeer(["server"])
        let client = try CoAPClient()
        for method in [CoAPMethod.get, .post] {
            let answer = try await client.request(method, "coap://[::1]:\(peer.port)/big")
            XCTAssertEqual(answer.code, .content, "\(method)")
            XCTAssertEqual(answer.payload.count, bigBody.count, "\(method)")
            XCTAssertEqual(answer.payload, bigBody, "\(method)")
        }
        await client.close()
    }

    /// The first block in a separate response (an empty ACK first): the case libcoap 4.3.1's
    /// own client loses, which is why the client asks for blocks itself.
    func testBlock2AnswerInASeparateResponseFromAiocoapIsReassembled() async throws {
        let peer = try await CoAPTestPeer(["server"])
        let client = try CoAPClient()
        let answer = try await client.request(.post, "coap://[::1]:\(peer.port)/slowbig", payload: [1])
        XCTAssertEqual(answer.code, .content)
        XCTAssertEqual(answer.payload.count, bigBody.count)
        XCTAssertEqual(answer.payload, bigBody)
        await client.close()
    }

    func testLargeRequestBodyReachesAiocoapByBlock1() async throws {
        let peer = try await CoAPTestPeer(["server"])
        let client = try CoAPClient()
        let answer = try await client.request(.post, "coap://[::1]:\(peer.port)/count", payload: bigBody)
        XCTAssertEqual(answer.code, .changed)
        XCTAssertEqual(String(decoding: answer.payload, as: UTF8.self), "5000 \(sha256Hex(bigBody))")
        await client.close()
    }

    func testSeveralRequestsInFlightToAiocoap() async throws {
        let peer = try await CoAPTestPeer(["server"])
        let client = try CoAPClient()
        let target = CoAPPeer(host: "::1", port: peer.port)
        let answers = try await withThrowingTaskGroup(of: (UInt8, CoAPResponse).self) { group in
            for index in UInt8(0)..<8 {
                group.addTask {
                    (index, try await client.request(.post, peer: target, path: "piggy", payload: [index]))
                }
            }
            var answers: [UInt8: CoAPResponse] = [:]
            for try await (index, answer) in group { answers[index] = answer }
            return answers
        }
        XCTAssertEqual(answers.count, 8)
        for (index, answer) in answers { XCTAssertEqual(answer.payload, Array("piggy:".utf8) + [index]) }
        await client.close()
    }

    /// A peer that never answers: libcoap sends the CON 1 + MAX_RETRANSMIT times (the peer
    /// counts them), then the request fails with `.noAcknowledgement`; a shorter deadline
    /// fails it first with `.deadlineExceeded`.
    func testSilentPeerRetransmissionsThenTimeout() async throws {
        let peer = try await CoAPTestPeer(["blackhole"])
        var configuration = CoAPClient.Configuration()
        configuration.transmission = impatient
        let client = try CoAPClient(configuration: configuration)
        let target = CoAPPeer(host: "::1", port: peer.port)
        let start = ContinuousClock.now
        let unacknowledged = await attempt {
            try await client.request(.post, peer: target, path: "x", deadline: .seconds(20))
        }
        XCTAssertEqual(unacknowledged.error, .noAcknowledgement)
        // 1 s, then 2 s: the request gives up after 3 s (and well before its deadline).
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - start, .milliseconds(2900))
        XCTAssertLessThan(ContinuousClock.now - start, .seconds(10))
        try await peer.waitForLines("datagram ", count: 2)
        let sent = peer.lines("datagram ")
        XCTAssertEqual(sent.count, 2, "the CON and one retransmission")
        XCTAssertEqual(Set(sent).count, 1, "retransmissions keep the message id")

        let deadline = await attempt {
            try await client.request(.post, peer: target, path: "x", deadline: .milliseconds(100))
        }
        XCTAssertEqual(deadline.error, .deadlineExceeded)
        await client.close()
    }

    /// The peer drops the first reception of the CON and answers the retransmission.
    func testRetransmissionIsAnsweredAfterTheFirstCONWasDropped() async throws {
        let peer = try await CoAPTestPeer(["dropfirst"])
        var configuration = CoAPClient.Configuration()
        configuration.transmission = impatient
        let client = try CoAPClient(configuration: configuration)
        let answer = try await client.request(.post, "coap://[::1]:\(peer.port)/x", payload: [1])
        XCTAssertEqual(answer, CoAPResponse(code: .content, payload: Array("second".utf8)))
        let receptions = peer.lines("datagram ")
        XCTAssertEqual(receptions.count, 2)
        XCTAssertEqual(Set(receptions).count, 1, "the same message twice")
        await client.close()
    }

    // MARK: aiocoap's client, our server

    func testAiocoapClientGetsPiggybackedSeparateAndBlock2Answers() async throws {
        let routes: [String: CoAPRoute] = [
            "0": .immediate { CoAPResponse(code: .changed, payload: $0.payload.reversed()) },
            "1": .separate { incoming in
                try? await Task.sleep(for: .seconds(1))
                return CoAPResponse(code: .changed, payload: incoming.payload + incoming.payload)
            },
            "": .immediate { _ in CoAPResponse(code: .content, payload: bigBody) },
        ]
        try await withServer(routes) { server in
            let base = "coap://[::1]:\(server.address.port)"
            let piggybacked = try await CoAPTestPeer.client("POST", "\(base)/0", payload: [1, 2, 3])
            XCTAssertEqual(piggybacked, "answer 2.04 3 \(sha256Hex([3, 2, 1]))")
            let separate = try await CoAPTestPeer.client("POST", "\(base)/1", payload: [9])
            XCTAssertEqual(separate, "answer 2.04 2 \(sha256Hex([9, 9]))")
            let large = try await CoAPTestPeer.client("POST", "\(base)/", payload: [1])
            XCTAssertEqual(large, "answer 2.05 5000 \(sha256Hex(bigBody))")
            let missing = try await CoAPTestPeer.client("POST", "\(base)/7")
            XCTAssertTrue(missing.hasPrefix("answer 4.04 "), missing)
        }
    }

    /// aiocoap's PUT to a client's listening endpoint: answered with the path's code (2.03
    /// here), handed over on `events`.
    func testClientReceivesAiocoapsEventPutOnItsListeningPort() async throws {
        try CoAPTestPeer.requireVenv()
        var configuration = CoAPClient.Configuration()
        configuration.listen = CoAPPeer(host: "::1", port: 0)
        configuration.eventPaths = ["ev": .valid]
        let client = try CoAPClient(configuration: configuration)
        let port = try XCTUnwrap(client.listening?.port)
        let answer = try await CoAPTestPeer.client("PUT", "coap://[::1]:\(port)/ev", payload: [0xBE, 0xEF])
        XCTAssertEqual(answer, "answer 2.03 0 \(sha256Hex([]))")
        var events = client.events.makeAsyncIterator()
        let event = await events.next()
        XCTAssertEqual(event?.path, "ev")
        XCTAssertEqual(event?.method, .put)
        XCTAssertEqual(event?.payload, [0xBE, 0xEF])
        XCTAssertEqual(event?.peer.host, "::1")
        await client.close()
    }

    /// Our server's event PUT, received by aiocoap.
    func testAiocoapReceivesOurEventPut() async throws {
        let peer = try await CoAPTestPeer(["events"])
        try await withServer([:]) { server in
            let answer = try await server.request(
                .put, peer: CoAPPeer(host: "::1", port: peer.port), path: "ev", payload: [0xCA, 0xFE])
            XCTAssertEqual(answer.code, .changed)
            XCTAssertEqual(peer.lines("event "), ["event ev cafe"])
        }
    }
}
