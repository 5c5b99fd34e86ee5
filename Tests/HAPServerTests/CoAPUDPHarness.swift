import CoAP
import Foundation
import HAP
import HAPServer
import HAPThread
import HomeModel
import Logging
import Synchronization
import TestSupport
import XCTest

/// The HAP-over-CoAP peers of CoAPPeersTests over real UDP on ::1: the accessory file served by
/// a `HAPThreadAccessory` (a `CoAPServer` on a free port), controllers each with a `CoAPClient`
/// of their own (their own address, so their own session).
struct CoAPUDPPeers {
    static let code = CoAPPeers.code
    let database: FileAccessoryDatabase
    let directory: TemporaryDirectory

    init(file: String = "garage.yml") throws {
        database = try FileAccessoryDatabase(file: file)
        directory = try TemporaryDirectory(prefix: "hap-coap-udp")
    }

    static var logger: Logger {
        var logger = Logger(label: "hap-coap-udp-test")
        logger.logLevel = ProcessInfo.processInfo.environment["HAP_SERVER_TEST_LOG"] == nil ? .warning : .trace
        return logger
    }

    /// Serves the accessory on `port` of ::1 (0: a free one) while `body` runs, then stops it and
    /// waits until its port is closed. A second call on the same port is the accessory
    /// restarted: the same state directory, a new server and no sessions.
    func serve<T: Sendable>(
        port: UInt16 = 0, _ body: @Sendable (HAPThreadAccessory) async throws -> T
    ) async throws -> T {
        var configuration = HAPThreadAccessory.Configuration(
            accessory: HAPCoAPAccessory.Configuration(
                stateDirectory: URL(fileURLWithPath: directory.path), setupCode: Self.code),
            bind: CoAPPeer(host: "::1", port: port))
        // As CoAPPeers: the database's deadline is the test's, never the machine's.
        configuration.accessory.databaseDeadline = { [database] _ in
            if database.stalled { return }
            while !Task.isCancelled { try await Task.sleep(for: .seconds(3600)) }
        }
        let served = try HAPThreadAccessory(configuration: configuration, database: database, logger: Self.logger)
        database.attach(served.accessory)
        try await served.accessory.databaseChanged()
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await served.run() }
            defer { group.cancelAll() }
            return try await body(served)
        }
    }

    /// Pair-setup with `code` from a client of its own (an address of its own).
    static func pair(_ accessory: CoAPPeer, code: String = Self.code.revealed) async throws -> HAPPairing {
        let client = try HAPThreadControllerLink.makeClient()
        do {
            let pairing = try await HAPCoAPController.pair(
                exchange: HAPThreadControllerLink(client: client, accessory: accessory), host: accessory.host,
                port: Int(accessory.port), setupCode: code)
            await client.close()
            return pairing
        } catch {
            await client.close()
            throw error
        }
    }

    /// A controller with `pairing` on a client of its own, the accessory's events delivered to
    /// it while `body` runs; the client is closed after.
    static func withController<T: Sendable>(
        _ pairing: HAPPairing, _ accessory: CoAPPeer, _ body: @Sendable (UDPController) async throws -> T
    ) async throws -> T {
        let client = try HAPThreadControllerLink.makeClient()
        let link = HAPThreadControllerLink(client: client, accessory: accessory)
        let recorder = RecordingExchange(link)
        let controller = HAPCoAPController(
            pairing: pairing, exchange: recorder, logger: Logger(label: "hap-coap-udp-controller"))
        return try await withThrowingTaskGroup(of: Void.self) { group in
            // Ends when the client closes (its events finish).
            group.addTask { await link.deliverEvents(to: controller) }
            let result: Result<T, any Error>
            do {
                result = .success(try await body(UDPController(controller: controller, recorder: recorder)))
            } catch {
                result = .failure(error)
            }
            await client.close()
            return try result.get()
        }
    }
}

/// A controller over UDP and the paths it posted, in order.
struct UDPController: Sendable {
    let controller: HAPCoAPController
    let recorder: RecordingExchange
    var posts: [String] { recorder.posts }
}

/// Records the paths a controller posts, for the same assertions on the order of pairing and
/// session requests as the memory link's `posts(from:)`.
final class RecordingExchange: HAPCoAPExchange {
    let inner: any HAPCoAPExchange
    private let paths = Mutex<[String]>([])

    init(_ inner: any HAPCoAPExchange) { self.inner = inner }

    var posts: [String] { paths.withLock { $0 } }

    func post(_ path: String, _ payload: [UInt8]) async throws(HAPError) -> CoAPReply {
        paths.withLock { $0.append(path) }
        return try await inner.post(path, payload)
    }
}

/// The accessory tree a controller read, held to the accessory file it was served from: every
/// service and characteristic with its type, format, permissions, range and value, then the
/// Pairing service (0x55). The same assertions as CoAPPeersTests' over the memory link.
func assertServesTheFile(
    _ tree: [HomeModel.Accessory], _ file: HomeModel.Accessory, file source: StaticString = #filePath,
    line: UInt = #line
) throws {
    XCTAssertEqual(tree.count, 1, file: source, line: line)
    let served = try XCTUnwrap(tree.first, file: source, line: line)
    XCTAssertEqual(served.name, "Garage Door Opener", file: source, line: line)
    XCTAssertEqual(served.manufacturer, "Kilgo Devices, Inc.", file: source, line: line)
    XCTAssertEqual(
        served.services.map(\.type), file.services.map(\.type) + [StandardUUID.longForm("55")], file: source,
        line: line)
    for (got, want) in zip(served.services, file.services) {
        XCTAssertEqual(got.iid, want.iid, file: source, line: line)
        XCTAssertEqual(got.isPrimary, want.isPrimary, "service \(want.type)", file: source, line: line)
        XCTAssertEqual(got.characteristics.map(\.iid), want.characteristics.map(\.iid), file: source, line: line)
        XCTAssertEqual(got.characteristics.map(\.type), want.characteristics.map(\.type), file: source, line: line)
        for (g, w) in zip(got.characteristics, want.characteristics) {
            let what = "characteristic \(w.type)"
            XCTAssertEqual(g.metadata.format, w.metadata.format, what, file: source, line: line)
            XCTAssertEqual(g.metadata.permissions, w.metadata.permissions, what, file: source, line: line)
            XCTAssertEqual(g.metadata.unit, w.metadata.unit, what, file: source, line: line)
            XCTAssertEqual(g.metadata.minValue, w.metadata.minValue, what, file: source, line: line)
            XCTAssertEqual(g.metadata.maxValue, w.metadata.maxValue, what, file: source, line: line)
            guard w.metadata.permissions.contains(.read) else { continue }
            if w.metadata.format == .float {
                // HAP-BLE carries a float in 32 bits.
                XCTAssertEqual(
                    try XCTUnwrap(g.value?.doubleValue), try XCTUnwrap(w.value?.doubleValue), accuracy: 1e-6, what,
                    file: source, line: line)
            } else {
                XCTAssertEqual(g.value, w.value, what, file: source, line: line)
            }
        }
    }
    let light = try XCTUnwrap(
        served.services.first { $0.type == StandardUUID.longForm("43") }, file: source, line: line)
    let fade = try XCTUnwrap(light.characteristics.first { $0.name == "Fade Rate" }, file: source, line: line)
    XCTAssertEqual(fade.type, "7E536242-341C-4862-BE90-272CE15BD633", file: source, line: line)
    XCTAssertEqual(fade.value?.doubleValue, 1.0, file: source, line: line)
}

extension HAPCoAPController {
    /// The next event, or nil when none comes within `limit`: over UDP an event that went
    /// astray must fail the test, not hang it. The limit only bounds a failure; an event that
    /// arrives is taken at once. One waiter at a time (the stream has one consumer).
    nonisolated func nextEvent(within limit: Duration = .seconds(20)) async -> HAPCoAPEvent? {
        await withTaskGroup(of: HAPCoAPEvent?.self) { group in
            group.addTask { [events] in
                var iterator = events.makeAsyncIterator()
                return await iterator.next()
            }
            group.addTask {
                try? await Task.sleep(for: limit)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }
}
