import CoAP
import Foundation
import ServiceLifecycle
import Synchronization
import TestSupport
import XCTest

/// Runs a server on ::1 (a free port) while `body` runs, then cancels its `run()` and waits.
func withServer<T: Sendable>(
    _ routes: [String: CoAPRoute], _ body: @Sendable (CoAPServer) async throws -> T
) async throws -> T {
    let server = try CoAPServer(bind: CoAPPeer(host: "::1", port: 0), routes: routes)
    return try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await server.run() }
        defer { group.cancelAll() }
        return try await body(server)
    }
}

/// Short retransmission for tests that need a request to fail for want of an ACK: the first
/// wait exactly 1 s (libcoap's least; random factor 1), one retransmission after 2 s more, so
/// libcoap gives up after 3 s.
let impatient: CoAPTransmission = {
    var transmission = CoAPTransmission()
    transmission.ackTimeout = 1
    transmission.ackRandomFactor = 1
    transmission.maxRetransmit = 1
    return transmission
}()

/// Our client against our server in one process (the fast tier; the aiocoap tests hold both
/// to an independent implementation).
final class CoAPInProcessTests: XCTestCase {
    func testPiggybackedAnswerCarriesTheRoutesCodeAndPayload() async throws {
        let routes: [String: CoAPRoute] = [
            "0": .immediate { CoAPResponse(code: .changed, payload: $0.payload.reversed()) }
        ]
        try await withServer(routes) { server in
            let client = try CoAPClient()
            let answer = try await client.request(.post, "coap://[::1]:\(server.address.port)/0", payload: [1, 2, 3])
            XCTAssertEqual(answer, CoAPResponse(code: .changed, payload: [3, 2, 1]))
            await client.close()
        }
    }

    /// The handler outlasts the client's whole retransmission budget (3 s): only the empty
    /// ACK sent at once keeps the client waiting for the separate answer.
    func testSlowHandlerIsAnsweredSeparately() async throws {
        let calls = Mutex(0)
        let routes: [String: CoAPRoute] = [
            "1": .separate { incoming in
                calls.withLock { $0 += 1 }
                try? await Task.sleep(for: .seconds(3.5))
                return CoAPResponse(code: .changed, payload: Array("late:".utf8) + incoming.payload)
            }
        ]
        try await withServer(routes) { server in
            var configuration = CoAPClient.Configuration()
            configuration.transmission = impatient
            let client = try CoAPClient(configuration: configuration)
            let answer = try await client.request(
                .post, "coap://[::1]:\(server.address.port)/1", payload: [7], deadline: .seconds(20))
            XCTAssertEqual(answer, CoAPResponse(code: .changed, payload: Array("late:".utf8) + [7]))
            XCTAssertEqual(
                calls.withLock { $0 }, 1, "the request was handled once (the empty ACK stopped retransmission)")
            await client.close()
        }
    }

    /// Large answers, piggybacked or separate, go by Block2 and arrive whole.
    func testLargeAnswerArrivesWholeByBlock2() async throws {
        let routes: [String: CoAPRoute] = [
            "": .immediate { _ in CoAPResponse(code: .content, payload: bigBody) },
            "1": .separate { _ in CoAPResponse(code: .content, payload: bigBody) },
        ]
        try await withServer(routes) { server in
            let client = try CoAPClient()
            for path in ["", "1"] {
                let answer = try await client.request(
                    .post, "coap://[::1]:\(server.address.port)/\(path)", payload: [1])
                XCTAssertEqual(answer.code, .content, "/\(path)")
                XCTAssertEqual(answer.payload.count, bigBody.count, "/\(path)")
                XCTAssertEqual(answer.payload, bigBody, "/\(path)")
            }
            await client.close()
        }
    }

    /// A request body larger than a PDU goes by Block1; the route sees it whole.
    func testLargeRequestArrivesWholeByBlock1() async throws {
        let routes: [String: CoAPRoute] = [
            "0": .immediate { CoAPResponse(code: .changed, payload: Array("\($0.payload == bigBody)".utf8)) }
        ]
        try await withServer(routes) { server in
            let client = try CoAPClient()
            let answer = try await client.request(.post, "coap://[::1]:\(server.address.port)/0", payload: bigBody)
            XCTAssertEqual(answer, CoAPResponse(code: .changed, payload: Array("true".utf8)))
            await client.close()
        }
    }

    func testIPv4ServerAndClient() async throws {
        let server = try CoAPServer(
            bind: CoAPPeer(host: "127.0.0.1", port: 0),
            routes: ["0": .immediate { CoAPResponse(code: .changed, payload: Array($0.peer.host.utf8)) }])
        let client = try CoAPClient()
        let answer = try await client.request(.post, "coap://127.0.0.1:\(server.address.port)/0")
        XCTAssertEqual(answer, CoAPResponse(code: .changed, payload: Array("127.0.0.1".utf8)))
        await client.close()
    }

    func testUnknownPathIsNotFound() async throws {
        try await withServer(["0": .immediate { _ in CoAPResponse(code: .changed) }]) { server in
            let client = try CoAPClient()
            let answer = try await client.request(.post, "coap://[::1]:\(server.address.port)/9")
            XCTAssertEqual(answer.code, .notFound)
            await client.close()
        }
    }

    /// An accessory's event: the server PUTs to the controller that wrote to it, from its own
    /// port, and the client answers 2.04 and hands the event over.
    func testServerEventPutReachesTheClientThatWroteToIt() async throws {
        let writer = Mutex<CoAPPeer?>(nil)
        let routes: [String: CoAPRoute] = [
            "0": .immediate { incoming in
                writer.withLock { $0 = incoming.peer }
                return CoAPResponse(code: .changed)
            }
        ]
        try await withServer(routes) { server in
            var configuration = CoAPClient.Configuration()
            configuration.eventPaths = ["ev": .changed]
            let client = try CoAPClient(configuration: configuration)
            _ = try await client.request(.post, peer: CoAPPeer(host: "::1", port: server.address.port), path: "0")
            let controller = try XCTUnwrap(writer.withLock { $0 })
            let answer = try await server.request(.put, peer: controller, path: "ev", payload: [0xE1])
            XCTAssertEqual(answer.code, .changed)
            var events = client.events.makeAsyncIterator()
            let event = await events.next()
            XCTAssertEqual(event?.path, "ev")
            XCTAssertEqual(event?.method, .put)
            XCTAssertEqual(event?.payload, [0xE1])
            XCTAssertEqual(event?.peer.port, server.address.port)
            await client.close()
        }
    }

    func testSeveralRequestsInFlightEachGetTheirOwnAnswer() async throws {
        let routes: [String: CoAPRoute] = [
            "2": .separate { incoming in
                try? await Task.sleep(for: .milliseconds(Int(incoming.payload[0]) * 10))
                return CoAPResponse(code: .changed, payload: incoming.payload)
            }
        ]
        try await withServer(routes) { server in
            let client = try CoAPClient()
            let peer = CoAPPeer(host: "::1", port: server.address.port)
            let answers = try await withThrowingTaskGroup(of: (UInt8, CoAPResponse).self) { group in
                for index in UInt8(0)..<12 {
                    group.addTask {
                        (index, try await client.request(.post, peer: peer, path: "2", payload: [11 - index]))
                    }
                }
                var answers: [UInt8: CoAPResponse] = [:]
                for try await (index, answer) in group { answers[index] = answer }
                return answers
            }
            XCTAssertEqual(answers.count, 12)
            for (index, answer) in answers { XCTAssertEqual(answer.payload, [11 - index]) }
            await client.close()
        }
    }

    func testDeadlineEndsTheWaitWithATypedError() async throws {
        let routes: [String: CoAPRoute] = [
            "1": .separate { _ in
                try? await Task.sleep(for: .seconds(30))
                return CoAPResponse(code: .changed)
            }
        ]
        try await withServer(routes) { server in
            let client = try CoAPClient()
            let start = ContinuousClock.now
            let outcome = await attempt {
                try await client.request(.post, "coap://[::1]:\(server.address.port)/1", deadline: .milliseconds(300))
            }
            XCTAssertEqual(outcome.error, .deadlineExceeded)
            XCTAssertLessThan(ContinuousClock.now - start, .seconds(3))
            await client.close()
        }
    }

    func testCancellationAndCloseEndTheWait() async throws {
        let started = Mutex(0)
        let routes: [String: CoAPRoute] = [
            "1": .separate { _ in
                started.withLock { $0 += 1 }
                try? await Task.sleep(for: .seconds(30))
                return CoAPResponse(code: .changed)
            }
        ]
        try await withServer(routes) { server in
            let client = try CoAPClient()
            let uri = "coap://[::1]:\(server.address.port)/1"
            let waiting = Task { await attempt { try await client.request(.post, uri) } }
            try await waitUntil("the handler to start") { started.withLock { $0 } == 1 }
            waiting.cancel()
            let cancelled = await waiting.value
            XCTAssertEqual(cancelled.error, .cancelled)

            let closing = Task { await attempt { try await client.request(.post, uri) } }
            try await waitUntil("the second request's handler to start") { started.withLock { $0 } == 2 }
            await client.close()
            let closed = await closing.value
            XCTAssertEqual(closed.error, .closed)
        }
    }

    /// A graceful shutdown ends `run()` and frees the port (bound again at once).
    func testGracefulShutdownStopsTheServerAndFreesItsPort() async throws {
        let server = try CoAPServer(
            bind: CoAPPeer(host: "::1", port: 0), routes: ["0": .immediate { _ in CoAPResponse(code: .changed) }])
        let port = server.address.port
        let group = ServiceGroup(
            configuration: .init(services: [server], logger: .init(label: "test")))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            let client = try CoAPClient()
            let answer = try await client.request(.post, "coap://[::1]:\(port)/0")
            XCTAssertEqual(answer.code, .changed)
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
            await client.close()
        }
        let again = try CoAPServer(bind: CoAPPeer(host: "::1", port: port), routes: [:])
        XCTAssertEqual(again.address.port, port)
    }
}

/// A request's outcome as a value, for assertions on its typed error.
/// (Closures' typed throws are not inferred: the body throws untyped, and anything other than a
/// `CoAPError` is a test failure.)
func attempt(_ body: () async throws -> CoAPResponse) async -> Result<CoAPResponse, CoAPError> {
    do { return .success(try await body()) } catch let error as CoAPError { return .failure(error) } catch {
        XCTFail("not a CoAPError: \(error)")
        return .failure(.closed)
    }
}

extension Result {
    var error: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
