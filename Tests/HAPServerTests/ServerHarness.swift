import Foundation
import HAPServer
import HAPServerTestSupport
import HomeModel
import Logging
import TestSupport
import XCTest

/// A running `HAPAccessoryServer` on 127.0.0.1 serving a `TestBridge`, for one test body.
struct ServerHarness {
    static let code = HAPSetupCode("314-15-926")!
    let server: HAPAccessoryServer
    let bridge: TestBridge
    let port: Int

    static func with(
        stateDirectory: String? = nil, configure: (inout HAPAccessoryServer.Configuration) -> Void = { _ in },
        onStatusChange: @escaping @Sendable (HAPServerStatus) -> Void = { _ in },
        _ body: (ServerHarness) async throws -> Void
    ) async throws {
        let temporary = stateDirectory == nil ? try TemporaryDirectory(prefix: "hap-server") : nil
        let directory = stateDirectory ?? temporary!.path
        var configuration = HAPAccessoryServer.Configuration(
            stateDirectory: URL(fileURLWithPath: directory), setupCode: code)
        configuration.bindAddresses = ["127.0.0.1"]
        configure(&configuration)
        let bridge = TestBridge()
        var logger = Logger(label: "hap-server-test")
        logger.logLevel = ProcessInfo.processInfo.environment["HAP_SERVER_TEST_LOG"] == nil ? .warning : .trace
        let server = try HAPAccessoryServer(
            configuration: configuration, database: bridge, logger: logger, onStatusChange: onStatusChange)
        bridge.attach(server)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await server.run() }
            let port = try await server.listeningPort()
            do {
                try await body(ServerHarness(server: server, bridge: bridge, port: port))
            } catch {
                group.cancelAll()
                throw error
            }
            group.cancelAll()
        }
        _ = temporary
    }

    /// A new connection, blocking calls made off the cooperative pool.
    func connect() async throws -> RawHAPClient {
        let port = port
        return try await blocking { try RawHAPClient(port: port) }
    }

    /// A controller paired as admin, and a verified session for it.
    func pairedSession() async throws -> (RawHAPClient, RawHAPClient.Identity) {
        let setup = try await connect()
        let identity = try await blocking { try setup.pairSetup(code: Self.code.revealed) }
        let session = try await connect()
        try await blocking { try session.pairVerify(identity) }
        return (session, identity)
    }

    func session(for identity: RawHAPClient.Identity) async throws -> RawHAPClient {
        let session = try await connect()
        try await blocking { try session.pairVerify(identity) }
        return session
    }
}

extension RawHAPClient {
    /// A request off the cooperative pool.
    func call(_ method: String, _ path: String, _ body: JSONValue? = nil) async throws -> Message {
        try await blocking { try self.json(method, path, body) }
    }

    func event(timeout: Double = 10) async throws -> Message {
        try await blocking { try self.nextEvent(timeout: timeout) }
    }

    func closes(within timeout: Double = 10) async throws -> Bool {
        try await blocking { self.isClosed(within: timeout) }
    }
}
