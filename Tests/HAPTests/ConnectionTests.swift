import Foundation
import HomeModel
import NIOCore
import TestSupport
import XCTest

@testable import HAP

/// The connection's request life cycle against an accessory that accepts and never answers.
final class ConnectionTests: XCTestCase {
    /// A request whose task is cancelled fails at once with `cancelled`, and the connection
    /// closes (an answer arriving later would be taken for the next request's).
    func testACancelledRequestFailsAtOnceAndClosesTheConnection() async throws {
        let listener = try SilentListener(dropsPackets: false)
        defer { listener.close() }
        let connection = try await HAPConnection.connect(host: "127.0.0.1", port: listener.port)
        let request = Task { try await connection.request("GET", "/accessories") }
        try await Task.sleep(for: .milliseconds(200))
        let start = ContinuousClock.now
        await cancelAndExpectCancelled(request)
        XCTAssertLessThan(ContinuousClock.now - start, .seconds(2))
        let isOpen = await connection.isOpen
        XCTAssertFalse(isOpen)
        do {
            _ = try await connection.request("GET", "/accessories")
            XCTFail("a closed connection sent a request")
        } catch {
            XCTAssertEqual(error.code, .cancelled, "later requests fail with the reason the connection closed")
        }
    }

    /// The same from a caller on the connection's own event loop, which waits for the answer
    /// without leaving the loop.
    func testACancelledRequestFromTheConnectionsLoopFailsAtOnce() async throws {
        let listener = try SilentListener(dropsPackets: false)
        defer { listener.close() }
        let connection = try await HAPConnection.connect(host: "127.0.0.1", port: listener.port)
        let caller = LoopCaller(connection.eventLoop)
        let request = Task { try await caller.request(connection) }
        try await Task.sleep(for: .milliseconds(200))
        await cancelAndExpectCancelled(request)
        let isOpen = await connection.isOpen
        XCTAssertFalse(isOpen)
    }

    /// Cancels a request nobody answers: it must fail with `cancelled`, not return.
    private func cancelAndExpectCancelled<T: Sendable>(_ request: Task<T, any Error>) async {
        request.cancel()
        do {
            _ = try await request.value
            XCTFail("a request nobody answers returned")
        } catch let error as HAPError {
            XCTAssertEqual(error.code, .cancelled)
        } catch {
            XCTFail("expected cancelled, got \(error)")
        }
    }

    /// A request waiting for its answer fails with `closed` when the connection closes.
    func testAWaitingRequestFailsWhenTheConnectionCloses() async throws {
        let listener = try SilentListener(dropsPackets: false)
        let connection = try await HAPConnection.connect(host: "127.0.0.1", port: listener.port)
        let request = Task { try await connection.request("GET", "/accessories") }
        try await Task.sleep(for: .milliseconds(200))
        listener.close()
        await connection.close()
        do {
            _ = try await request.value
            XCTFail("a request on a closed connection returned")
        } catch let error as HAPError {
            XCTAssertEqual(error.code, .closed)
        }
    }
}

/// The write body, written straight to bytes, is what the document it stands for encodes to.
/// `connect(firstOf:)`: the first address that answers, the next tried at once when one is
/// refused, and every reason when none answers.
final class ConnectRaceTests: XCTestCase {
    func testARefusedAddressStartsTheNextAttemptAtOnce() async throws {
        // Listening on 127.0.0.1 only: 127.0.0.2 refuses the same port at once.
        let listener = try SilentListener(dropsPackets: false)
        let started = ContinuousClock.now
        let connection = try await HAPConnection.connect(
            firstOf: ["127.0.0.2", "127.0.0.1"], port: listener.port, timeout: 5, stagger: 10)
        XCTAssertEqual(connection.host, "127.0.0.1")
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(5), "waited for the stagger")
        await connection.close()
    }

    func testNoAddressAnsweringIsOneErrorWithEveryReason() async throws {
        let listener = try SilentListener(dropsPackets: false)
        do {
            let connection = try await HAPConnection.connect(
                firstOf: ["127.0.0.2", "127.0.0.3"], port: listener.port, timeout: 5, stagger: 10)
            await connection.close()
            XCTFail("connected to \(connection.host)")
        } catch {
            XCTAssertEqual(error.code, .unreachable)
            XCTAssertTrue(error.message.contains("127.0.0.2") && error.message.contains("127.0.0.3"), error.message)
        }
        do {
            _ = try await HAPConnection.connect(firstOf: [], port: listener.port)
            XCTFail("connected to no address")
        } catch {
            XCTAssertEqual(error.code, .unreachable)
        }
    }
}

final class WriteBodyTests: XCTestCase {
    func testWriteBodyIsTheDocumentsEncoding() {
        let cases: [([HAPCharacteristicID: [String: JSONValue]], UInt64?)] = [
            ([HAPCharacteristicID(aid: 1, iid: 10): ["value": .int(50)]], nil),
            ([HAPCharacteristicID(aid: 1, iid: 10): ["value": .double(21.0)]], 77),
            (
                [
                    HAPCharacteristicID(aid: 2, iid: 9): ["ev": .bool(true)],
                    HAPCharacteristicID(aid: 1, iid: 12): ["ev": .bool(false)],
                    HAPCharacteristicID(aid: 1, iid: 3): ["value": .string("a/b \"q\" \u{1}é"), "r": .bool(true)],
                ], nil
            ),
            ([HAPCharacteristicID(aid: 3, iid: 4): ["value": .uint(UInt64.max), "aid": .int(9)]], 1),
        ]
        for (items, pid) in cases {
            var body: [String: JSONValue] = [
                "characteristics": .array(
                    items.sorted { $0.key < $1.key }.map { id, fields in
                        var o = fields
                        o["aid"] = .uint(id.aid)
                        o["iid"] = .uint(id.iid)
                        return .object(o)
                    })
            ]
            if let pid { body["pid"] = .uint(pid) }
            XCTAssertEqual(
                String(decoding: HAPConnection.writeBody(items, pid: pid), as: UTF8.self),
                JSONValue.object(body).encoded(wholeDoublesAsIntegers: true))
        }
    }
}

/// An actor on a connection's event loop: its calls reach the connection without a thread switch.
private actor LoopCaller {
    let loop: any EventLoop
    nonisolated var unownedExecutor: UnownedSerialExecutor { loop.executor.asUnownedSerialExecutor() }
    init(_ loop: any EventLoop) { self.loop = loop }

    func request(_ connection: HAPConnection) async throws(HAPError) -> HAPHTTPMessage {
        try await connection.request("GET", "/accessories")
    }
}
