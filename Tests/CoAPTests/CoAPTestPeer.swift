import Crypto
import Foundation
import TestSupport
import XCTest

/// A running `peer/coap_peer.py` (aiocoap, an implementation independent of libcoap) in one of
/// its modes; it binds ::1 on a free port and prints a line per thing a test counts.
final class CoAPTestPeer: Sendable {
    static let script = HAPPeer.repositoryRoot.appendingPathComponent("Tests/CoAPTests/peer/coap_peer.py")

    let child: ChildProcess
    let port: UInt16

    /// Skips the test when the venv is missing, except under CI, where it must run.
    static func requireVenv() throws {
        if let reason = HAPPeer.unavailableReason {
            if HAPPeer.isRequired { XCTFail(reason) }
            throw XCTSkip(reason)
        }
    }

    init(_ arguments: [String]) async throws {
        try Self.requireVenv()
        child = try ChildProcess(HAPPeer.python.path, [Self.script.path] + arguments)
        try await child.waitForOutput(containing: "ready ", timeout: 20)
        let line = child.outputLines.first { $0.hasPrefix("ready ") } ?? ""
        port = UInt16(line.dropFirst("ready ".count)) ?? 0
    }

    /// Runs the aiocoap client once and returns its line (`answer CODE LENGTH SHA256` or `error …`).
    static func client(_ method: String, _ uri: String, payload: [UInt8] = []) async throws -> String {
        try requireVenv()
        let hex = payload.map { String(format: "%02x", $0) }.joined()
        let child = try ChildProcess(HAPPeer.python.path, [script.path, "client", method, uri, hex])
        try await child.waitForExit(timeout: 40)
        return child.outputLines.first { $0.hasPrefix("answer ") || $0.hasPrefix("error ") }
            ?? "no line; stderr: \(child.standardError)"
    }

    func lines(_ prefix: String) -> [String] { child.outputLines.filter { $0.hasPrefix(prefix) } }

    func waitForLines(_ prefix: String, count: Int, timeout: Double = 10) async throws {
        try await waitUntil("\(count) '\(prefix)' lines from the aiocoap peer", timeout: timeout) {
            lines(prefix).count >= count
        }
    }

    deinit { child.signal(SIGKILL) }
}

/// SHA-256 as the peer prints it, to compare a body without printing it.
func sha256Hex(_ bytes: [UInt8]) -> String { SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined() }

/// The body aiocoap's /big answers and the tests' big routes answer: 5000 bytes, i % 251.
let bigBody: [UInt8] = (0..<5000).map { UInt8($0 % 251) }
