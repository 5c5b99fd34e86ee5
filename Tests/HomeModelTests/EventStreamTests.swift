import Synchronization
import Testing

@testable import HomeModel

/// What a reader of a source's or the home database's events relies on: every event in order,
/// however far behind it reads; the end after what is buffered; a reader that goes away or is
/// cancelled removed from the hub.
@Suite struct EventStreamTests {
    @Test func aReaderGetsEveryEventInOrderWhetherWaitingOrBehind() async {
        let hub = EventHub<Int>()
        let stream = hub.subscribe()
        let reader = Task {
            var seen: [Int] = []
            for await value in stream {
                seen.append(value)
                // Now and then the reader falls behind, and takes a batch.
                if value % 1000 == 0 { try? await Task.sleep(for: .milliseconds(5)) }
            }
            return seen
        }
        for value in 1...20_000 {
            hub.yield(value)
            if value % 3000 == 0 { try? await Task.sleep(for: .milliseconds(2)) }
        }
        hub.finish()
        #expect(await reader.value == Array(1...20_000))
    }

    @Test func finishEndsAfterWhatIsBufferedAndALaterSubscriberEndsAtOnce() async {
        let hub = EventHub<String>()
        let stream = hub.subscribe()
        hub.yield("a")
        hub.yield("b")
        hub.finish()
        hub.yield("c")
        var seen: [String] = []
        for await value in stream { seen.append(value) }
        #expect(seen == ["a", "b"])
        var later: [String] = []
        for await value in hub.subscribe() { later.append(value) }
        #expect(later.isEmpty)
    }

    @Test func aCancelledReaderEndsAndIsRemoved() async throws {
        let (stream, continuation) = EventStream<Int>.makeStream()
        let terminated = Atomic(0)
        continuation.onTermination { terminated.add(1, ordering: .relaxed) }
        let reader = Task {
            var count = 0
            for await _ in stream { count += 1 }
            return count
        }
        continuation.yield(1)
        try await Task.sleep(for: .milliseconds(50))
        reader.cancel()
        #expect(await reader.value == 1)
        #expect(terminated.load(ordering: .relaxed) == 1)
        continuation.finish()
        #expect(terminated.load(ordering: .relaxed) == 1, "onTermination runs once")
    }

    @Test func aReaderThatGoesAwayIsRemovedFromTheHub() async {
        let hub = EventHub<Int>()
        let counted = Atomic(0)
        do {
            let stream = hub.subscribe()
            var iterator = stream.makeAsyncIterator()
            hub.yield(1)
            if await iterator.next() == 1 { counted.add(1, ordering: .relaxed) }
        }
        // The stream and its iterator are gone: yielding reaches no one and buffers nothing.
        #expect(hub.subscriberCount == 0)
        hub.yield(2)
        #expect(counted.load(ordering: .relaxed) == 1)
    }
}

/// A home's events wait in every subscriber's buffer until it reads them: at start-up, one
/// `accessoryAssigned` per accessory of a large home (10,000 of them in the bench) waits while
/// the gateway publishes. Every element is as large as the largest case, so the cases that carry
/// whole homes are stored out of line.
@Suite struct HomeEventSizeTests {
    @Test func anEventIsAFewWordsNotAWholeHome() {
        #expect(MemoryLayout<HomeEvent>.stride <= 64, "HomeEvent is \(MemoryLayout<HomeEvent>.stride) bytes")
    }
}
