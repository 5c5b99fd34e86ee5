import Foundation
import HomeModel
import TestSupport
import Testing

@testable import Simulator

/// `run()` sleeps until the next step is due, or without a deadline when none is: a step
/// scheduled meanwhile for earlier must end that sleep (`wakeRunner`), or it would run late (at
/// the old deadline) or never.
@Suite struct RunnerWakeTests {
    static let yaml = """
        name: Locks
        bridged:
          - name: Slow Lock
            services:
              - type: lock-mechanism
                behaviour: { delay: 60 }
                characteristics: { current-lock-mechanism-state: secured, target-lock-mechanism-state: secured }
          - name: Quick Lock
            services:
              - type: lock-mechanism
                behaviour: { delay: 0.05 }
                characteristics: { current-lock-mechanism-state: secured, target-lock-mechanism-state: secured }
        """

    @Test(.timeLimit(.minutes(1))) func aStepScheduledWhileTheRunnerSleepsEndsTheSleep() async throws {
        let dir = try TemporaryDirectory()
        let home = try SimulatedHome.load(
            files: [try dir.write("locks.yml", Self.yaml)], clock: .system(tick: .milliseconds(10)))
        let slow = try #require(await home.accessory(named: "Slow Lock"))
        let quick = try #require(await home.accessory(named: "Quick Lock"))
        let quickTarget = try #require(quick.address(service: "lock-mechanism", characteristic: "lock-target-state"))
        let quickCurrent = try #require(quick.address(service: "lock-mechanism", characteristic: "lock-current-state"))
        let slowTarget = try #require(slow.address(service: "lock-mechanism", characteristic: "lock-target-state"))
        _ = await home.setNotifications(enabled: true, for: [quickCurrent])
        var events = home.events().makeAsyncIterator()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await home.run() }
            // Asleep without a deadline (nothing scheduled), then until the slow lock's step in 60 s.
            try await Task.sleep(for: .milliseconds(200))
            for (target, phase) in [(quickTarget, "no deadline"), (slowTarget, nil), (quickTarget, "a later deadline")]
            {
                let value: UInt64 = phase == "a later deadline" ? 1 : 0
                try await home.write(target, value: .uint(value))
                guard let phase else {
                    try await Task.sleep(for: .milliseconds(200))
                    continue
                }
                let started = ContinuousClock.now
                while let event = await events.next(), event != .valueUpdated(quickCurrent, .uint(value)) {}
                #expect(ContinuousClock.now - started < .seconds(5), "the runner slept on with \(phase)")
            }
            group.cancelAll()
            try await group.waitForAll()
        }
    }
}
