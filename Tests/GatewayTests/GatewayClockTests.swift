import Foundation
import Gateway
import TestSupport
import XCTest

/// The manual clock the timer tests move: a sleeper wakes when time reaches its deadline and not
/// before, in deadline order, and a cancelled one ends at once.
final class GatewayClockTests: XCTestCase {
    func testSleepersWakeWhenTimeReachesTheirDeadlineInOrder() async throws {
        let manual = ManualGatewayClock()
        let clock = GatewayClock.manual(manual)
        let start = clock.now
        let woke = Woke()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (name, after) in [("late", 300), ("early", 100), ("middle", 200)] {
                group.addTask {
                    try await clock.sleep(until: start + .milliseconds(after))
                    woke.append(name)
                }
            }
            try await waitUntil("three asleep") { manual.sleepers == 3 }
            manual.advance(by: .milliseconds(99))
            XCTAssertEqual(manual.sleepers, 3, "woken before its deadline")
            manual.advance(by: .milliseconds(101))
            try await waitUntil("two awake") { woke.names.count == 2 }
            XCTAssertEqual(manual.sleepers, 1)
            manual.advance(by: .milliseconds(100))
            try await group.waitForAll()
        }
        XCTAssertEqual(Set(woke.names), ["early", "middle", "late"])
        XCTAssertEqual(clock.now - start, .milliseconds(300))
    }

    func testASleepWhoseDeadlinePassedReturnsAtOnce() async throws {
        let manual = ManualGatewayClock()
        let clock = GatewayClock.manual(manual)
        let deadline = clock.now + .seconds(1)
        manual.advance(by: .seconds(2))
        try await clock.sleep(until: deadline)
        XCTAssertEqual(manual.sleepers, 0)
    }

    func testACancelledSleeperEndsAtOnceAndLeavesNothingBehind() async throws {
        let manual = ManualGatewayClock()
        let clock = GatewayClock.manual(manual)
        let sleeper = Task { try await clock.sleep(for: .seconds(3600)) }
        try await waitUntil("asleep") { manual.sleepers == 1 }
        sleeper.cancel()
        let result = await sleeper.result
        XCTAssertThrowsError(try result.get()) { XCTAssertTrue($0 is CancellationError, "\($0)") }
        XCTAssertEqual(manual.sleepers, 0)
        // Cancelled before it began: it never registers.
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await clock.sleep(for: .seconds(1))
        }
        let earlyResult = await early.result
        XCTAssertThrowsError(try earlyResult.get())
        XCTAssertEqual(manual.sleepers, 0)
    }

    func testTheContinuousClockSleepsInRealTime() async throws {
        let clock = GatewayClock.continuous
        let before = ContinuousClock.now
        try await clock.sleep(for: .milliseconds(20))
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - before, .milliseconds(20))
    }
}

private final class Woke: @unchecked Sendable {
    private let lock = NSLock()
    private var list: [String] = []
    func append(_ name: String) { lock.withLock { list.append(name) } }
    var names: [String] { lock.withLock { list } }
}
