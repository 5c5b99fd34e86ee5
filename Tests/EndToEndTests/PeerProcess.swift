import Foundation
import XCTest
import TestSupport

/// Paths of the repository and the things beside it, from this file's location.
enum RepoPaths {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let python = root.appendingPathComponent(".venv/bin/python")
    static let peerScript = root.appendingPathComponent("Tests/HAPTests/peer/hap_peer.py")
    static let fixtures = root.appendingPathComponent("Tests/Fixtures/hap-fixtures")
}

/// A running `hap_peer.py`: a real HAP-python accessory server on 127.0.0.1 (TestSupport's
/// `HAPPeer`, with the names these tests use).
final class PeerProcess: @unchecked Sendable {
    let peer: HAPPeer

    static func requireVenv() throws {
        if let reason = HAPPeer.unavailableReason {
            // Under CI the real peer is installed by .ci/run: its absence is a failure.
            if HAPPeer.isRequired { throw ProcessError("\(reason) (CI=true: the HAP tests must run)") }
            throw XCTSkip(reason)
        }
    }

    /// `kept`: held until the peer has been reaped (`HAPPeer`'s `keeping`).
    init(
        port: Int, state: URL, bridge: Bool = true, pincode: String = "031-45-154",
        keeping kept: (any AnyObject & Sendable)? = nil
    ) throws {
        peer = try HAPPeer(port: port, state: state.path, bridge: bridge, setupCode: pincode, keeping: kept)
    }

    var port: Int { peer.port }
    var isRunning: Bool { peer.isRunning }

    func line(prefix: String, timeout: Double = 20) async throws -> String {
        try await peer.line(prefix: prefix, timeout: timeout)
    }

    func waitReady() async throws { try await peer.waitReady() }

    func command(_ text: String) async throws -> String { try await peer.command(text) }

    func stop() async { await peer.stop() }
}

struct PeerFailure: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}
