import Foundation
public import Harness
public import MQTT

extension MosquittoBroker {
    /// Every retained message under `filters` as a fresh subscriber sees it, empty ones left out.
    ///
    /// Ordered, not timed: after the SUBACK the subscriber publishes a marker to itself, and the
    /// broker delivers a subscription's retained messages before anything published after the
    /// SUBSCRIBE on the same connection. When the marker arrives, the snapshot is whole.
    public func retainedSnapshot(_ filters: String...) async throws -> [String: String] {
        let marker = "homemqtt-test/snapshot/\(UUID().uuidString)"
        let reader = try await MQTTTestSubscriber.start(
            broker: self, filter: marker, clientID: "snapshot-\(UUID().uuidString.prefix(8))")
        do {
            for filter in filters { try await reader.client.subscribe(filter, qos: .atLeastOnce) }
            try await reader.client.publish(marker, "end", qos: .atLeastOnce)
            try await reader.waitForMessage("the snapshot's marker", timeout: 20) { $0.topic == marker }
        } catch {
            await reader.stop()
            throw error
        }
        await reader.stop()
        var out: [String: String] = [:]
        for message in reader.messages where message.retain && !message.payload.isEmpty && message.topic != marker {
            out[message.topic] = message.string
        }
        return out
    }

    /// The retained snapshot under `filters` once `condition` holds of it: for what the gateway
    /// clears or publishes after the event a test can wait for (another connection's work, a
    /// retired home's clears). Fails with the last snapshot after `timeout`.
    @discardableResult
    public func retainedSnapshot(
        _ filters: String..., until what: String, timeout: Double = 20,
        _ condition: ([String: String]) -> Bool
    ) async throws -> [String: String] {
        let deadline = ContinuousClock.now + .seconds(timeout)
        while true {
            var last: [String: String] = [:]
            for filter in filters { last.merge(try await retainedSnapshot(filter)) { a, _ in a } }
            if condition(last) { return last }
            guard ContinuousClock.now < deadline else {
                throw ProcessError("timed out waiting for \(what); retained: \(last.keys.sorted())")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }
}
