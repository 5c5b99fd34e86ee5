public import Synchronization

/// Fans events out to every stream subscribed to it: how a source, the home database and any
/// other producer report to any number of readers.
///
/// Producers yield from any thread or actor (`AccessorySource.events()` is synchronous and
/// nonisolated, so the subscriber list cannot live in an actor). Each stream (`EventStream`)
/// buffers without bound: a reader that falls behind loses nothing. After `finish()` every stream ends, and a
/// stream subscribed later ends at once.
///
/// `yield` is inlinable, so a producer's call is specialised for its event: unspecialised, each
/// event paid ~1.7 k instructions of generic metadata look-ups (callgrind, scenario 7).
public final class EventHub<Event: Sendable>: Sendable {
    @usableFromInline struct Subscribers {
        @usableFromInline var continuations: [Int: EventStream<Event>.Continuation] = [:]
        var nextID = 0
        var finished = false

        init() {}
    }

    @usableFromInline let subscribers = Mutex(Subscribers())

    public init() {}

    public func subscribe() -> EventStream<Event> {
        let (stream, continuation) = EventStream<Event>.makeStream()
        let id: Int? = subscribers.withLock { state in
            guard !state.finished else { return nil }
            state.nextID += 1
            state.continuations[state.nextID] = continuation
            return state.nextID
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination { [weak self] in
            _ = self?.subscribers.withLock { $0.continuations.removeValue(forKey: id) }
        }
        return stream
    }

    /// The streams subscribed and not yet ended.
    var subscriberCount: Int { subscribers.withLock { $0.continuations.count } }

    @inlinable public func yield(_ event: Event) {
        // The table itself (a reference to its storage), not an array made of it per event.
        let targets = subscribers.withLock { $0.continuations }
        for continuation in targets.values { continuation.yield(event) }
    }

    /// Ends every stream; finishing runs `onTermination`, which takes the lock, so it is done
    /// outside it.
    public func finish() {
        let targets = subscribers.withLock { state in
            state.finished = true
            defer { state.continuations.removeAll() }
            return Array(state.continuations.values)
        }
        for continuation in targets { continuation.finish() }
    }
}
