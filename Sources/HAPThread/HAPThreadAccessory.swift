public import CoAP
public import HAP
public import HAPServer
public import Logging
public import ServiceLifecycle
import Synchronization

/// A `HAPCoAPAccessory` served over UDP by a `CoAPServer`, as a HAP-over-Thread accessory is
/// (issue 42): POST `/0` identify, `/1` pair-setup, `/2` pair-verify and `/` the encrypted PDUs,
/// each controller known by its address (`[::1]:40123`, `CoAPPeer.description`), and the
/// accessory's events sent as confirmable PUTs to `/` of that address from the server's port.
///
/// The server serves from `init`; `run()` (a `Service`) runs the request handlers until a
/// graceful shutdown or cancellation, then closes the port. A restart is a new
/// `HAPThreadAccessory` on the same state directory: pairings are kept, sessions are not, so
/// each controller's next request gets 4.04 and it verifies again.
public final class HAPThreadAccessory: Service, Sendable {
    public struct Configuration: Sendable {
        public var accessory: HAPCoAPAccessory.Configuration
        /// The address and port to serve on (port 0: a free one, read back in `address`).
        public var bind: CoAPPeer
        public var transmission = CoAPTransmission()
        /// How long an event PUT may wait for the controller's answer. Events go to one
        /// controller after another, so a controller gone quiet holds the rest this long.
        public var eventDeadline: Duration = .seconds(8)

        public init(accessory: HAPCoAPAccessory.Configuration, bind: CoAPPeer) {
            self.accessory = accessory
            self.bind = bind
        }
    }

    public let accessory: HAPCoAPAccessory
    public let server: CoAPServer
    /// The accessory's events go out through the server: the server's routes hold the accessory,
    /// the accessory this sender, and the sender the server — a cycle `run()` ends by detaching
    /// the server, or the accessory's database (a gateway's) would outlive it.
    private let sender: CoAPServerEventSender

    /// Loads the accessory's state (as `HAPCoAPAccessory`) and binds the port; the server
    /// answers from here on. Throws `HAPServerError` or `CoAPError`.
    public init(
        configuration: Configuration, database: any HAPAccessoryDatabase, logger: Logger,
        onStatusChange: @escaping @Sendable (HAPServerStatus) -> Void = { _ in }
    ) throws {
        // The accessory needs its event sender and the server's routes need the accessory: the
        // sender learns its server once both exist, before anything can be subscribed.
        let sender = CoAPServerEventSender(deadline: configuration.eventDeadline)
        let accessory = try HAPCoAPAccessory(
            configuration: configuration.accessory, database: database, events: sender, logger: logger,
            onStatusChange: onStatusChange)
        var routes: [String: CoAPRoute] = [:]
        for path in [HAPCoAPPath.identify, HAPCoAPPath.pairSetup, HAPCoAPPath.pairVerify, HAPCoAPPath.pdus] {
            // Separate answers: pair-setup's SRP and the database's reads take longer than the
            // network thread may be held, and the controller's retransmissions stop at the ACK.
            routes[CoAPMapping.uriPath(path)] = .separate { incoming in
                guard incoming.method == .post else { return CoAPResponse(code: .methodNotAllowed) }
                let reply = await accessory.handle(
                    CoAPMapping.hapPath(incoming.path), incoming.payload, from: incoming.peer.description)
                return CoAPResponse(code: CoAP.CoAPCode(reply.code), payload: reply.payload)
            }
        }
        server = try CoAPServer(
            bind: configuration.bind, routes: routes, transmission: configuration.transmission,
            threadName: "hap-coap-acc", logger: logger)
        sender.attach(server)
        self.sender = sender
        self.accessory = accessory
    }

    /// The bound address and port.
    public var address: CoAPPeer { server.address }

    /// Serves until a graceful shutdown or cancellation; then the port is closed.
    public func run() async throws {
        defer { sender.attach(nil) }
        try await server.run()
    }
}

/// The accessory's events as confirmable PUTs to `/` of the controller's address, sent from
/// the server's own port (where the controller's requests went: aiohomekit takes events from
/// any address, and a NAT or firewall on the way has seen that pair of ports).
final class CoAPServerEventSender: HAPCoAPEventSender {
    private let server = Mutex<CoAPServer?>(nil)
    let deadline: Duration

    init(deadline: Duration) { self.deadline = deadline }

    /// nil: the server stopped; events fail as `closed`.
    func attach(_ server: CoAPServer?) { self.server.withLock { $0 = server } }

    func put(_ payload: [UInt8], to peer: String) async throws(HAPError) -> HAP.CoAPCode {
        guard let address = CoAPMapping.peer(peer) else {
            throw HAPError(code: .unreachable, message: "not a controller's address: \(peer)")
        }
        guard let server = server.withLock({ $0 }) else {
            throw HAPError(code: .closed, message: "the accessory's CoAP server is not running")
        }
        do throws(CoAPError) {
            let response = try await server.request(
                .put, peer: address, path: CoAPMapping.uriPath(HAPCoAPPath.pdus), payload: payload,
                deadline: deadline)
            return HAP.CoAPCode(response.code)
        } catch {
            throw CoAPMapping.hapError(error, to: address)
        }
    }
}
