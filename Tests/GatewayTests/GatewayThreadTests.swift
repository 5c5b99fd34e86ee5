import Foundation
import Synchronization
import MQTT
import XCTest

@testable import Gateway

/// The gateway's executor: its jobs run on its own thread, on a borrowing thread while lent
/// (as the MQTT client's network thread borrows it), woken for work that comes while the
/// borrower waits, and on its own thread again once given back.
/// The system's name of the thread running the caller (for synchronous code).
private func currentThreadName() -> String {
    ThreadName.current
}

final class GatewayThreadTests: XCTestCase {
    /// The name of the thread a task preferring `executor` runs on.
    private func threadName(on executor: GatewayThread) async -> String {
        await withTaskExecutorPreference(executor) { currentThreadName() }
    }

    /// Runs a job on `executor` until one runs on the borrower (at most 100 tries, each
    /// after more than `keepAfterHandBack`); the last thread's name.
    private func borrowerEventually(_ executor: GatewayThread) async throws -> String {
        var name = ""
        for _ in 0..<100 where name != "borrower" {
            try await Task.sleep(for: GatewayThread.keepAfterHandBack * 2)
            name = await threadName(on: executor)
        }
        return name
    }

    func testJobsRunOnTheBorrowerWhileLentAndOnTheirOwnThreadAfter() async throws {
        let executor = GatewayThread(name: "gw-under-test")
        let name = await threadName(on: executor)
        XCTAssertEqual(name, "gw-under-test")

        let wakes = Atomic<Int>(0)
        let stop = Atomic<Bool>(false)
        let wakeSignal = DispatchSemaphore(value: 0)
        executor.attach(wake: {
            wakes.add(1, ordering: .relaxed)
            wakeSignal.signal()
        })
        // The borrower: runs what waits, and sleeps until woken when nothing does.
        let borrower = Thread {
            ThreadName.set("borrower")
            while !stop.load(ordering: .relaxed) {
                executor.runWaiting()
                _ = wakeSignal.wait(timeout: .now() + 0.05)
                executor.didWait()
            }
            executor.detach()
        }
        borrower.start()

        // A job preempted past the budget on a loaded machine hands the queue back for a
        // while: the borrower is looked for until it runs one, not at every job.
        let ranOn = try await borrowerEventually(executor)
        XCTAssertEqual(ranOn, "borrower")
        XCTAssertGreaterThan(wakes.load(ordering: .relaxed), 0, "work that came while the borrower waited woke it")

        // Work longer than the borrower's budget comes back to the own thread (the yield puts
        // the rest of this task behind the long part), and the queue goes back to the borrower
        // once it has been empty for `keepAfterHandBack`.
        let afterLongWork: String = await withTaskExecutorPreference(executor) {
            usleep(5_000)
            await Task.yield()
            return currentThreadName()
        }
        XCTAssertEqual(afterLongWork, "gw-under-test")
        let again = try await borrowerEventually(executor)
        XCTAssertEqual(again, "borrower")

        stop.store(true, ordering: .relaxed)
        wakeSignal.signal()
        var back = ""
        for _ in 0..<200 where back != "gw-under-test" {
            back = await threadName(on: executor)
            try await Task.sleep(for: .milliseconds(10))
        }
        XCTAssertEqual(back, "gw-under-test", "given back, the jobs run on the executor's own thread")
    }
}
