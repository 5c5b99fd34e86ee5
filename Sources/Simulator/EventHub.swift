import Foundation
import HomeModel

/// Fans events out to every open `events()` stream.
///
/// `AccessorySource.events()` is synchronous and nonisolated, so the subscriber list cannot live
/// in the actor's isolated state; a lock keeps it consistent between the actor (which yields)
/// and callers that subscribe from anywhere.
final class EventHub: @unchecked Sendable {
    private let lock = NSLock()
    private var continuations: [Int: AsyncStream<SourceEvent>.Continuation] = [:]
    private var nextID = 0
    private var finished = false

    func subscribe() -> AsyncStream<SourceEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: SourceEvent.self, bufferingPolicy: .unbounded)
        let id: Int? = lock.withLock {
            guard !finished else { return nil }
            nextID += 1
            continuations[nextID] = continuation
            return nextID
        }
        guard let id else {
            // The source has stopped: nothing more will come.
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            _ = self.lock.withLock { self.continuations.removeValue(forKey: id) }
        }
        return stream
    }

    func yield(_ event: SourceEvent) {
        // The table itself (a reference to its storage), not an array made of it per event.
        let targets = lock.withLock { continuations }
        for continuation in targets.values { continuation.yield(event) }
    }

    func finish() {
        let targets = lock.withLock {
            finished = true
            let all = Array(continuations.values)
            continuations.removeAll()
            return all
        }
        for continuation in targets { continuation.finish() }
    }
}
