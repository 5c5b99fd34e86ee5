import HomeModel
import XCTest

@testable import HAPServer

/// Who hears of a change: the verified sessions subscribed to it, except the one whose write
/// made it.
final class EventFanOutTests: XCTestCase {
    let on = HAPCharacteristicID(aid: 2, iid: 9)
    let brightness = HAPCharacteristicID(aid: 2, iid: 10)

    final class Session: Sendable {
        let stream: AsyncStream<ConnectionInput>
        let continuation: AsyncStream<ConnectionInput>.Continuation
        init() { (stream, continuation) = AsyncStream.makeStream(of: ConnectionInput.self) }

        /// What was queued so far (the stream is finished to read it).
        func drain() async -> [String] {
            continuation.finish()
            var out: [String] = []
            for await item in stream {
                switch item {
                case .events(let events):
                    out.append(events.map { "\($0.id)=\($0.value.encoded())" }.joined(separator: ","))
                case .close(let reason): out.append("close: \(reason)")
                default: out.append("other")
                }
            }
            return out
        }
    }

    func testEventsGoToSubscribedVerifiedSessionsButNotToTheirCause() async {
        let registry = SessionRegistry(limit: 8)
        let sessions = (0..<4).map { _ in Session() }
        for (n, s) in sessions.enumerated() { XCTAssertTrue(registry.register(UInt64(n), input: s.continuation)) }
        registry.verified(0, controller: "a")
        registry.verified(1, controller: "b")
        registry.verified(2, controller: "a")
        // Session 3 never verified: subscribed or not, it hears nothing.
        for n in 0..<4 { registry.subscribe(UInt64(n), to: on, true) }
        registry.subscribe(2, to: on, false)
        registry.subscribe(2, to: brightness, true)

        // Session 0 wrote On: session 1 hears of it; 2 is not subscribed to On, 3 not verified.
        XCTAssertEqual(registry.notify([HAPValueChange(id: on, value: .bool(true))], cause: 0), 1)
        // A change from the accessory (no cause), of both: each hears what it subscribed to.
        XCTAssertEqual(
            registry.notify(
                [HAPValueChange(id: on, value: .bool(false)), HAPValueChange(id: brightness, value: .int(3))],
                cause: nil), 3)
        registry.close(controller: "a", reason: "removed")

        let heard = await withTaskGroup(of: (Int, [String]).self) { group in
            for (n, s) in sessions.enumerated() { group.addTask { (n, await s.drain()) } }
            var out: [Int: [String]] = [:]
            for await (n, h) in group { out[n] = h }
            return out
        }
        XCTAssertEqual(heard[0], ["2.9=false", "close: removed"])
        XCTAssertEqual(heard[1], ["2.9=true", "2.9=false"])
        XCTAssertEqual(heard[2], ["2.10=3", "close: removed"])
        XCTAssertEqual(heard[3], [])
    }

    /// At the limit with every session verified, a new connection is refused; a slot that frees
    /// up takes it.
    func testTheLimitRefusesConnectionsBeyondIt() {
        let registry = SessionRegistry(limit: 8)
        let sessions = (0..<9).map { _ in Session() }
        for n in 0..<8 {
            XCTAssertTrue(registry.register(UInt64(n), input: sessions[n].continuation))
            registry.verified(UInt64(n), controller: "c\(n)")
        }
        XCTAssertFalse(registry.register(8, input: sessions[8].continuation))
        registry.unregister(3)
        XCTAssertTrue(registry.register(8, input: sessions[8].continuation))
        XCTAssertEqual(registry.count, 8)
    }

    /// At the limit, a new connection closes the oldest one not past pair-verify: strangers that
    /// never verify cannot keep a paired controller out, and verified sessions are never the ones
    /// closed.
    func testAtTheLimitTheOldestUnverifiedConnectionMakesRoom() async {
        let registry = SessionRegistry(limit: 8)
        let sessions = (0..<11).map { _ in Session() }
        for n in 0..<8 { XCTAssertTrue(registry.register(UInt64(n), input: sessions[n].continuation)) }
        // 0 and 2 are paired controllers' sessions; the others strangers.
        registry.verified(0, controller: "a")
        registry.verified(2, controller: "b")
        for n in 8..<11 { XCTAssertTrue(registry.register(UInt64(n), input: sessions[n].continuation)) }
        XCTAssertEqual(registry.count, 8)
        XCTAssertEqual(registry.verifiedCount, 2)

        let closed = await withTaskGroup(of: (Int, [String]).self) { group in
            for (n, s) in sessions.enumerated() { group.addTask { (n, await s.drain()) } }
            var out: [Int: [String]] = [:]
            for await (n, h) in group { out[n] = h }
            return out
        }
        // The three oldest strangers, 1, 3 and 4, made room; no one else was touched.
        let reason = "close: making room: 8 connections are open, this one is not verified"
        for n in [1, 3, 4] { XCTAssertEqual(closed[n], [reason], "\(n)") }
        for n in [0, 2, 5, 6, 7, 8, 9, 10] { XCTAssertEqual(closed[n], [], "\(n)") }
    }
}
