public import Foundation
import Synchronization

// Test helpers for time and cleanup: waiting for a condition with a timeout, and temporary
// directories removed at the latest when the process exits.

/// Thrown by the helpers when something did not happen in time; names what was awaited.
public struct TestTimeoutError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Polls `condition` until it is true; throws `TestTimeoutError` naming `what` after `timeout` seconds.
public func waitUntil(
    _ what: String, timeout: Double = 10, pollInterval: Double = 0.01,
    _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + .seconds(timeout)
    while true {
        if try await condition() { return }
        if ContinuousClock.now >= deadline {
            throw TestTimeoutError("timed out after \(timeout) s waiting for \(what)")
        }
        try await Task.sleep(for: .seconds(pollInterval))
    }
}

/// What is still alive at process exit: XCTest keeps test-case instances (and whatever they hold) until the
/// process ends, so deinit alone would leave temp dirs and broker processes behind.
enum ExitCleanup {
    static let directories = Mutex<Set<String>>([])
    static let processes = Mutex<Set<pid_t>>([])
    static let registered: Bool = {
        atexit {
            for pid in ExitCleanup.processes.withLock({ $0 }) { kill(pid, SIGKILL) }
            for path in ExitCleanup.directories.withLock({ $0 }) { try? FileManager.default.removeItem(atPath: path) }
        }
        return true
    }()
}

/// A fresh directory under the system temp dir, removed when the object goes away, on `remove()`, or at
/// the latest when the test process exits.
public final class TemporaryDirectory: Sendable {
    public let path: String

    public init(prefix: String = "homemqtt-test") throws {
        _ = ExitCleanup.registered
        var base = NSTemporaryDirectory()
        while base.count > 1 && base.hasSuffix("/") { base.removeLast() }
        var template = Array((base + "/" + prefix + "-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else {
            throw TestTimeoutError("mkdtemp failed: \(String(cString: strerror(errno)))")
        }
        path = String(cString: made)
        ExitCleanup.directories.withLock { _ = $0.insert(path) }
    }

    public var url: URL { URL(fileURLWithPath: path, isDirectory: true) }

    /// `path` + "/" + name.
    public func file(_ name: String) -> String { path + "/" + name }

    /// Writes `text` to `name` (sub-directories made as needed) and returns the file's URL.
    @discardableResult
    public func write(_ name: String, _ text: String) throws -> URL {
        let target = url.appendingPathComponent(name)
        try FileManager.default.createDirectory(
            at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(text.utf8).write(to: target)
        return target
    }

    /// The names in the directory now.
    public func entries() -> [String] { (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] }

    public func remove() {
        try? FileManager.default.removeItem(atPath: path)
        ExitCleanup.directories.withLock { _ = $0.remove(path) }
    }

    deinit { remove() }
}

/// Runs `body` with a temporary directory that is removed afterwards.
public func withTemporaryDirectory<T>(
    prefix: String = "homemqtt-test", _ body: (TemporaryDirectory) async throws -> T
) async throws -> T {
    let directory = try TemporaryDirectory(prefix: prefix)
    defer { directory.remove() }
    return try await body(directory)
}
