public import Foundation

/// A running `Tests/HAPTests/peer/hap_peer.py`: a real HAP-python accessory server on
/// 127.0.0.1 (a bridge with a light, a switch, a sensor and a garage door by default), driven
/// by commands on its stdin (`set`, `get`, `pairings`, `drop`, `add-switch`; see the script).
public final class HAPPeer: @unchecked Sendable {
    /// The repository, from this file's place in it.
    public static let repositoryRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    public static let python = repositoryRoot.appendingPathComponent(".venv/bin/python")
    public static let script = repositoryRoot.appendingPathComponent("Tests/HAPTests/peer/hap_peer.py")
    public static let defaultSetupCode = "031-45-154"

    /// Whether the peer must run: under CI (`CI=true`), where `.ci/run` installs it.
    public static var isRequired: Bool { ProcessInfo.processInfo.environment["CI"] == "true" }

    /// Why the peer cannot run here (the venv is missing), or nil when it can. Tests turn this
    /// into an XCTSkip, or a failure when `isRequired`.
    public static var unavailableReason: String? {
        FileManager.default.isExecutableFile(atPath: python.path)
            ? nil
            : "HAP-python venv missing at \(python.path): run Scripts/bootstrap.sh to run the tests against a real accessory"
    }

    private let child: ChildProcess
    private let lock = NSLock()
    /// How many stdout lines have been looked at, and the ones not yet taken.
    private var seen = 0
    private var pending: [String] = []
    private var readyPort = 0

    /// The port it listens on, once `waitReady()` returned.
    public var port: Int { lock.withLock { readyPort } }
    public var isRunning: Bool { child.isRunning }
    public var pid: pid_t { child.pid }

    /// Starts the peer. `port` 0 picks a free port; `state` is HAP-python's persist file (keep
    /// it to restart the same accessory with its pairings). `HAP_PEER_LOG=/path` keeps its debug log.
    /// Spawned by TestSupport's `ChildProcess`, not Foundation's `Process`, whose child reaping
    /// interferes with the other tests' processes when suites run in parallel.
    /// `advertise` makes it announce itself through mDNS (python-zeroconf on 127.0.0.1) as a
    /// real accessory does; `launcher` is a command it runs under (`ip netns exec <name>`).
    /// `address` is where it listens, advertises and runs mDNS (comma-separated for several);
    /// `listen` and `announced` replace it for listening and for what mDNS announces.
    /// `kept` (the directory `state` is in) is held until the peer has been reaped: it writes its
    /// state whenever its pairings change, and a directory released before made it again.
    public init(
        port: Int = 0, state: String, bridge: Bool = true, setupCode: String = HAPPeer.defaultSetupCode,
        advertise: Bool = false, launcher: [String] = [], address: String = "127.0.0.1", listen: [String] = [],
        announced: [String] = [], keeping kept: (any AnyObject & Sendable)? = nil
    ) throws {
        var args = [
            Self.script.path, "--port", String(port), "--pincode", setupCode, "--state", state, "--address", address,
        ]
        if bridge { args.append("--bridge") }
        if advertise { args.append("--mdns") }
        if !listen.isEmpty { args += ["--listen", listen.joined(separator: ",")] }
        if !announced.isEmpty { args += ["--advertise", announced.joined(separator: ",")] }
        if ProcessInfo.processInfo.environment["HAP_PEER_LOG"] != nil { args.append("--debug") }
        let command = launcher + [Self.python.path] + args
        child = try ChildProcess(command[0], Array(command.dropFirst()), standardInput: true, keeping: kept)
    }

    /// Starts a peer and waits until it accepts connections.
    public static func start(
        port: Int = 0, state: String, bridge: Bool = true, setupCode: String = HAPPeer.defaultSetupCode,
        advertise: Bool = false, launcher: [String] = [], address: String = "127.0.0.1", listen: [String] = [],
        announced: [String] = [], keeping kept: (any AnyObject & Sendable)? = nil
    ) async throws -> HAPPeer {
        let peer = try HAPPeer(
            port: port, state: state, bridge: bridge, setupCode: setupCode, advertise: advertise, launcher: launcher,
            address: address, listen: listen, announced: announced, keeping: kept)
        do {
            try await peer.waitReady()
        } catch {
            await peer.stop()
            throw error
        }
        return peer
    }

    private func take(where match: (String) -> Bool) -> String? {
        let lines = child.outputLines
        return lock.withLock {
            if lines.count > seen {
                pending += lines[seen...]
                seen = lines.count
            }
            guard let i = pending.firstIndex(where: match) else { return nil }
            return pending.remove(at: i)
        }
    }

    /// Waits for and removes the first output line starting with `prefix`.
    public func line(prefix: String, timeout: Double = 20) async throws -> String {
        var found: String?
        try await waitUntil("the HAP peer to print '\(prefix)'", timeout: timeout, pollInterval: 0.02) {
            found = take(where: { $0.hasPrefix(prefix) })
            if found == nil && !child.isRunning {
                throw ProcessError("the HAP peer exited before printing '\(prefix)'")
            }
            return found != nil
        }
        return found ?? ""
    }

    public func waitReady() async throws {
        let line = try await line(prefix: "READY ")
        let port = Int(line.dropFirst(6)) ?? 0
        lock.withLock { readyPort = port }
    }

    /// Sends a command; returns its answer line (`OK…`, `VALUE…`, `PAIRINGS…`, `TIMINGS…` or `ERR…`).
    public func command(_ text: String) async throws -> String {
        try child.write(text + "\n")
        var answer: String?
        try await waitUntil("the HAP peer's answer to '\(text)'", timeout: 10, pollInterval: 0.02) {
            answer = take(where: {
                $0.hasPrefix("OK") || $0.hasPrefix("VALUE") || $0.hasPrefix("PAIRINGS") || $0.hasPrefix("TIMINGS")
                    || $0.hasPrefix("ERR")
            })
            return answer != nil
        }
        return answer ?? ""
    }

    /// The JSON text of a characteristic's value inside the accessory (`get <aid> <iid>`).
    public func value(aid: UInt64, iid: UInt64) async throws -> String {
        let answer = try await command("get \(aid) \(iid)")
        let prefix = "VALUE \(aid) \(iid) "
        guard answer.hasPrefix(prefix) else {
            throw ProcessError("the HAP peer answered 'get \(aid) \(iid)' with '\(answer)'")
        }
        return String(answer.dropFirst(prefix.count))
    }

    /// Stops it (stdin EOF, then SIGTERM, then SIGKILL) and waits for the exit.
    public func stop() async {
        guard child.isRunning else { return }
        child.closeInput()
        await child.terminate(grace: 10)
    }

    /// Its stderr (the debug log when `HAP_PEER_LOG` is set).
    public var standardError: String { child.standardError }
}
