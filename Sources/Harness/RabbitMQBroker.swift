import Foundation

/// A RabbitMQ node with its MQTT plugin (Debian's `rabbitmq-server`, MQTT 3.1.1): a second
/// broker implementation for the tests, started in a directory of its own on free ports, as
/// the user running the tests, and stopped with SIGTERM.
public final class RabbitMQBroker: Sendable {
    public static let server = "/usr/lib/rabbitmq/bin/rabbitmq-server"
    public let port: Int
    public let directory: TemporaryDirectory
    let process: ChildProcess

    /// `mosquitto_pub`/`mosquitto_sub` arguments for this broker (3.1.1: its only version).
    public var clientArguments: [String] { ["-h", "127.0.0.1", "-p", "\(port)", "-V", "mqttv311"] }

    public var log: String {
        let logs = (try? FileManager.default.contentsOfDirectory(atPath: directory.file("log"))) ?? []
        return logs.map { (try? String(contentsOfFile: directory.file("log/\($0)"), encoding: .utf8)) ?? "" }
            .joined(separator: "\n")
    }

    private init(port: Int, directory: TemporaryDirectory, process: ChildProcess) {
        self.port = port
        self.directory = directory
        self.process = process
    }

    /// Starts a node (about 10 s: Erlang) and waits until its MQTT listener accepts connections.
    public static func start() async throws -> RabbitMQBroker {
        guard FileManager.default.isExecutableFile(atPath: server) else {
            throw ProcessError("\(server) is missing: run Scripts/bootstrap.sh (Debian's rabbitmq-server)")
        }
        let directory = try TemporaryDirectory(prefix: "homemqtt-rabbitmq")
        let port = try freePort()
        // Only MQTT listens; anonymous clients are RabbitMQ's `guest`, allowed from loopback.
        try """
        listeners.tcp = none
        mqtt.listeners.tcp.default = \(port)
        mqtt.allow_anonymous = true
        """.write(toFile: directory.file("rabbitmq.conf"), atomically: true, encoding: .utf8)
        try "[rabbitmq_mqtt].\n".write(toFile: directory.file("enabled_plugins"), atomically: true, encoding: .utf8)
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = directory.path // the Erlang cookie
        environment["RABBITMQ_NODENAME"] = "homemqtt-test-\(port)@localhost"
        environment["RABBITMQ_DIST_PORT"] = "\(try freePort())"
        environment["RABBITMQ_MNESIA_BASE"] = directory.file("mnesia")
        environment["RABBITMQ_LOG_BASE"] = directory.file("log")
        environment["RABBITMQ_CONFIG_FILE"] = directory.file("rabbitmq")
        environment["RABBITMQ_ENABLED_PLUGINS_FILE"] = directory.file("enabled_plugins")
        environment["RABBITMQ_PID_FILE"] = directory.file("rabbitmq.pid")
        let process = try ChildProcess(server, [], environment: environment)
        let broker = RabbitMQBroker(port: port, directory: directory, process: process)
        try await waitForListener(
            "RabbitMQ's MQTT listener", process: process, port: port, timeout: 60,
            output: { process.standardOutput }, stop: broker.stop)
        return broker
    }

    public func stop() async {
        await process.terminate(grace: 15)
    }
}
