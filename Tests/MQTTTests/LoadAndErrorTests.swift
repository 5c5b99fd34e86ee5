import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import Testing
import TestSupport

@testable import MQTT

/// Shared mutable test state for child tasks (a Mutex itself cannot be captured).
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    var value: Value { mutex.withLock { $0 } }
    func update(_ body: (inout Value) -> Void) { mutex.withLock { body(&$0) } }
}

@Suite("Load, shutdown and errors")
struct LoadAndErrorTests {
    /// Publishes in a loop until publish throws; returns that error.
    private static func publishUntilFailure(_ client: MQTTClient, qos: MQTTQoS, counter: Locked<Int>) async -> MQTTError
    {
        var index = 0
        while true {
            do {
                try await client.publish("load/\(qos.rawValue)", payload: Array(repeating: 7, count: 64), qos: qos)
                counter.update { $0 += 1 }
                index += 1
                if index % 100 == 0 { await Task.yield() }
            } catch {
                return error
            }
        }
    }

    /// Not connected, a client has no DISCONNECT to send: `disconnect()` does not wait for a
    /// connect attempt that hangs (packets dropped) or for a CONNACK that never comes.
    @Test(arguments: [true, false])
    func disconnectDuringAConnectThatGetsNowhereReturnsAtOnce(dropsPackets: Bool) async throws {
        let listener = try SilentListener(dropsPackets: dropsPackets)
        defer { listener.close() }
        var configuration = MQTTConfiguration(host: "127.0.0.1", port: listener.port)
        configuration.connectTimeout = 10
        let client = MQTTClient(configuration: configuration)
        let connecting = Task { try await client.connect() }
        try await Task.sleep(for: .milliseconds(500))
        let start = ContinuousClock.now
        await client.disconnect()
        let elapsed = ContinuousClock.now - start
        #expect(elapsed < .seconds(1), "disconnect took \(elapsed)")
        await #expect(throws: MQTTError.self) { try await connecting.value }
    }

    @Test func shuttingDownUnderLoadRepeatedlyNeverCrashes() async throws {
        try await MosquittoBroker.with { broker in
            for round in 0..<6 {
                let brokerGoesAway = round % 3 == 2
                let client = try await connectedClient(broker) { $0.maxQueuedPublishes = 50 }
                let received = MessageCollector(client.messages())
                try await client.subscribe("load/#", qos: .atLeastOnce)
                let published = Locked(0)
                let errors = Locked<[MQTTError]>([])
                await withTaskGroup(of: Void.self) { group in
                    for qos in MQTTQoS.allCases {
                        group.addTask {
                            let error = await Self.publishUntilFailure(client, qos: qos, counter: published)
                            errors.update { $0.append(error) }
                        }
                    }
                    group.addTask {
                        try? await waitUntil("some load") { published.value > 300 }
                        if brokerGoesAway {
                            // Publishers of QoS 1/2 now block on a full queue; disconnect must release them.
                            await broker.stop()
                            try? await waitUntil("reconnecting") { client.connectionState.isReconnecting }
                        }
                        await client.disconnect()
                        await client.disconnect() // idempotent
                    }
                }
                if brokerGoesAway { try await broker.start() }
                #expect(client.connectionState == .disconnected(nil))
                #expect(errors.value.allSatisfy { ["closed", "no-connection"].contains($0.code.rawValue) })
                try await received.waitForFinish()
                #expect(published.value > 300)
            }
        }
    }

    @Test func burstOf100000QoS0PublishesCompletesWithBoundedQueue() async throws {
        try await MosquittoBroker.with(.init(extraConfiguration: ["max_queued_messages 0"])) { broker in
            let subscriber = try await MQTTTestSubscriber.start(broker: broker, filter: "burst/#", qos: .atMostOnce)
            let client = try await connectedClient(broker) { $0.maxQueuedPublishes = 1000 }
            let payload = Array("0123456789abcdef".utf8)
            for _ in 0..<100_000 {
                try await client.publish("burst/data", payload: payload, qos: .atMostOnce)
            }
            #expect(client.queuedPublishHighWater <= 1000, "publish must wait instead of queueing without bound")
            #expect(client.queuedPublishHighWater > 0)
            // A QoS 1 marker after the burst: its arrival shows the connection stayed healthy throughout.
            try await client.publish("burst/end", "end", qos: .atLeastOnce)
            try await subscriber.waitForMessage("the end marker", timeout: 60) { $0.topic == "burst/end" }
            try await waitUntil("the queue to drain") { client.queuedPublishCount == 0 }
            // While connected nothing is dropped: the broker is configured without a queue limit.
            let delivered = subscriber.messages.filter { $0.topic == "burst/data" }.count
            #expect(delivered == 100_000)
            await client.disconnect()
            await subscriber.stop()
        }
    }

    /// `publishWithoutWaiting` does what `publish` does when that needs no waiting, and
    /// declines (sending nothing) where `publish` would wait for room.
    @Test func publishWithoutWaitingDeclinesInsteadOfWaiting() async throws {
        try await MosquittoBroker.with { broker in
            let client = try await connectedClient(broker) {
                $0.maxQueuedPublishes = 3
                $0.reconnectDelayMin = 0.1
                $0.reconnectDelayMax = 0.2
            }
            let bad = await expectMQTTError {
                _ = try client.publishWithoutWaiting("bad/#", payload: [1], qos: .atLeastOnce)
            }
            #expect(bad?.code.rawValue == "invalid-topic")

            await broker.stop()
            try await waitUntil("reconnecting") { client.connectionState.isReconnecting }
            // Kept for the next connection while there is room; then declined, not waited for.
            for index in 1...3 {
                #expect(try client.publishWithoutWaiting("kept/\(index)", payload: [UInt8(index)], qos: .atLeastOnce))
            }
            #expect(try client.publishWithoutWaiting("kept/4", payload: [4], qos: .atLeastOnce) == false)
            // QoS 0 while disconnected is dropped, as `publish` drops it: nothing to wait for.
            #expect(try client.publishWithoutWaiting("dropped", payload: [0], qos: .atMostOnce))

            try await broker.start()
            try await waitUntil("the kept messages acknowledged", timeout: 20) { client.queuedPublishCount == 0 }
            #expect(try client.publishWithoutWaiting("after", payload: [5], qos: .atLeastOnce))
            await client.disconnect()
        }
    }

    /// The outstanding publishes are bounded by their bytes as well as their count: large
    /// payloads (a tree's pages) wait while `maxQueuedBytes` are in libmosquitto's hands, one
    /// larger than the bound goes alone, and every one arrives whole.
    @Test func largePublishesWaitOnTheQueuedBytes() async throws {
        // Persistence: the pages retained before each stop are still there at the end.
        try await MosquittoBroker.with(.init(persistence: true)) { broker in
            let client = try await connectedClient(broker) {
                $0.maxQueuedBytes = 500_000
                $0.reconnectDelayMin = 0.1
                $0.reconnectDelayMax = 0.2
            }
            let page = [UInt8](repeating: 0x61, count: 200_000)
            // Waiting `publish`: never more than three pages of 200 KB outstanding at once.
            for index in 0..<12 {
                try await client.publish("pages/\(index)", payload: page, qos: .atLeastOnce, retain: true)
            }
            try await waitUntil("the pages acknowledged", timeout: 20) { client.queuedPublishCount == 0 }
            // At most three (0, 200 and 400 KB are below the bound); fewer when an acknowledgement
            // comes back before the next page is handed over.
            #expect((1...3).contains(client.queuedPublishHighWater), "\(client.queuedPublishHighWater)")

            await broker.stop()
            try await waitUntil("reconnecting") { client.connectionState.isReconnecting }
            // Held for the next connection while the bytes allow: 0, 200 and 400 KB are below
            // 500 KB; at 600 KB the next waits, however small.
            for index in 0..<3 {
                #expect(
                    try client.publishWithoutWaiting("held/\(index)", payload: page, qos: .atLeastOnce, retain: true))
            }
            #expect(try client.publishWithoutWaiting("held/small", payload: [1], qos: .atLeastOnce) == false)
            try await broker.start()
            try await waitUntil("the held pages acknowledged", timeout: 20) { client.queuedPublishCount == 0 }
            // Larger than the bound: it goes when nothing else is outstanding, alone.
            let large = [UInt8](repeating: 0x62, count: 700_000)
            await broker.stop()
            try await waitUntil("reconnecting again") { client.connectionState.isReconnecting }
            #expect(try client.publishWithoutWaiting("held/large", payload: large, qos: .atLeastOnce, retain: true))
            #expect(try client.publishWithoutWaiting("held/small", payload: [1], qos: .atLeastOnce) == false)
            try await broker.start()
            try await waitUntil("the large page acknowledged", timeout: 20) { client.queuedPublishCount == 0 }

            let subscriber = try await MQTTTestSubscriber.start(broker: broker, filter: "#", qos: .atLeastOnce)
            try await subscriber.waitForMessage("the large page", timeout: 20) { $0.topic == "held/large" }
            try await waitUntil("every page retained", timeout: 20) { subscriber.messages.count == 16 }
            let sizes = Dictionary(subscriber.messages.map { ($0.topic, $0.payload.count) }) { first, _ in first }
            #expect((0..<12).allSatisfy { sizes["pages/\($0)"] == 200_000 })
            #expect((0..<3).allSatisfy { sizes["held/\($0)"] == 200_000 })
            #expect(sizes["held/large"] == 700_000)
            await subscriber.stop()
            await client.disconnect()
        }
    }

    @Test func unreachableBrokerIsATypedErrorNotAHang() async throws {
        let port = try freePort() // nothing listens there
        let client = MQTTClient(configuration: MQTTConfiguration(host: "127.0.0.1", port: port))
        let error = await expectMQTTError { try await client.connect() }
        #expect(error?.code.rawValue == "connection-refused", "\(String(describing: error))")
        #expect(client.connectionState == .disconnected(error))
        await client.disconnect()
        await client.disconnect()

        var unknownHost = MQTTConfiguration(host: "no-such-host.invalid", port: 1884)
        unknownHost.connectTimeout = 20
        let dnsError = await expectMQTTError { try await MQTTClient(configuration: unknownHost).connect() }
        #expect(dnsError?.code.rawValue == "dns", "\(String(describing: dnsError))")
    }

    @Test func silentServerTimesOut() async throws {
        // A listening socket that never answers: the kernel completes the TCP handshake, no CONNACK follows.
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listening = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 && listen(fd, 4) == 0
            }
        }
        try #require(listening)
        var configuration = MQTTConfiguration(host: "127.0.0.1", port: Int(UInt16(bigEndian: address.sin_port)))
        configuration.connectTimeout = 1
        let client = MQTTClient(configuration: configuration)
        let error = await expectMQTTError { try await client.connect() }
        #expect(error?.code.rawValue == "timeout")
        await client.disconnect()
    }

    @Test func badInputIsATypedError() async throws {
        try await MosquittoBroker.with { broker in
            let idle = MQTTClient(configuration: broker.clientConfiguration())
            let notConnected = await expectMQTTError { try await idle.publish("x", "y") }
            #expect(notConnected?.code.rawValue == "no-connection")
            await idle.disconnect() // safe on a client that never connected
            #expect(idle.connectionState == .idle)

            let client = try await connectedClient(broker)
            // A NUL inside the topic (a C string would end there) and one past MQTT's 65535 bytes.
            for topic in ["a/+/b", "a/#", "", "a/\u{0}/b", "a\u{0}", String(repeating: "t", count: 65536)] {
                let error = await expectMQTTError { try await client.publish(topic, "x") }
                #expect(error?.code.rawValue == "invalid-topic", "\(topic)")
            }
            for filter in ["a/#/b", "a+", ""] {
                let error = await expectMQTTError { try await client.subscribe(filter) }
                #expect(error?.code.rawValue == "invalid-topic", "\(filter)")
            }
            await client.disconnect()
            let afterDisconnect = await expectMQTTError { try await client.publish("x", "y", qos: .atLeastOnce) }
            #expect(afterDisconnect?.code.rawValue == "no-connection")

            var badKeepAlive = broker.clientConfiguration()
            badKeepAlive.keepAlive = 1
            let keepAliveError = await expectMQTTError { try await MQTTClient(configuration: badKeepAlive).connect() }
            #expect(keepAliveError?.code.rawValue == "invalid-configuration")

            var persistentWithoutID = broker.clientConfiguration(clientID: "")
            persistentWithoutID.cleanStart = false
            let idError = await expectMQTTError { try await MQTTClient(configuration: persistentWithoutID).connect() }
            #expect(idError?.code.rawValue == "invalid-configuration")
        }
    }

    @Test func clientCanConnectAgainAfterDisconnect() async throws {
        try await MosquittoBroker.with { broker in
            let client = MQTTClient(configuration: broker.clientConfiguration())
            try await client.subscribe("again/#") // remembered before connecting, sent on connect
            for round in 0..<3 {
                let collector = MessageCollector(client.messages())
                try await client.connect()
                try await client.publish("again/\(round)", "\(round)", qos: .atLeastOnce)
                #expect(try await collector.waitFor().string == "\(round)")
                await client.disconnect()
                try await collector.waitForFinish()
            }
        }
    }

    @Test func runsAsAServiceUntilGracefulShutdown() async throws {
        try await MosquittoBroker.with { broker in
            let client = MQTTClient(configuration: broker.clientConfiguration())
            let states = StreamCollector(client.connectionStates())
            let group = ServiceGroup(
                configuration: .init(services: [client], logger: Logger(label: "test.service-group")))
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await group.run() }
                try await states.waitFor("connected") { $0 == .connected }
                await group.triggerGracefulShutdown()
                try await tasks.waitForAll()
            }
            #expect(client.connectionState == .disconnected(nil))
            try await states.waitForFinish()
        }
    }
}
