import Foundation
public import HomeModel
import MQTT

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
        let key = nextObserver
        nextObserver += 1
        observers[key] = continuation
        continuation.onTermination = { _ in Task { await self.removeObserver(key) } }
        if isStarted { continuation.yield(.snapshot(snapshot())) }
        return stream
    }

    private func removeObserver(_ key: Int) { observers[key] = nil }

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
        let change = change()
        for continuation in observers.values { continuation.yield(change) }
    }

    func publishedTreeChanged() { notifyObservers(.snapshot(snapshot())) }

    func finishObservers() {
        for continuation in observers.values { continuation.finish() }
        observers = [:]
    }

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
        let timeout = config.requestTimeout + 2
        return await withCheckedContinuation { continuation in
            localRequests[number] = LocalRequest(continuation: continuation)
            guard isStarted, !isStopped else {
                answerLocally(
                    number, .object(Self.localError("unavailable", "the gateway is not online", id: message.payload)))
                return
            }
            Task { await self.handle(message: message) }
            // Every request is answered by the path that takes it, or by its deadline; this is
            // the last resort for one that none answers.
            localRequests[number]?.lastResort = Task {
                guard (try? await Task.sleep(for: .seconds(timeout))) != nil else { return }
                await self.answerLocally(
                    number, .object(Self.localError("timeout", "no answer within \(timeout) s", id: message.payload)))
            }
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
        waiting.lastResort?.cancel()
        waiting.continuation.resume(returning: json)
    }

    /// An in-process request on a topic that takes none is answered here; an MQTT one has its
    /// `$gateway/error` (or nothing, for the gateway's own output).
    func refuseLocal(_ message: MQTTMessage, code: String, _ text: String) {
        guard let topic = message.properties.responseTopic else { return }
        _ = answerLocally(replyTopic: topic, .object(Self.localError(code, text, id: message.payload)))
    }

    private static func localError(_ code: String, _ text: String, id payload: [UInt8]) -> [String: JSONValue] {
        ["id": requestID(payload), "status": "error", "code": .string(code), "message": .string(text)]
    }
}
