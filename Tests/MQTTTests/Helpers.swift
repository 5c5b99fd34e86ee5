import Foundation
import MQTT
import Testing
import TestSupport

/// Connects a client to `broker` (or with `configuration`) and returns it.
func connectedClient(
    _ broker: MosquittoBroker, clientID: String? = nil, configure: (inout MQTTConfiguration) -> Void = { _ in }
) async throws -> MQTTClient {
    var configuration = broker.clientConfiguration(clientID: clientID)
    configure(&configuration)
    let client = MQTTClient(configuration: configuration)
    try await client.connect()
    return client
}

/// Runs `body`, expecting it to throw an `MQTTError`, and returns that error.
func expectMQTTError(
    _ body: () async throws -> Void, sourceLocation: SourceLocation = #_sourceLocation
) async -> MQTTError? {
    do {
        try await body()
        Issue.record("expected an MQTTError, but the call succeeded", sourceLocation: sourceLocation)
        return nil
    } catch let error as MQTTError {
        return error
    } catch {
        Issue.record("expected an MQTTError, got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

/// The directory of the running test binary (where SwiftPM also puts our executables).
func builtProductPath(_ name: String) -> String {
    let executable =
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
        ?? CommandLine.arguments[0]
    return URL(fileURLWithPath: executable).deletingLastPathComponent().appendingPathComponent(name).path
}

extension MQTTConnectionState {
    var isReconnecting: Bool {
        if case .reconnecting = self { return true }
        return false
    }
}
