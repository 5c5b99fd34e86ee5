import Foundation
import NIOCore
import NIOPosix
import Synchronization
import TestSupport
import XCTest

@testable import HAP

/// `ConnectRaceState`, input by input: who starts when, who wins, who is closed, what a lost
/// race reports.
final class ConnectRaceStateTests: XCTestCase {
    typealias Race = ConnectRaceState<String>

    func testTheFirstToConnectWinsAndTheTimerAfterItDoesNothing() {
        var race = Race(attempts: 3)
        XCTAssertEqual(describe(race.begin()), "start 0, timer")
        XCTAssertEqual(describe(race.connected(0, "a")), "win a, close []")
        XCTAssertEqual(describe(race.timerFired(for: 1)), "none")
        XCTAssertEqual(describe(race.cancel()), "none", "a decided race is not cancelled")
        XCTAssertFalse(race.isRunning(0))
    }

    func testAnAttemptStartedAfterTheStaggerCanWinAndTheOthersAreClosed() {
        var race = Race(attempts: 3)
        _ = race.begin()
        XCTAssertEqual(describe(race.timerFired(for: 1)), "start 1, timer")
        XCTAssertEqual(describe(race.timerFired(for: 2)), "start 2")
        XCTAssertTrue(race.isRunning(0) && race.isRunning(1) && race.isRunning(2))
        XCTAssertEqual(describe(race.connected(1, "b")), "win b, close [0, 2]")
        XCTAssertFalse(race.isRunning(0), "a loser's channel is refused from now on")
        // A loser that connects all the same is closed; one that fails changes nothing.
        XCTAssertEqual(describe(race.connected(0, "a")), "close 0")
        XCTAssertEqual(describe(race.failed(2, reason: "closed")), "none")
    }

    func testAFailureStartsTheNextAtOnceAndItsTimerThenDoesNothing() {
        var race = Race(attempts: 3)
        _ = race.begin()
        XCTAssertEqual(describe(race.failed(0, reason: "refused")), "start 1, timer")
        XCTAssertEqual(describe(race.timerFired(for: 1)), "none", "attempt 1 started already")
        XCTAssertEqual(describe(race.timerFired(for: 2)), "start 2")
        XCTAssertEqual(describe(race.connected(2, "c")), "win c, close [1]")
    }

    func testEveryAttemptFailingIsOneErrorWithEveryReasonInTheOrderTheyFailed() {
        var race = Race(attempts: 3)
        _ = race.begin()
        _ = race.timerFired(for: 1)
        _ = race.timerFired(for: 2)
        XCTAssertEqual(describe(race.failed(2, reason: "c refused")), "none", "0 and 1 are still out")
        XCTAssertEqual(describe(race.failed(0, reason: "a timed out")), "none")
        XCTAssertEqual(
            describe(race.failed(1, reason: "b unreachable")), "fail unreachable: c refused; a timed out; b unreachable"
        )
        XCTAssertEqual(describe(race.connected(1, "late")), "close 1", "nothing wins a lost race")
    }

    func testCancellingClosesEveryAttemptOut() {
        var race = Race(attempts: 3)
        _ = race.begin()
        _ = race.timerFired(for: 1)
        XCTAssertEqual(describe(race.cancel()), "cancel, close [0, 1]")
        XCTAssertEqual(describe(race.timerFired(for: 2)), "none", "no attempt starts after")
        XCTAssertEqual(describe(race.connected(0, "a")), "close 0")
        XCTAssertEqual(describe(race.failed(1, reason: "closed")), "none")
    }

    private func describe(_ action: Race.Action) -> String {
        switch action {
        case .start(let index, let armsTimer): "start \(index)" + (armsTimer ? ", timer" : "")
        case .win(let connection, let losers): "win \(connection), close \(losers)"
        case .close(let index): "close \(index)"
        case .fail(let error): "fail \(error.code.rawValue): \(error.message)"
        case .cancel(let losers): "cancel, close \(losers)"
        case .none: "none"
        }
    }
}

/// The driver (`ConnectRace`) with attempts of the test's own: a loser's socket is closed as
/// soon as another attempt wins, not when its own connect gives up.
final class ConnectRaceDriverTests: XCTestCase {
    func testALosersConnectIsClosedAtOnceWhenAnotherWins() async throws {
        // A connect to this port hangs (its SYNs are dropped) until its 10 s timeout.
        let listener = try SilentListener(dropsPackets: true)
        defer { listener.close() }
        let channels = Mutex<[any Channel]>([])
        let loop = MultiThreadedEventLoopGroup.singleton.any()
        let race = ConnectRace<String>(stagger: .milliseconds(100), attempts: 2, loop: loop) { index, register in
            guard index == 0 else { return loop.makeSucceededFuture("second") }
            return ClientBootstrap(group: loop)
                .connectTimeout(.seconds(10))
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try register(channel)
                        channels.withLock { $0.append(channel) }
                    }
                }
                .connect(host: "127.0.0.1", port: listener.port)
                .map { _ in "first" }
        }
        let started = ContinuousClock.now
        let outcome = await withCheckedContinuation { race.run($0) }
        XCTAssertEqual(try outcome.get(), "second")
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - started, .milliseconds(100), "the stagger was kept")
        let loser = try XCTUnwrap(channels.withLock { $0.first })
        let closing = ContinuousClock.now
        try? await loser.closeFuture.get()
        XCTAssertLessThan(ContinuousClock.now - closing, .seconds(2), "the losing connect was left to time out")
    }

    func testCancellingTheCallerEndsTheRaceAtOnce() async throws {
        let listener = try SilentListener(dropsPackets: true)
        defer { listener.close() }
        let started = ContinuousClock.now
        let attempt = Task {
            try await HAPConnection.connect(
                firstOf: ["127.0.0.1", "127.0.0.1"], port: listener.port, timeout: 10, stagger: 0.05)
        }
        try await Task.sleep(for: .milliseconds(300))
        attempt.cancel()
        do {
            let connection = try await attempt.value
            await connection.close()
            XCTFail("connected to a port that drops every SYN")
        } catch let error as HAPError {
            XCTAssertEqual(error.code, .cancelled)
        }
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(3))
    }
}
