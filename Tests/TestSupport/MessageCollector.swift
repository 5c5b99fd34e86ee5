public import MQTT
import Synchronization

/// Collects everything an `AsyncStream` yields (e.g. `MQTTClient.messages()` or `connectionStates()`) so
/// that a test can await an element with a timeout instead of iterating (and possibly hanging).
public final class StreamCollector<Element: Sendable>: Sendable {
    /// Shared with the collecting task (which must not keep the collector itself alive).
    private final class Storage: Sendable {
        let elements = Mutex<[Element]>([])
        let finished = Mutex(false)
    }

    private let storage = Storage()
    private let task: Task<Void, Never>

    public init(_ stream: AsyncStream<Element>) {
        task = Task { [storage] in
            for await element in stream { storage.elements.withLock { $0.append(element) } }
            storage.finished.withLock { $0 = true }
        }
    }

    deinit { task.cancel() }

    /// Everything received so far, in order.
    public var elements: [Element] { storage.elements.withLock { $0 } }
    /// True once the stream finished.
    public var isFinished: Bool { storage.finished.withLock { $0 } }

    /// The first element (already received or arriving within `timeout`) matching `predicate`.
    @discardableResult
    public func waitFor(
        _ what: String = "a matching element", timeout: Double = 10,
        where predicate: @Sendable (Element) -> Bool = { _ in true }
    ) async throws -> Element {
        var found: Element?
        try await waitUntil(what, timeout: timeout) {
            found = elements.first(where: predicate)
            return found != nil
        }
        return found!
    }

    /// Waits until at least `count` elements match; returns all matching ones.
    @discardableResult
    public func waitFor(
        count: Int, _ what: String = "elements", timeout: Double = 10,
        where predicate: @Sendable (Element) -> Bool = { _ in true }
    ) async throws -> [Element] {
        try await waitUntil("\(count) \(what)", timeout: timeout) { elements.filter(predicate).count >= count }
        return elements.filter(predicate)
    }

    /// Waits until the stream finished.
    public func waitForFinish(timeout: Double = 10) async throws {
        try await waitUntil("the stream to finish", timeout: timeout) { isFinished }
    }

    public func clear() { storage.elements.withLock { $0.removeAll() } }

    /// Stops collecting.
    public func cancel() async {
        task.cancel()
        await task.value
    }
}

public typealias MessageCollector = StreamCollector<MQTTMessage>
