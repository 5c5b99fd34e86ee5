import Logging
import MQTT
import ServiceLifecycle
import Synchronization
import XCTest

@testable import Gateway

/// A large home's first publication waits on the bytes the outbox holds as well as on their
/// count (`Outbox.wait(below:bytes:)`): two documents of 600 KB queued, a producer waiting for
/// less than 1 MB goes on once the first is handed to the client, not before, and the count of
/// bytes comes back to zero once everything is sent.
final class OutboxPacingTests: XCTestCase {
    /// A transport whose queue is always full (`publishWithoutWaiting` false) and whose
    /// `publish` hands a message over only when the test lets one through.
    final class GatedTransport: MQTTTransport, @unchecked Sendable {
        let sent = Mutex<[String]>([])
        let (permits, grant) = AsyncStream<Void>.makeStream()
        // One reader of `permits` at a time: the drain sends in order.
        var iterator: AsyncStream<Void>.Iterator

        init() { iterator = permits.makeAsyncIterator() }

        var connectionState: MQTTConnectionState { .connected }
        var protocolVersion: MQTTProtocolVersion { .v5 }
        var brokerLimits: MQTTBrokerLimits { MQTTBrokerLimits() }

        func publish(
            _ topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool, properties: MQTTPublishProperties
        ) async throws(MQTTError) {
            _ = await iterator.next()
            sent.withLock { $0.append(topic) }
        }

        func publishWithoutWaiting(
            _ topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool, properties: MQTTPublishProperties
        ) throws(MQTTError) -> Bool { false }

        func subscribe(_ filters: [(String, MQTTQoS)], ownMessages: Bool) async throws(MQTTError) {}
        func unsubscribe(_ filter: String) async throws(MQTTError) {}
        func messages() -> AsyncStream<MQTTMessage> { AsyncStream { $0.finish() } }
        func connectionStates() -> AsyncStream<MQTTConnectionState> { AsyncStream { $0.finish() } }
        func run() async throws {}
    }

    func testTheFirstPublicationWaitsOnTheQueuedBytes() async throws {
        let transport = GatedTransport()
        let outbox = Outbox(mqtt: transport, defaultQoS: .atLeastOnce, logger: Logger(label: "test"))
        // Two pages of 0.6 of the limit each: together over it, either alone under it.
        let size = Publication.backlogBytes * 3 / 5
        let document = [UInt8](repeating: UInt8(ascii: "x"), count: size)
        outbox.publish("home/$gateway/tree/1", document, retain: true)
        outbox.publish("home/$gateway/tree/2", document, retain: true)
        XCTAssertEqual(outbox.backlog, 2)
        XCTAssertEqual(outbox.backlogBytes, 2 * size)

        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await outbox.drain(republish: { _ in }) }
            let (waited, done) = AsyncStream<Void>.makeStream()
            let isDone = Mutex(false)
            group.addTask {
                // Below 1,000 messages already: only the bytes hold it.
                await outbox.wait(below: 1_000, bytes: Publication.backlogBytes)
                isDone.withLock { $0 = true }
                done.yield()
            }
            var waitedFor = waited.makeAsyncIterator()
            // Nothing has been sent: the producer is still waiting (a wait on the count alone
            // would have ended at once).
            try await Task.sleep(for: .milliseconds(50))
            XCTAssertFalse(isDone.withLock { $0 })
            XCTAssertEqual(transport.sent.withLock { $0 }, [])
            XCTAssertEqual(outbox.backlogBytes, 2 * size)

            transport.grant.yield()
            _ = await waitedFor.next()
            // It went on once the first page was handed over; the second is still queued.
            XCTAssertEqual(transport.sent.withLock { $0 }, ["home/$gateway/tree/1"])
            XCTAssertEqual(outbox.backlogBytes, size)
            XCTAssertEqual(outbox.backlog, 1)

            transport.grant.yield()
            outbox.finish()
            try await group.waitForAll()
        }
        XCTAssertEqual(transport.sent.withLock { $0 }, ["home/$gateway/tree/1", "home/$gateway/tree/2"])
        XCTAssertEqual(outbox.backlogBytes, 0)
        XCTAssertEqual(outbox.backlog, 0)
    }
}
