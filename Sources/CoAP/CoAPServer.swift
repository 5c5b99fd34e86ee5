import Foundation
import Synchronization
public import Logging
public import ServiceLifecycle

/// A CoAP server on libcoap: a UDP port bound on an IPv6 or IPv4 address, a route per path
/// (the HAP accessory side answers POST `/0`, `/1`, `/2` and `/`), answers piggybacked or
/// separate (`CoAPRoute`), large answers by Block2. It can also send confirmable requests to
/// a peer (an accessory's event PUTs to its controller), from its own port when the peer has
/// written to it.
///
/// Its network thread serves from `init`. A `Service`: `run()` runs the separate routes'
/// handlers, each in its own child task, until a graceful shutdown or cancellation; then the
/// handlers still running are cancelled, the thread stops and the socket is closed.
public final class CoAPServer: Service, Sendable {
    let engine: CoAPEngine
    private let jobs: AsyncStream<CoAPEngine.Job>
    private let running = Mutex(false)

    /// Binds `address` (port 0: a free one, read back in `address`) and starts serving.
    /// `separateLimit`: separate answers pending at once; a request past it is answered 5.03.
    public init(
        bind address: CoAPPeer, routes: [String: CoAPRoute], transmission: CoAPTransmission = CoAPTransmission(),
        separateLimit: Int = 256, threadName: String = "coap-server", logger: Logger = Logger(label: "CoAP.server")
    ) throws(CoAPError) {
        let (jobs, continuation) = AsyncStream.makeStream(of: CoAPEngine.Job.self)
        self.jobs = jobs
        engine = try CoAPEngine(
            bind: address, routes: routes, transmission: transmission, libcoapBlocks: true, logger: logger,
            jobs: continuation,
            incoming: nil)
        engine.separateLimit = separateLimit
        // Serving from here on: immediate routes answer, separate ones wait in `jobs` for `run()`,
        // and `request` works before `run()` has begun.
        engine.start(name: threadName)
    }

    deinit { engine.stop() }

    /// The bound address and port.
    public var address: CoAPPeer { engine.bound! }

    /// Runs the separate routes' handlers until a graceful shutdown or cancellation, then stops
    /// the server. A second call returns at once.
    public func run() async throws {
        let first = running.withLock { running in
            defer { running = true }
            return !running
        }
        guard first else { return }
        await withDiscardingTaskGroup { group in
            await withGracefulShutdownHandler {
                // Ends when the engine stops (it finishes the stream) or this task is cancelled.
                for await job in jobs {
                    group.addTask { [engine] in
                        let answer = await job.handler(job.incoming)
                        engine.post { $0.finishSeparate(job.id, answer) }
                    }
                }
            } onGracefulShutdown: { [engine] in
                engine.stop()
            }
            group.cancelAll()
        }
        await engine.stopAndWait()
    }

    /// Sends a confirmable request to `peer` (an event PUT to a controller); once `run()` has
    /// returned, it fails with `CoAPError.closed`.
    public func request(
        _ method: CoAPMethod, peer: CoAPPeer, path: String, payload: [UInt8] = [], deadline: Duration? = nil
    ) async throws(CoAPError) -> CoAPResponse {
        try await engine.request(method, peer: peer, path: path, payload: payload, deadline: deadline)
    }
}
