import Foundation
public import HTTPTypes
public import HomeModel
import HummingbirdWSClient
import Logging
public import Synchronization
public import TestSupport

/// A WebSocket client of `/ws`, as the page is one: every frame it receives, parsed, and
/// requests sent as the page sends them.
public final class PageClient: Sendable {
    /// Frames received, in order (text frames parsed as JSON; anything else fails the test).
    public let frames: StreamCollector<JSONValue>
    private let continuation: AsyncStream<JSONValue>.Continuation
    private let writer = Mutex<WebSocketOutboundWriter?>(nil)
    private let task: Mutex<Task<Void, Never>?> = Mutex(nil)
    /// How the connection ended, once it has: nil while open.
    public let ending = Mutex<String?>(nil)
    private let nextID = Atomic<Int>(1)

    private init() {
        let (stream, continuation) = AsyncStream<JSONValue>.makeStream()
        self.frames = StreamCollector(stream)
        self.continuation = continuation
    }

    /// Connects and waits for the upgrade; throws when it is refused.
    public static func connect(_ url: String, headers: HTTPFields = [:]) async throws -> PageClient {
        let client = PageClient()
        var configuration = WebSocketClientConfiguration()
        configuration.maxFrameSize = 64 << 20
        configuration.additionalHeaders = headers
        var logger = Logger(label: "test.page")
        logger.logLevel = .critical
        let task = Task {
            do {
                try await WebSocketClient.connect(url: url, configuration: configuration, logger: logger) {
                    inbound, outbound, _ in
                    client.writer.withLock { $0 = outbound }
                    for try await message in inbound.messages(maxSize: 64 << 20) {
                        guard case .text(let text) = message, let json = try? JSONValue(parsing: text) else {
                            client.continuation.yield(.string("<not JSON text: \(message)>"))
                            continue
                        }
                        client.continuation.yield(json)
                    }
                }
                client.ending.withLock { $0 = "closed" }
            } catch {
                client.ending.withLock { $0 = "\(error)" }
            }
            client.continuation.finish()
        }
        client.task.withLock { $0 = task }
        try await waitUntil("the WebSocket to open", timeout: 10) {
            if let ending = client.ending.withLock({ $0 }) { throw WebSocketRefused(reason: ending) }
            return client.writer.withLock { $0 } != nil
        }
        return client
    }

    public struct WebSocketRefused: Error, CustomStringConvertible {
        public var reason: String
        public var description: String { "the WebSocket was refused or closed: \(reason)" }
    }

    /// Sends raw text, as a misbehaving client might.
    public func sendText(_ text: String) async throws {
        guard let writer = writer.withLock({ $0 }) else { throw WebSocketRefused(reason: "not open") }
        try await writer.write(.text(text))
    }

    public func sendBinary(_ bytes: [UInt8]) async throws {
        guard let writer = writer.withLock({ $0 }) else { throw WebSocketRefused(reason: "not open") }
        try await writer.write(.binary(.init(bytes: bytes)))
    }

    /// Sends a request as the page does and returns its answer.
    @discardableResult
    public func request(_ topic: String, _ payload: String, timeout: Double = 15) async throws -> JSONValue {
        let id = nextID.add(1, ordering: .relaxed).oldValue
        let text = JSONValue.object(["id": .int(Int64(id)), "topic": .string(topic), "payload": .string(payload)])
            .encoded()
        try await sendText(text)
        return try await answer(id: .int(Int64(id)), timeout: timeout)
    }

    /// The answer frame's `answer` to the request with `id`.
    public func answer(id: JSONValue, timeout: Double = 15) async throws -> JSONValue {
        let frame = try await frames.waitFor("the answer to request \(id)", timeout: timeout) {
            $0["type"] == "answer" && $0["id"] == id
        }
        return frame["answer"] ?? .null
    }

    /// The first frame (from now on or already received) that gives the characteristic at
    /// `topic` a value satisfying `predicate`: an `update`, or the whole `home` when a structural
    /// change came in the same 100 ms (it carries the values, and the update is not sent).
    @discardableResult
    public func update(
        of topic: String, timeout: Double = 5, where predicate: @escaping @Sendable (JSONValue) -> Bool = { _ in true }
    ) async throws -> JSONValue {
        let frame = try await frames.waitFor("an update of \(topic)", timeout: timeout) {
            guard let value = Self.value(of: topic, in: $0) else { return false }
            return predicate(value)
        }
        return Self.value(of: topic, in: frame) ?? .null
    }

    /// The value a frame gives the characteristic at `topic`, if it gives one.
    public static func value(of topic: String, in frame: JSONValue) -> JSONValue? {
        if frame["type"] == "update" { return frame["values"]?[topic] }
        guard frame["type"] == "home" else { return nil }
        for accessory in frame["accessories"]?.arrayValue ?? [] {
            for service in accessory["services"]?.arrayValue ?? [] {
                guard let serviceTopic = service["topic"]?.stringValue, topic.hasPrefix(serviceTopic + "/") else {
                    continue
                }
                let slug = topic.dropFirst(serviceTopic.count + 1)
                for characteristic in service["chars"]?.arrayValue ?? []
                where characteristic["slug"]?.stringValue == String(slug) {
                    return characteristic["v"]
                }
            }
        }
        return nil
    }

    public func close() async {
        if let writer = writer.withLock({ $0 }) { try? await writer.close(.normalClosure, reason: nil) }
        let task = task.withLock { $0 }
        task?.cancel()
        await task?.value
    }
}
