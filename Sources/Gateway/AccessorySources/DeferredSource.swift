import Dispatch
public import HomeModel
import ServiceLifecycle
import Synchronization

/// A source made by its service rather than before the service group starts: loading a large
/// home's accessory files is then one phase of the group, which SIGTERM stops like any other.
///
/// The source is made with this one's event hub, so `events()` works before it exists and no
/// event is forwarded. `accessories()` waits for the load (and returns nothing if it failed or
/// was stopped); the load's error, if any, is `run()`'s, so it ends the group.
public final class DeferredSource: AccessorySource {
    public let sourceName: String
    private let hub = EventHub<SourceEvent>()
    private let make: @Sendable (EventHub<SourceEvent>) throws -> any AccessorySource
    private let state = Mutex(State())

    private struct State {
        /// Set once: the source made, or nil with `settled` when making it failed or stopped.
        var made: (any AccessorySource)?
        var settled = false
        var failed = false
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter = 0
    }

    /// - Parameter make: builds the source, reporting into the hub it is given; it may block
    ///   (it runs on a thread of its own, abandoned if the group stops first).
    public init(name: String, make: @escaping @Sendable (EventHub<SourceEvent>) throws -> any AccessorySource) {
        self.sourceName = name
        self.make = make
    }

    public func events() -> EventStream<SourceEvent> { hub.subscribe() }

    public func run() async throws {
        let source: any AccessorySource
        do {
            source = try await cancelWhenGracefulShutdown { [make, hub] in
                try await Self.onOwnThread { try make(hub) }
            }
        } catch {
            let stopped = error is CancellationError
            settle(nil, failed: !stopped)
            hub.finish()
            if stopped { return }
            throw error
        }
        settle(source)
        try await source.run()
    }

    /// Waits for the source; returns early, with nothing, when the caller is cancelled. After a
    /// failed load it waits for that cancellation: the failure ends the group, and the caller
    /// must not go on as if the home were empty.
    private func loaded() async -> (any AccessorySource)? {
        if let source = await settled() { return source }
        while state.withLock({ $0.failed }), !Task.isCancelled {
            try? await Task.sleep(for: .seconds(3600))
        }
        return nil
    }

    private func settled() async -> (any AccessorySource)? {
        let id: Int? = state.withLock { state in
            guard !state.settled else { return nil }
            state.nextWaiter += 1
            return state.nextWaiter
        }
        guard let id else { return state.withLock { $0.made } }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let resumeNow = state.withLock { state -> Bool in
                    if state.settled || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
        }
        return state.withLock { $0.made }
    }

    private func settle(_ source: (any AccessorySource)?, failed: Bool = false) {
        let waiters = state.withLock { state in
            state.made = source
            state.settled = true
            state.failed = failed
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    private var made: (any AccessorySource)? { state.withLock { $0.made } }

    private func ready() throws(AccessoryError) -> any AccessorySource {
        guard let made else { throw AccessoryError(.communicationFailure, "the \(sourceName) is still loading") }
        return made
    }

    public func accessories() async -> [Accessory] {
        await loaded()?.accessories() ?? []
    }

    public func read(_ address: CharacteristicAddress) async throws(AccessoryError) -> CharacteristicValue {
        try await ready().read(address)
    }

    public func write(_ address: CharacteristicAddress, value: CharacteristicValue) async throws(AccessoryError) {
        try await ready().write(address, value: value)
    }

    public func setNotifications(enabled: Bool, for addresses: [CharacteristicAddress]) async -> [CharacteristicAddress:
        AccessoryError]
    {
        do throws(AccessoryError) {
            return try await ready().setNotifications(enabled: enabled, for: addresses)
        } catch {
            return Dictionary(uniqueKeysWithValues: addresses.map { ($0, error) })
        }
    }

    public func identify(accessoryID: String) async throws(AccessoryError) {
        try await ready().identify(accessoryID: accessoryID)
    }

    /// Runs blocking work on a thread of its own; cancellation returns at once and leaves the
    /// work to finish unheard (its result is dropped).
    static func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        let slot = ContinuationSlot<T>()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                guard slot.hold(continuation) else {
                    continuation.resume(throwing: CancellationError())
                    return
                }
                DispatchQueue.global().async { slot.resume(with: Result { try body() }) }
            }
        } onCancel: {
            slot.cancel()
        }
    }
}

/// A continuation resumed once, by whichever comes first: the work or the cancellation.
private final class ContinuationSlot<T: Sendable>: Sendable {
    private let slot = Mutex<(continuation: CheckedContinuation<T, any Error>?, cancelled: Bool)>((nil, false))

    /// False when cancellation came first.
    func hold(_ continuation: CheckedContinuation<T, any Error>) -> Bool {
        slot.withLock { slot in
            if slot.cancelled || Task.isCancelled { return false }
            slot.continuation = continuation
            return true
        }
    }

    func resume(with result: Result<T, any Error>) {
        slot.withLock { slot in
            defer { slot.continuation = nil }; return slot.continuation
        }?.resume(with: result)
    }

    func cancel() {
        slot.withLock { slot in
            slot.cancelled = true
            defer { slot.continuation = nil }
            return slot.continuation
        }?.resume(throwing: CancellationError())
    }
}
