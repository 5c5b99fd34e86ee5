public import Foundation
import Synchronization

// Child processes for tests and benchmarks: finding an executable, spawning one with its output in
// files, and running a command to completion.

public struct ProcessError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Finished process: exit status (or 128 + signal) and captured output.
public struct ProcessResult: Sendable {
    public var status: Int32
    public var standardOutput: String
    public var standardError: String
}

/// Looks an executable up on PATH and the sbin directories (mosquitto lives in /usr/sbin).
public func findExecutable(_ name: String) throws -> String {
    if name.contains("/") { return name }
    let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
    let directories =
        path.split(separator: ":").map(String.init) + ["/usr/sbin", "/usr/local/sbin", "/sbin", "/usr/bin"]
    for directory in directories {
        let candidate = directory + "/" + name
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
    }
    throw ProcessError("executable '\(name)' not found on PATH or in sbin directories")
}

/// An executable of this package (`homemqtt`) that SwiftPM built beside the running test or
/// bench binary (on macOS the test binary is inside an .xctest bundle).
public func builtProduct(_ name: String) throws -> String {
    let running =
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    var directory = URL(fileURLWithPath: running).deletingLastPathComponent()
    while directory.path.contains(".xctest") { directory = directory.deletingLastPathComponent() }
    let candidate = directory.appendingPathComponent(name).path
    guard FileManager.default.isExecutableFile(atPath: candidate) else {
        throw ProcessError("no \(name) executable next to \(running); build it with `swift build`")
    }
    return candidate
}

/// A child process whose stdout and stderr go to files (no pipe can fill up and block it).
/// Started with `posix_spawn` and an empty signal mask: test-runner threads block signals, and a child
/// inheriting that mask would ignore SIGTERM (mosquitto must get it to save its database).
/// Killed with SIGKILL when the object goes away while still running.
public final class ChildProcess: Sendable {
    private let state = Mutex<(reaped: Bool, status: Int32)>((false, 0))
    private let outputDirectory: TemporaryDirectory
    public let executable: String
    public let arguments: [String]
    public let pid: pid_t
    /// The write end of the child's stdin, when started with `standardInput: true`.
    private let input = Mutex<Int32>(-1)
    /// What the child uses and must outlive it (its config's temporary directory): released
    /// only after `deinit` has killed and reaped the child. A gateway still running when its
    /// directory went away wrote its state into a new one at its stop, left behind in /tmp.
    private let kept: (any AnyObject & Sendable)?

    public var standardOutputPath: String { outputDirectory.file("stdout") }
    public var standardErrorPath: String { outputDirectory.file("stderr") }

    /// Starts `executable` (a name looked up with `findExecutable`, or a path).
    /// `environment` entries are added to (override) the test process's environment; `kept` is
    /// held until the child has been reaped.
    public init(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil,
        workingDirectory: String? = nil, standardInput: Bool = false, keeping kept: (any AnyObject & Sendable)? = nil
    ) throws {
        self.kept = kept
        let path = try findExecutable(executable)
        self.executable = path
        self.arguments = arguments
        outputDirectory = try TemporaryDirectory(prefix: "homemqtt-proc")

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let workingDirectory {
            // glibc ≥ 2.29 has it, but the Glibc module does not export the _np declaration.
            typealias AddChdir =
                @convention(c) (
                    UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>
                ) -> Int32
            guard let symbol = dlsym(nil, "posix_spawn_file_actions_addchdir_np") else {
                throw ProcessError("posix_spawn_file_actions_addchdir_np is not available")
            }
            _ = unsafeBitCast(symbol, to: AddChdir.self)(&actions, workingDirectory)
        }
        var pipeEnds: [Int32] = [-1, -1]
        if standardInput {
            guard pipe(&pipeEnds) == 0 else { throw ProcessError("pipe failed: \(String(cString: strerror(errno)))") }
            // Close-on-exec on both ends; dup2 gives the child a plain fd 0.
            for fd in pipeEnds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
            // dup2 clears close-on-exec on the child's fd 0 only.
            posix_spawn_file_actions_adddup2(&actions, pipeEnds[0], 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        posix_spawn_file_actions_addopen(
            &actions, 1, outputDirectory.file("stdout"), O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(
            &actions, 2, outputDirectory.file("stderr"), O_WRONLY | O_CREAT | O_TRUNC, 0o644)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var emptyMask = sigset_t()
        sigemptyset(&emptyMask)
        var defaults = sigset_t()
        sigfillset(&defaults)
        posix_spawnattr_setsigmask(&attributes, &emptyMask)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let environmentList = ProcessInfo.processInfo.environment.merging(environment ?? [:]) { $1 }
            .map { "\($0.key)=\($0.value)" }
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = environmentList.map { strdup($0) } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var child: pid_t = 0
        let rc = posix_spawn(&child, path, &actions, &attributes, argv, envp)
        if standardInput { close(pipeEnds[0]) }
        guard rc == 0 else {
            if standardInput { close(pipeEnds[1]) }
            throw ProcessError("could not start \(path): \(String(cString: strerror(rc)))")
        }
        pid = child
        input.withLock { $0 = pipeEnds[1] }
        _ = ExitCleanup.registered
        ExitCleanup.processes.withLock { _ = $0.insert(child) }
    }

    /// Writes to the child's stdin (started with `standardInput: true`).
    public func write(_ text: String) throws {
        try input.withLock { fd in
            guard fd >= 0 else { throw ProcessError("\(executable) has no stdin pipe (or it was closed)") }
            var bytes = Array(text.utf8)[...]
            while !bytes.isEmpty {
                let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
                if written < 0 {
                    if errno == EINTR { continue }
                    throw ProcessError("writing to \(executable) failed: \(String(cString: strerror(errno)))")
                }
                bytes = bytes.dropFirst(written)
            }
        }
    }

    /// Closes the child's stdin: it reads end of file.
    public func closeInput() {
        input.withLock { fd in
            if fd >= 0 { close(fd) }
            fd = -1
        }
    }

    /// stdout split into complete lines (a line still being written is left out).
    public var outputLines: [String] {
        let text = standardOutput
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        lines.removeLast() // after the last newline: empty, or a partial line
        return lines
    }

    deinit {
        closeInput()
        if reap() == nil {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
    }

    /// Collects the exit status if the child has exited (once; later calls return the stored status).
    @discardableResult
    private func reap() -> Int32? {
        state.withLock { state -> Int32? in
            if state.reaped { return state.status }
            var status: Int32 = 0
            let result = waitpid(pid, &status, WNOHANG)
            if result == -1 && errno == ECHILD {
                // Reaped by someone else (a SIGCHLD handler in the process): it has exited.
                state = (true, -1)
                ExitCleanup.processes.withLock { _ = $0.remove(pid) }
                return -1
            }
            guard result == pid else { return nil }
            let signalled = status & 0x7f
            state = (true, signalled == 0 ? (status >> 8) & 0xff : 128 + signalled)
            ExitCleanup.processes.withLock { _ = $0.remove(pid) }
            return state.status
        }
    }

    public var isRunning: Bool { reap() == nil }

    /// Exit status, or 128 + signal number when killed by a signal; nil while running.
    public var exitStatus: Int32? { reap() }

    public var standardOutput: String { (try? String(contentsOfFile: standardOutputPath, encoding: .utf8)) ?? "" }
    public var standardError: String { (try? String(contentsOfFile: standardErrorPath, encoding: .utf8)) ?? "" }

    public func signal(_ signal: Int32) {
        // Under the lock so that the pid cannot be reaped (and reused) between the check and the kill.
        state.withLock { state in
            if !state.reaped { _ = kill(pid, signal) }
        }
    }

    /// Waits for exit; returns the status (see `exitStatus`).
    @discardableResult
    public func waitForExit(timeout: Double = 10) async throws -> Int32 {
        try await waitUntil("\(executable) to exit", timeout: timeout) { !isRunning }
        return exitStatus ?? -1
    }

    /// SIGTERM, then SIGKILL if it has not exited after `grace` seconds.
    @discardableResult
    public func terminate(grace: Double = 5) async -> Int32 {
        signal(SIGTERM)
        if let status = try? await waitForExit(timeout: grace) { return status }
        signal(SIGKILL)
        return (try? await waitForExit(timeout: 5)) ?? -1
    }

    /// Waits until stdout contains `text`; fails early if the process exits without printing it.
    public func waitForOutput(containing text: String, timeout: Double = 10) async throws {
        try await waitUntil("'\(text)' on the output of \(executable)", timeout: timeout) {
            if standardOutput.contains(text) { return true }
            if !isRunning && !standardOutput.contains(text) {
                throw ProcessError(
                    "\(executable) exited (\(exitStatus ?? -1)) without printing '\(text)'; stderr: \(standardError)")
            }
            return false
        }
    }
}

/// Runs a command to completion, capturing its output. Killed and reported if it takes longer than `timeout`.
public func runProcess(
    _ executable: String, _ arguments: [String], timeout: Double = 20, environment: [String: String]? = nil,
    workingDirectory: String? = nil
) async throws -> ProcessResult {
    let child = try ChildProcess(executable, arguments, environment: environment, workingDirectory: workingDirectory)
    do {
        try await child.waitForExit(timeout: timeout)
    } catch {
        await child.terminate(grace: 1)
        throw ProcessError(
            "\(executable) \(arguments.joined(separator: " ")) did not finish within \(timeout) s; "
                + "stdout: \(child.standardOutput) stderr: \(child.standardError)")
    }
    return ProcessResult(
        status: child.exitStatus ?? -1, standardOutput: child.standardOutput, standardError: child.standardError)
}

/// Like `runProcess`, but throws unless the exit status is 0.
@discardableResult
public func runChecked(
    _ executable: String, _ arguments: [String], timeout: Double = 20, environment: [String: String]? = nil,
    workingDirectory: String? = nil
) async throws -> ProcessResult {
    let result = try await runProcess(
        executable, arguments, timeout: timeout, environment: environment, workingDirectory: workingDirectory)
    guard result.status == 0 else {
        throw ProcessError(
            "\(executable) \(arguments.joined(separator: " ")) exited \(result.status): \(result.standardError)")
    }
    return result
}
