public import Foundation
public import HomeModel
public import Logging
import NIOCore
import NIOPosix
public import ServiceLifecycle
import Synchronization

/// A HAP accessory server over IP: controllers pair with it (pair-setup with the setup code),
/// open encrypted sessions (pair-verify), read the tree and its values, write, subscribe to
/// events and manage pairings. It serves whatever `HAPAccessoryDatabase` its owner supplies;
/// the accessory's identity and pairings live in the state directory.
///
/// A `Service`: `run()` listens until cancelled or shut down gracefully, one child task per
/// connection. mDNS announcement is the owner's, from `status` and `onStatusChange`.
public final class HAPAccessoryServer: Service, Sendable {
    public struct Configuration: Sendable {
        public var stateDirectory: URL
        public var setupCode: HAPSetupCode
        /// 0 picks a free port (read it with `listeningPort()`).
        public var port: Int
        /// The first gets `port`, the others the port it got. An IPv6 address listens for IPv6
        /// only; one that cannot be bound (no IPv6 on the host) is logged and skipped.
        public var bindAddresses: [String] = ["0.0.0.0", "::"]
        /// HAP asks for at least 8 sessions at once.
        public var maxConnections = 32
        /// A connection that has not finished pair-verify by then is closed.
        public var verifyTimeout: Duration = .seconds(30)
        /// How a connection waits out `verifyTimeout`: `Task.sleep`, or a test's own wait, so
        /// the deadline passes when the test says and not when a busy machine lets it.
        public var verifyDeadline: @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }
        /// A read or write the database has not answered by then is -70408.
        public var databaseTimeout: Duration = .seconds(8)

        public init(stateDirectory: URL, setupCode: HAPSetupCode, port: Int = 0) {
            self.stateDirectory = stateDirectory
            self.setupCode = setupCode
            self.port = port
        }
    }

    public let configuration: Configuration
    let context: ServerContext
    private let nextConnection = Atomic<UInt64>(0)

    private struct Listening {
        var port: Int?
        var failure: HAPServerError?
        var waiters: [CheckedContinuation<Int, any Error>] = []
    }

    private let listening = Mutex(Listening())

    /// Loads the accessory's identity and pairings (a fresh identity is made and saved at once
    /// when there are none). `onStatusChange` is called when the accessory is paired or
    /// unpaired and when `c#` changes: the moments its announcement changes.
    public init(
        configuration: Configuration, database: any HAPAccessoryDatabase, logger: Logger,
        onStatusChange: @escaping @Sendable (HAPServerStatus) -> Void = { _ in }
    ) throws(HAPServerError) {
        self.configuration = configuration
        let state = try AccessoryState(
            store: HAPServerStore(directory: configuration.stateDirectory), setupCode: configuration.setupCode,
            onStatusChange: onStatusChange)
        context = ServerContext(
            state: state, registry: SessionRegistry(limit: max(8, configuration.maxConnections)), database: database,
            databaseTimeout: configuration.databaseTimeout,
            verifyTimeout: configuration.verifyTimeout, verifyDeadline: configuration.verifyDeadline, logger: logger)
    }

    /// `id`, `c#` and `sf` for the announcement, and whether anyone is paired.
    public var status: HAPServerStatus { context.state.status }
    public var pairings: [HAPControllerPairing] { context.state.pairings }
    /// Connections open now, and those of them past pair-verify.
    public var connectionCount: (open: Int, verified: Int) {
        (context.registry.count, context.registry.verifiedCount)
    }

    /// The port the server listens on, once it does; throws if it could not listen.
    public func listeningPort() async throws -> Int {
        try await withCheckedThrowingContinuation { continuation in
            let ready: Result<Int, HAPServerError>? = listening.withLock { l in
                if let port = l.port { return .success(port) }
                if let failure = l.failure { return .failure(failure) }
                l.waiters.append(continuation)
                return nil
            }
            if let ready { continuation.resume(with: ready) }
        }
    }

    private func listened(_ result: Result<Int, HAPServerError>) {
        let waiters = listening.withLock { l in
            switch result {
            case .success(let port): l.port = port
            case .failure(let error): l.failure = error
            }
            defer { l.waiters = [] }
            return l.waiters
        }
        for waiter in waiters { waiter.resume(with: result.mapError { $0 as any Error }) }
    }

    /// Sends the changes to the sessions subscribed to them, except `cause` (the session whose
    /// write made the change: it knows already). Returns how many sessions get an event.
    @discardableResult
    public func notify(_ changes: [HAPValueChange], cause: HAPSessionID? = nil) -> Int {
        context.registry.notify(changes, cause: cause?.rawValue)
    }

    /// Reads the tree's shape again (call it when accessories, services or characteristics come
    /// or go); `c#` goes up when the shape differs from the last one served.
    public func databaseChanged() async throws(HAPServerError) {
        let tree = await context.database.accessories()
        context.index.withLock { $0 = CharacteristicIndex(tree) }
        _ = try context.state.updateConfiguration(digest: CharacteristicIndex.shapeDigest(tree))
    }

    public func run() async throws {
        let listeners: [NIOAsyncChannel<AcceptedConnection, Never>]
        do {
            try await databaseChanged()
            listeners = try await bind()
        } catch {
            listened(.failure(error))
            throw error
        }
        let port = listeners.first?.channel.localAddress?.port ?? configuration.port
        context.logger.info("HAP accessory server listening on port \(port) as \(context.state.pairingID)")
        listened(.success(port))
        let registry = context.registry
        try await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { group in
                for listener in listeners {
                    group.addTask { await self.accept(listener) }
                }
            }
        } onGracefulShutdown: {
            for listener in listeners { listener.channel.close(promise: nil) }
            registry.close(controller: nil, reason: "the server is stopping")
        }
    }

    private func bind() async throws(HAPServerError) -> [NIOAsyncChannel<AcceptedConnection, Never>] {
        var listeners: [NIOAsyncChannel<AcceptedConnection, Never>] = []
        var port = configuration.port
        for (n, address) in configuration.bindAddresses.enumerated() {
            do {
                let listener = try await listen(on: address, port: port)
                if n == 0 { port = listener.channel.localAddress?.port ?? port }
                listeners.append(listener)
            } catch {
                if n == 0 {
                    throw HAPServerError(.io, "cannot listen for HAP on \(address) port \(port): \(error)")
                }
                context.logger.warning("not listening for HAP on \(address) port \(port): \(error)")
            }
        }
        return listeners
    }

    private func listen(on address: String, port: Int) async throws -> NIOAsyncChannel<AcceptedConnection, Never> {
        var bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelOption(.backlog, value: 64)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelOption(.socketOption(.so_keepalive), value: 1)
            // Each connection asks for its next read when it has handled the last (`ConnectionInputHandler`).
            .childChannelOption(.autoRead, value: false)
        if address.contains(":") {
            bootstrap = bootstrap.serverChannelOption(
                ChannelOptions.Types.SocketOption(level: .ipv6, name: .ipv6_v6only), value: 1)
        }
        return try await bootstrap.bind(host: address, port: port) { channel in
            channel.eventLoop.makeCompletedFuture { try AcceptedConnection.make(channel) }
        }
    }

    /// Accepts connections until the listener closes; each is served by a child task.
    private func accept(_ listener: NIOAsyncChannel<AcceptedConnection, Never>) async {
        let context = context
        try? await listener.executeThenClose { inbound in
            await withDiscardingTaskGroup { group in
                do {
                    for try await accepted in inbound {
                        let id = nextConnection.wrappingAdd(1, ordering: .relaxed).newValue
                        let peer = accepted.channel.remoteAddress?.description ?? "?"
                        // On the channel's own loop: see `EventLoopTaskExecutor`.
                        group.addTask(executorPreference: EventLoopTaskExecutor(accepted.channel.eventLoop)) {
                            await HAPServerConnection(
                                id: id, context: context, peer: peer, eventLoop: accepted.channel.eventLoop
                            )
                            .run(accepted)
                        }
                    }
                } catch {
                    context.logger.debug("the HAP listener stopped: \(error)")
                }
            }
        }
    }
}
