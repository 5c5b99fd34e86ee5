import Foundation
import XCTest

/// Paths of the repository and the things beside it, from this file's location.
enum RepoPaths {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let python = root.appendingPathComponent(".venv/bin/python")
    static let peerScript = root.appendingPathComponent("Tests/HAPTests/peer/hap_peer.py")
    static let fixtures = root.deletingLastPathComponent().appendingPathComponent("shared/hap-fixtures")
}

/// A running `hap_peer.py`: a real HAP-python accessory server on 127.0.0.1.
final class PeerProcess: @unchecked Sendable {
    let process = Process()
    private let stdinPipe = Pipe()
    private let stdoutPipe = Pipe()
    private let lock = NSLock()
    private var lines: [String] = []
    private var partial = ""
    private(set) var port: Int = 0

    static func requireVenv() throws {
        guard FileManager.default.isExecutableFile(atPath: RepoPaths.python.path) else {
            throw XCTSkip("HAP-python venv missing at \(RepoPaths.python.path): run Scripts/bootstrap.sh to run the tests against a real accessory")
        }
    }

    init(port: Int, state: URL, bridge: Bool = true, pincode: String = "031-45-154") throws {
        process.executableURL = RepoPaths.python
        var args = [RepoPaths.peerScript.path, "--port", String(port), "--pincode", pincode, "--state", state.path]
        if bridge { args.append("--bridge") }
        process.arguments = args
        process.standardInput = stdinPipe
        process.standardOutput = stdoutPipe
        // HAP_PEER_LOG=/path keeps the peer's debug log for a failing run.
        if let log = ProcessInfo.processInfo.environment["HAP_PEER_LOG"] {
            FileManager.default.createFile(atPath: log, contents: nil)
            process.standardError = FileHandle(forWritingAtPath: log)
            args.append("--debug")
            process.arguments = args
        } else {
            process.standardError = FileHandle.nullDevice
        }
        stdoutPipe.fileHandleForReading.readabilityHandler = { [weak self] handle in
            let data = handle.availableData
            guard let self, !data.isEmpty else { return }
            self.lock.lock()
            self.partial += String(decoding: data, as: UTF8.self)
            while let nl = self.partial.firstIndex(of: "\n") {
                self.lines.append(String(self.partial[..<nl]))
                self.partial = String(self.partial[self.partial.index(after: nl)...])
            }
            self.lock.unlock()
        }
        try process.run()
    }

    private func take(where match: (String) -> Bool) -> String? {
        lock.lock()
        defer { lock.unlock() }
        guard let i = lines.firstIndex(where: match) else { return nil }
        return lines.remove(at: i)
    }

    /// Waits for and removes the first line with `prefix`.
    func line(prefix: String, timeout: Double = 20) async throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let l = take(where: { $0.hasPrefix(prefix) }) { return l }
            if !process.isRunning { break }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        throw PeerFailure(message: "peer did not print '\(prefix)' (running: \(process.isRunning))")
    }

    func waitReady() async throws {
        let l = try await line(prefix: "READY ")
        port = Int(l.dropFirst(6)) ?? 0
    }

    /// Sends a command and returns its answer line.
    func command(_ text: String) async throws -> String {
        stdinPipe.fileHandleForWriting.write(Data((text + "\n").utf8))
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if let l = take(where: { $0.hasPrefix("OK") || $0.hasPrefix("VALUE") || $0.hasPrefix("PAIRINGS") || $0.hasPrefix("ERR") }) {
                return l
            }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        throw PeerFailure(message: "peer did not answer '\(text)'")
    }

    func stop() async {
        guard process.isRunning else { return }
        try? stdinPipe.fileHandleForWriting.close()
        process.terminate()
        let deadline = Date().addingTimeInterval(10)
        while process.isRunning && Date() < deadline { try? await Task.sleep(nanoseconds: 20_000_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        stdoutPipe.fileHandleForReading.readabilityHandler = nil
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}

struct PeerFailure: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

func makeTempDirectory() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("hap-tests-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}
