import Foundation
import HomeModel
import TestSupport
import XCTest

@testable import HAP

/// The HAP source's handshakes, at most `SetupSlots.limit` at a time, against accessories that
/// accept a connection and never answer pair-verify (as one hung on a busy network would).
final class SetupSlotsTests: XCTestCase {
    func testNoMoreThanTheLimitHandshakeAtOnceAndAFreedSlotGoesToTheNext() async throws {
        let listener = try SilentListener.accepting()
        defer { listener.close() }
        let directory = try TemporaryDirectory(prefix: "homemqtt-slots")
        let store = HAPPairingStore(directory: directory.url)
        let key = String(repeating: "11", count: 32)
        for index in 0..<20 {
            try store.save(
                HAPPairing(
                    accessoryPairingID: String(format: "AA:BB:CC:DD:EE:%02X", index), accessoryLTPK: key,
                    controllerPairingID: UUID().uuidString, controllerLTSK: key, controllerLTPK: key, host: "127.0.0.1",
                    port: listener.port))
        }
        let source = HAPSource(store: store, pollInterval: 0, backoff: (30, 1, 30), followsNetwork: false)
        let running = Task { try await source.run() }

        let limit = SetupSlots.limit
        try await waitUntil("\(limit) handshakes", timeout: 10, pollInterval: 0.02) {
            listener.counts.accepted >= limit
        }
        try await Task.sleep(for: .milliseconds(500))
        XCTAssertEqual(listener.counts.accepted, limit, "more handshakes at once than the limit")

        // Those accessories close the connection: each slot goes to one that waited.
        listener.dropAccepted()
        try await waitUntil("the next \(limit)", timeout: 10, pollInterval: 0.02) {
            listener.counts.accepted >= 2 * limit
        }
        try await Task.sleep(for: .milliseconds(500))
        XCTAssertEqual(listener.counts.accepted, 2 * limit)
        XCTAssertLessThanOrEqual(listener.counts.open, limit)

        // Stopping ends the source at once, waiters and holders alike.
        let stopping = ContinuousClock.now
        running.cancel()
        _ = try? await running.value
        XCTAssertLessThan(ContinuousClock.now - stopping, .seconds(3))
    }
}
