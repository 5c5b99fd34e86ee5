import Foundation
import HomeModel
import TestSupport
import XCTest

@testable import HAP

/// The HAP source's handshakes, at most `SetupSlots.limit` at a time, against accessories that
/// accept a connection and never answer pair-verify (as one hung on a busy network would).
final class SetupSlotsTests: XCTestCase {
    /// Accepts every connection on a loopback port, says nothing, and counts: how many were
    /// accepted, and how many are open now. `dropAll` closes the open ones.
    final class CountingListener: @unchecked Sendable {
        let port: Int
        private let listener: Int32
        private let lock = NSLock()
        private var open: [Int32] = []
        private var accepted = 0

        init() throws {
            let sock = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(sock, $0, length) == 0 && listen(sock, 64) == 0
                        && getsockname(sock, $0, &length) == 0
                }
            }
            guard bound else { throw ProcessError("bind/listen: \(String(cString: strerror(errno)))") }
            port = Int(UInt16(bigEndian: address.sin_port))
            listener = sock
            let thread = Thread { [self] in
                while true {
                    let fd = accept(listener, nil, nil)
                    if fd < 0 { return }
                    lock.withLock {
                        open.append(fd)
                        accepted += 1
                    }
                }
            }
            thread.start()
        }

        var counts: (accepted: Int, open: Int) { lock.withLock { (accepted, open.count) } }

        func dropAll() {
            lock.withLock {
                for fd in open { Glibc.close(fd) }
                open = []
            }
        }

        func close() {
            dropAll()
            shutdown(listener, Int32(SHUT_RDWR))
            Glibc.close(listener)
        }
    }

    func testNoMoreThanTheLimitHandshakeAtOnceAndAFreedSlotGoesToTheNext() async throws {
        let listener = try CountingListener()
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
        listener.dropAll()
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
