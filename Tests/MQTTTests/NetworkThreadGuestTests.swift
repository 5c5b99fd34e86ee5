import Foundation
import MQTT
import Synchronization
import Testing
import TestSupport

/// A guest hosted by a connected client: its work runs on the client's network thread, is
/// started at once when handed over from another thread, can publish from there, and goes back
/// to its owner while the connection is down.
@Suite struct NetworkThreadGuestTests {
    /// Work items as closures; records where they ran and whether the network thread holds it.
    final class RecordingGuest: MQTTNetworkThreadGuest, @unchecked Sendable {
        struct State {
            var work: [@Sendable () -> Void] = []
            var wake: (@Sendable () -> Void)?
            var waiting = false
            var attachments = 0
            var detachments = 0
        }
        let state = Mutex(State())

        var isAttached: Bool { state.withLock { $0.wake != nil } }
        var counts: (attachments: Int, detachments: Int) {
            state.withLock { ($0.attachments, $0.detachments) }
        }

        /// Hands `work` to whichever thread hosts the guest (the test only calls this attached).
        func submit(_ work: @escaping @Sendable () -> Void) {
            let wake = state.withLock { state -> (@Sendable () -> Void)? in
                state.work.append(work)
                defer { state.waiting = false }
                return state.waiting ? state.wake : nil
            }
            wake?()
        }

        func attach(wake: @escaping @Sendable () -> Void) {
            state.withLock {
                $0.wake = wake
                $0.attachments += 1
            }
        }

        func detach() {
            state.withLock {
                $0.wake = nil
                $0.waiting = false
                $0.detachments += 1
            }
        }

        func didWait() { state.withLock { $0.waiting = false } }

        /// Everything, including what comes while it runs; waiting once none is left.
        func runWaiting() {
            while true {
                let work = state.withLock { state -> [@Sendable () -> Void] in
                    defer { state.work.removeAll() }
                    if state.work.isEmpty { state.waiting = true }
                    return state.work
                }
                if work.isEmpty { return }
                for item in work { item() }
            }
        }
    }

    /// How long the network thread may wait in these tests: long, so that an item run at once
    /// was woken, and not reached by the wait's end. A threshold of milliseconds told those
    /// apart with the 100 ms default, and failed when a busy machine delayed a woken item.
    static let longWait = 5.0

    /// A guest hosted by `client`, once its network thread has attached it.
    static func hostedGuest(_ client: MQTTClient) async throws -> RecordingGuest {
        let guest = RecordingGuest()
        client.host(guest)
        try await waitUntil("the network thread attaches the guest", timeout: 5) { guest.isAttached }
        return guest
    }

    @Test func workRunsOnTheNetworkThreadAtOnceAndItsPublishesGoOut() async throws {
        try await MosquittoBroker.with { broker in
            let subscriber = try await MQTTTestSubscriber.start(broker: broker, filter: "guest/#")
            let client = try await connectedClient(broker) { $0.guestWaitLimit = Self.longWait }
            let guest = try await Self.hostedGuest(client)

            // Each item is handed over from this task's thread while the network thread waits
            // for its socket: only the wake gets it run before the wait's end (5 s here, so a
            // busy machine's delay of some milliseconds is never taken for a missed wake).
            var delays: [Duration] = []
            for n in 0..<20 {
                try await Task.sleep(for: .milliseconds(5))
                let started = ContinuousClock.now
                let ran: (thread: String, after: Duration) = await withCheckedContinuation { continuation in
                    guest.submit {
                        let after = ContinuousClock.now - started
                        _ = try? client.publishWithoutWaiting(
                            "guest/\(n)", payload: Array("\(n)".utf8), qos: .atLeastOnce, retain: false,
                            properties: MQTTPublishProperties())
                        continuation.resume(returning: (ThreadName.current, after))
                    }
                }
                #expect(ran.thread == "mqtt-network")
                delays.append(ran.after)
            }
            let median = delays.sorted()[delays.count / 2]
            // Left to the wait's end, the median would be about 2.5 s.
            #expect(median < .seconds(1), "\(delays)")
            try await subscriber.waitForMessage { $0.topic == "guest/19" }
            #expect(subscriber.messages.filter { $0.topic.hasPrefix("guest/") }.count == 20)

            client.host(nil)
            try await waitUntil("the network thread detaches the guest", timeout: 5) { !guest.isAttached }
            await client.disconnect()
            await subscriber.stop()
        }
    }

    @Test func aPublishFromAnotherThreadWakesTheWaitingNetworkThread() async throws {
        try await MosquittoBroker.with { broker in
            let subscriber = try await connectedClient(broker)
            let received = subscriber.messages()
            try await subscriber.subscribe("other/#")
            var arrivals = received.makeAsyncIterator()
            let client = try await connectedClient(broker) { $0.guestWaitLimit = Self.longWait }
            let guest = try await Self.hostedGuest(client)
            // libmosquitto wakes its own loop through a socket pair the hosting thread does
            // not poll: without the client's own wake, each of these waits for the poll's end.
            var delays: [Duration] = []
            for n in 0..<15 {
                try await Task.sleep(for: .milliseconds(5))
                let started = ContinuousClock.now
                try await client.publish("other/\(n)", payload: Array("\(n)".utf8), qos: .atLeastOnce)
                let message = await arrivals.next()
                delays.append(ContinuousClock.now - started)
                #expect(message?.topic == "other/\(n)")
            }
            let median = delays.sorted()[delays.count / 2]
            // Left to the poll's end, about 2.5 s.
            #expect(median < .seconds(1), "\(delays)")
            await client.disconnect()
            await subscriber.disconnect()
        }
    }

    @Test func theGuestIsGivenBackWhileTheConnectionIsDownAndTakenAgainAfter() async throws {
        try await MosquittoBroker.with { broker in
            let client = try await connectedClient(broker) { configuration in
                configuration.reconnectDelayMin = 0.1
                configuration.reconnectDelayMax = 0.2
            }
            let guest = try await Self.hostedGuest(client)
            await broker.stop()
            try await waitUntil("detached while the broker is away", timeout: 10) { !guest.isAttached }
            try await broker.start()
            try await waitUntil("attached again after the reconnect", timeout: 20) { guest.isAttached }
            #expect(guest.counts.attachments == 2)
            await client.disconnect()
            #expect(!guest.isAttached)
            #expect(guest.counts.attachments == 2 && guest.counts.detachments == 2)
        }
    }
}
