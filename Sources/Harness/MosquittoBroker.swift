import Foundation
public import MQTT
import Synchronization

// A real mosquitto broker for tests and benchmarks, and the loopback port helpers (a free port,
// whether one accepts connections).

/// A real `mosquitto` on a free 127.0.0.1 port (never 1883/8883) with a generated config in its own
/// temp dir. Stop it with `stop()` (SIGTERM, so a persistent broker saves its database) and bring it back
/// on the same port with `start()`/`restart()`. Killed when the object goes away.
public final class MosquittoBroker: Sendable {
    public struct Options: Sendable {
        /// Users for a password file (made with `mosquitto_passwd`); when set, anonymous clients are refused.
        public var users: [String: String]?
        /// Generate a CA and a server certificate with `openssl` and listen with TLS only.
        public var tls: Bool
        /// `persistence true` with the database in the temp dir: sessions and queued messages survive restarts.
        public var persistence: Bool
        /// Extra lines appended to mosquitto.conf.
        public var extraConfiguration: [String]

        public init(
            users: [String: String]? = nil, tls: Bool = false, persistence: Bool = false,
            extraConfiguration: [String] = []
        ) {
            self.users = users
            self.tls = tls
            self.persistence = persistence
            self.extraConfiguration = extraConfiguration
        }
    }

    /// Certificates generated for a TLS broker.
    public struct TLSMaterial: Sendable {
        /// The CA that signed the server certificate.
        public var caFile: String
        /// A second CA that signed nothing the broker uses (a client trusting only it must refuse the server).
        public var otherCAFile: String
        public var serverCertificateFile: String
        public var serverKeyFile: String
        /// A client certificate and key signed by `caFile`'s CA.
        public var clientCertificateFile: String
        public var clientKeyFile: String
    }

    public let host = "127.0.0.1"
    public let port: Int
    public let options: Options
    public let directory: TemporaryDirectory
    public let tlsMaterial: TLSMaterial?
    private let process = Mutex<ChildProcess?>(nil)

    public var configPath: String { directory.file("mosquitto.conf") }
    public var logPath: String { directory.file("mosquitto.log") }
    /// The broker's log so far (for failure messages).
    public var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }
    /// `mqtt://127.0.0.1:PORT` or `mqtts://…`.
    public var url: String { "\(tlsMaterial == nil ? "mqtt" : "mqtts")://\(host):\(port)" }
    public var isRunning: Bool { process.withLock { $0?.isRunning ?? false } }
    /// The broker's process, while it runs (for its CPU time).
    public var pid: Int32? { process.withLock { $0.map { Int32($0.pid) } } }

    private init(port: Int, options: Options, directory: TemporaryDirectory, tlsMaterial: TLSMaterial?) {
        self.port = port
        self.options = options
        self.directory = directory
        self.tlsMaterial = tlsMaterial
    }

    deinit {
        process.withLock { $0?.signal(SIGKILL) }
    }

    /// Generates the configuration and starts the broker; retries with another port if the chosen one was
    /// taken in the meantime.
    public static func start(_ options: Options = .init()) async throws -> MosquittoBroker {
        let directory = try TemporaryDirectory(prefix: "homemqtt-broker")
        let tls = options.tls ? try await makeTLSMaterial(in: directory) : nil
        if let users = options.users {
            let passwordFile = directory.file("passwd")
            _ = FileManager.default.createFile(atPath: passwordFile, contents: nil)
            for (user, password) in users.sorted(by: { $0.key < $1.key }) {
                try await runChecked("mosquitto_passwd", ["-b", passwordFile, user, password])
            }
        }
        var lastError: Error?
        for _ in 0..<5 {
            let broker = MosquittoBroker(
                port: try freePort(), options: options, directory: directory, tlsMaterial: tls)
            do {
                try broker.writeConfiguration()
                try await broker.start()
                return broker
            } catch {
                lastError = error
                await broker.stop()
            }
        }
        throw lastError ?? ProcessError("mosquitto did not start")
    }

    /// Runs `body` with a started broker and always stops it afterwards.
    public static func with<T>(_ options: Options = .init(), _ body: (MosquittoBroker) async throws -> T)
        async throws -> T
    {
        let broker = try await start(options)
        do {
            let result = try await body(broker)
            await broker.stop()
            return result
        } catch {
            await broker.stop()
            throw error
        }
    }

    private func writeConfiguration() throws {
        var lines = [
            "listener \(port) \(host)",
            "log_dest file \(logPath)",
            "log_type error",
            "log_type warning",
            "log_type notice",
            "log_type information",
            "log_type subscribe",
            "connection_messages true",
            "log_timestamp true",
        ]
        if geteuid() == 0 {
            // As root, mosquitto would switch to the "mosquitto" user, which cannot use our temp dir.
            lines.insert("user root", at: 0)
        }
        if options.users != nil {
            lines += ["allow_anonymous false", "password_file \(directory.file("passwd"))"]
        } else {
            lines += ["allow_anonymous true"]
        }
        if options.persistence {
            try FileManager.default.createDirectory(atPath: directory.file("data"), withIntermediateDirectories: true)
            lines += ["persistence true", "persistence_location \(directory.file("data"))/", "autosave_interval 0"]
        }
        if let tls = tlsMaterial {
            lines += [
                "cafile \(tls.caFile)", "certfile \(tls.serverCertificateFile)", "keyfile \(tls.serverKeyFile)",
                "require_certificate false",
            ]
        }
        lines += options.extraConfiguration
        try (lines.joined(separator: "\n") + "\n").write(toFile: configPath, atomically: true, encoding: .utf8)
    }

    /// Starts (or starts again) the broker on `port` and waits until it accepts TCP connections.
    public func start() async throws {
        if isRunning { return }
        let child = try ChildProcess("mosquitto", ["-c", configPath])
        process.withLock { $0 = child }
        do {
            try await waitUntil("mosquitto to listen on \(host):\(port)", timeout: 10) {
                if !child.isRunning {
                    throw ProcessError("mosquitto exited: \(child.standardError)\n\(self.log)")
                }
                return canConnect(host: host, port: port)
            }
        } catch {
            await child.terminate(grace: 1)
            throw error
        }
    }

    /// SIGTERM (a persistent broker writes its database) and wait for the exit. Safe when not running.
    public func stop() async {
        guard let child = process.withLock({ $0 }) else { return }
        await child.terminate(grace: 10)
    }

    /// Waits until the broker logged a subscription to exactly `filter` (by any client), e.g. to know that a
    /// `mosquitto_sub` child is ready before publishing.
    public func waitForSubscription(to filter: String, timeout: Double = 10) async throws {
        try await waitUntil("a subscription to '\(filter)' in the broker log", timeout: timeout) {
            log.split(separator: "\n").contains { $0.hasSuffix(" " + filter) }
        }
    }

    /// Stop, then start again on the same port.
    public func restart() async throws {
        await stop()
        try await start()
    }

    /// SIGKILL: no database save.
    public func kill() async {
        guard let child = process.withLock({ $0 }) else { return }
        child.signal(SIGKILL)
        _ = try? await child.waitForExit(timeout: 5)
    }

    /// A client configuration for this broker (TLS: trusting the generated CA).
    public func clientConfiguration(clientID: String? = nil) -> MQTTConfiguration {
        var configuration = MQTTConfiguration(host: host, port: port)
        if let clientID { configuration.clientID = clientID }
        if let tls = tlsMaterial { configuration.tls = MQTTTLS(caFile: tls.caFile) }
        configuration.connectTimeout = 5
        configuration.reconnectDelayMin = 0.2
        configuration.reconnectDelayMax = 2
        return configuration
    }

    /// Arguments for mosquitto_pub/mosquitto_sub to reach this broker (`-h -p`, and `--cafile` with TLS).
    public var clientArguments: [String] {
        var arguments = ["-h", host, "-p", String(port)]
        if let tls = tlsMaterial { arguments += ["--cafile", tls.caFile] }
        return arguments
    }

    // MARK: Helpers

    private static func makeTLSMaterial(in directory: TemporaryDirectory) async throws -> TLSMaterial {
        func path(_ name: String) -> String { directory.file(name) }
        let days = ["-days", "2"]
        let ecKey = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        for ca in ["ca", "other-ca"] {
            try await runChecked(
                "openssl",
                ["req", "-x509"] + ecKey + days
                    + ["-keyout", path("\(ca).key"), "-out", path("\(ca).crt"), "-subj", "/CN=HomeMQTT test \(ca)"])
        }
        try "subjectAltName=IP:127.0.0.1,DNS:localhost\n".write(
            toFile: path("server.ext"), atomically: true, encoding: .utf8)
        for (name, subject, extensions) in [
            ("server", "/CN=127.0.0.1", ["-extfile", path("server.ext")]), ("client", "/CN=homemqtt-client", []),
        ] {
            try await runChecked(
                "openssl",
                ["req"] + ecKey + ["-keyout", path("\(name).key"), "-out", path("\(name).csr"), "-subj", subject])
            try await runChecked(
                "openssl",
                [
                    "x509", "-req", "-in", path("\(name).csr"), "-CA", path("ca.crt"), "-CAkey", path("ca.key"),
                    "-CAcreateserial", "-out", path("\(name).crt"),
                ] + days + extensions)
        }
        return TLSMaterial(
            caFile: path("ca.crt"), otherCAFile: path("other-ca.crt"), serverCertificateFile: path("server.crt"),
            serverKeyFile: path("server.key"), clientCertificateFile: path("client.crt"),
            clientKeyFile: path("client.key"))
    }
}

/// A port the kernel just handed out for 127.0.0.1, never 1883 or 8883.
public func freePort() throws -> Int {
    for _ in 0..<20 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ProcessError("socket() failed") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic -> Bool in
                bind(fd, generic, length) == 0 && getsockname(fd, generic, &length) == 0
            }
        }
        guard bound else { continue }
        let port = Int(UInt16(bigEndian: address.sin_port))
        if port != 1883 && port != 8883 { return port }
    }
    throw ProcessError("no free port found")
}

/// Whether a TCP connection to host:port succeeds right now.
/// Waits until a broker process accepts TCP connections on `port` of 127.0.0.1; fails with what
/// it printed if it exits first, and stops it (`stop`) when it never listens.
public func waitForListener(
    _ name: String, process: ChildProcess, port: Int, timeout: Double, output: @escaping @Sendable () -> String,
    stop: () async -> Void
) async throws {
    do {
        try await waitUntil("\(name) on \(port)", timeout: timeout) {
            if !process.isRunning { throw ProcessError("\(name) exited: \(output())") }
            return canConnect(host: "127.0.0.1", port: port)
        }
    } catch {
        await stop()
        throw error
    }
}

public func canConnect(host: String, port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = UInt16(port).bigEndian
    address.sin_addr.s_addr = inet_addr(host)
    return withUnsafePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
        }
    }
}
