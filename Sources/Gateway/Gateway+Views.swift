import Foundation
public import HomeModel
import MQTT
import Synchronization

/// What a view of the home sees (Homie, the web page), in the order it happened.
public enum GatewayChange: Sendable {
    /// The whole published home: first to every observer once the gateway is online, then
    /// after every structural change (accessories, services, names, rooms, reachability, scope).
    case snapshot(GatewaySnapshot)
    /// A published characteristic's new value; for a button, each press.
    case value(TopicTree.CharacteristicNode, CharacteristicValue)
    /// What `$gateway/event` carried.
    case event(JSONValue)
    /// Whether the gateway's broker connection is up.
    case connection(Bool)
}

public struct GatewaySnapshot: Sendable {
    /// The tree whose topics are on the broker.
    public var tree: TopicTree
    /// The current value of every characteristic in `tree` that has one.
    public var values: [CharacteristicAddress: CharacteristicValue]
}

/// Views beside the MQTT topics observe the published home and write through the same path as
/// an MQTT message: `request(topic:payload:)` is handled as that message, and its answer is the
/// one published on `result`, `$result` or `response/<op>`.
extension Gateway {
    /// The local answers' reply topics start with NUL, which no MQTT topic may hold: no
    /// client's Response Topic can be mistaken for one.
    static let localReplyPrefix = "\u{0}local/"

    /// Changes from now on, starting with a snapshot once the gateway is online; finishes when
    /// the gateway stops.
    public func observe() -> AsyncStream<GatewayChange> {
        let (stream, continuation) = AsyncStream<GatewayChange>.makeStream()
        guard !isStopped else {
            continuation.finish()
            return stream
        }
        let key = observers.add(continuation)
        // Synchronous: the table is behind its own lock, so no task is needed to reach the actor.
        continuation.onTermination = { [observers] _ in observers.remove(key) }
        if isStarted { continuation.yield(.snapshot(snapshot())) }
        return stream
    }

    func snapshot() -> GatewaySnapshot {
        var values: [CharacteristicAddress: CharacteristicValue] = [:]
        for node in publishedTree.accessories {
            for service in node.services {
                for c in service.characteristics where !c.isEvent {
                    if let value = currentValue(c.address) { values[c.address] = value }
                }
            }
        }
        return GatewaySnapshot(tree: publishedTree, values: values)
    }

    /// Tells every observer; the snapshot is made only when someone observes.
    func notifyObservers(_ change: @autoclosure () -> GatewayChange) {
        guard !observers.isEmpty else { return }
        observers.yield(change())
    }

    func publishedTreeChanged() { notifyObservers(.snapshot(snapshot())) }

    func finishObservers() { observers.finish() }

    /// A request from inside the process, handled exactly as an MQTT message on `topic`
    /// (`set`, `get`, `$toggle`, `$identify`, `$set`, `$gateway/request/<op>`) with a Response
    /// Topic: the same validation, the same workers, the same answer on the same topics.
    public func request(topic: String, payload: [UInt8]) async -> JSONValue {
        let number = nextLocalRequest
        nextLocalRequest += 1
        var properties = MQTTPublishProperties()
        properties.responseTopic = Self.localReplyPrefix + String(number)
        let message = MQTTMessage(
            topic: topic, payload: payload, qos: .atLeastOnce, retain: false, properties: properties)
        return await withCheckedContinuation { continuation in
            localRequests[number] = LocalRequest(continuation: continuation, payload: payload)
            guard isStarted, !isStopped else {
                answerLocally(
                    number, .object(Self.localError(.unavailable, "the gateway is not online", id: message.payload)))
                return
            }
            // Every request is answered by the path that takes it, or by its deadline; this is
            // the last resort for one that none answers, kept by the deadline watchdog.
            deadlines.startLocal(number, timeout: Self.localRequestTimeout(config))
            localMessages.yield(message)
        }
    }

    /// How long an in-process request waits at most: longer than any worker's deadline, so a
    /// request to an accessory is answered by its own `timeout` first.
    static func localRequestTimeout(_ config: GatewayConfig) -> Double { config.requestTimeout + 2 }

    /// The in-process requests past `localRequestTimeout`, from the deadline watchdog.
    func timeOutLocalRequests(_ numbers: [Int]) {
        let timeout = Self.localRequestTimeout(config)
        for number in numbers {
            guard let payload = localRequests[number]?.payload else { continue }
            answerLocally(
                number, .object(Self.localError(.timeout, "no answer within \(timeout) s", id: payload)))
        }
    }

    /// At the end of `stop`: the watchdog and the loop that handled in-process requests have
    /// ended, so what is still waiting is answered here rather than never.
    func answerLocalRequestsAtStop() {
        for number in localRequests.keys.sorted() {
            guard let payload = localRequests[number]?.payload else { continue }
            answerLocally(number, .object(Self.localError(.unavailable, "the gateway stopped", id: payload)))
        }
    }

    /// Resumes the in-process request behind `replyTopic`, if it is one; true if it was.
    func answerLocally(replyTopic: String, _ json: JSONValue) -> Bool {
        guard replyTopic.hasPrefix(Self.localReplyPrefix) else { return false }
        if let number = Int(replyTopic.dropFirst(Self.localReplyPrefix.count)) { answerLocally(number, json) }
        return true
    }

    private func answerLocally(_ number: Int, _ json: JSONValue) {
        guard let waiting = localRequests.removeValue(forKey: number) else { return }
        deadlines.finishLocal(number)
        waiting.continuation.resume(returning: json)
    }

    /// An in-process request on a topic that takes none is answered here; an MQTT one has its
    /// `$gateway/error` (or nothing, for the gateway's own output).
    func refuseLocal(_ message: MQTTMessage, code: ErrorCode, _ text: String) {
        guard let topic = message.properties.responseTopic else { return }
        _ = answerLocally(replyTopic: topic, .object(Self.localError(code, text, id: message.payload)))
    }

    private static func localError(_ code: ErrorCode, _ text: String, id payload: [UInt8]) -> [String: JSONValue] {
        ["id": requestID(payload), "status": "error", "code": .string(code.rawValue), "message": .string(text)]
    }
}

/// The observers of a gateway, behind a lock of their own: a stream's `onTermination` (which
/// may run on any thread) removes its entry at once, and the actor yields to all of them.
final class Observers: Sendable {
    private let table = Mutex<(next: Int, continuations: [Int: AsyncStream<GatewayChange>.Continuation])>((0, [:]))

    var isEmpty: Bool { table.withLock { $0.continuations.isEmpty } }

    func add(_ continuation: AsyncStream<GatewayChange>.Continuation) -> Int {
        table.withLock { table in
            table.next += 1
            table.continuations[table.next] = continuation
            return table.next
        }
    }

    func remove(_ key: Int) { _ = table.withLock { $0.continuations.removeValue(forKey: key) } }

    /// Yielding runs no `onTermination`, so it is done under the lock.
    func yield(_ change: GatewayChange) {
        table.withLock { table in for continuation in table.continuations.values { continuation.yield(change) } }
    }

    /// Finishing runs `onTermination`, which takes the lock: done outside it.
    func finish() {
        let all = table.withLock { table in
            defer { table.continuations = [:] }
            return Array(table.continuations.values)
        }
        for continuation in all { continuation.finish() }
    }
}
