import Foundation

/// mqttools' broker (PyPI `mqttools`, in `.venv`): an MQTT 5 broker whose CONNACK grants
/// Maximum QoS 0, as a broker of limits other than mosquitto's. Started on a free port and
/// stopped with SIGTERM.
public final class MQTToolsBroker: Sendable {
    public let port: Int
    let process: ChildProcess

    public var log: String { process.standardOutput + process.standardError }

    private init(port: Int, process: ChildProcess) {
        self.port = port
        self.process = process
    }

    public static func start() async throws -> MQTToolsBroker {
        let python = HAPPeer.python.path
        guard FileManager.default.isExecutableFile(atPath: python) else {
            throw ProcessError("\(python) is missing: run Scripts/bootstrap.sh (Tests/requirements.txt)")
        }
        let port = try freePort()
        let process = try ChildProcess(
            python, ["-m", "mqttools", "broker", "--host", "127.0.0.1", "--port", "\(port)"])
        let broker = MQTToolsBroker(port: port, process: process)
        try await waitForListener(
            "mqttools' broker", process: process, port: port, timeout: 20, output: { broker.log }, stop: broker.stop)
        return broker
    }

    public func stop() async {
        await process.terminate(grace: 5)
    }
}
