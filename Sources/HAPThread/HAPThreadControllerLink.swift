public import CoAP
public import HAP

/// The controller's side of HAP over Thread on the CoAP module: one accessory's address, the
/// requests of a `HAPCoAPController` as confirmable POSTs through a `CoAPClient`, and the events
/// the accessory PUTs back handed to the controller.
///
/// The accessory knows a controller by the address its requests come from, and PUTs events to
/// that address (aiohomekit's controller answers them on the socket its pair-verify and session
/// requests leave from). A `CoAPClient` receives on that same socket, so the client given here
/// must have `Self.eventPaths` among its `eventPaths`: `/` answered 2.03 Valid. The CoAP module
/// answers on its network thread before the controller has opened the event; aiohomekit answers
/// 4.04 to one that does not open, we answer 2.03 to every event and drop what does not open
/// (`HAPCoAPController.receiveEvent` logs it).
public struct HAPThreadControllerLink: HAPCoAPExchange {
    /// The event path a controller's `CoAPClient` answers: `/`, 2.03 Valid.
    public static let eventPaths: [String: CoAP.CoAPCode] = [CoAPMapping.uriPath(HAPCoAPPath.pdus): .valid]

    public let client: CoAPClient
    public let accessory: CoAPPeer
    /// How long one POST may wait for its answer (pair-setup's SRP steps take the accessory a
    /// while); nil: the client's MAX_TRANSMIT_WAIT.
    public var deadline: Duration?

    public init(client: CoAPClient, accessory: CoAPPeer, deadline: Duration? = .seconds(16)) {
        self.client = client
        self.accessory = accessory
        self.deadline = deadline
    }

    /// A client that receives the accessory's events: `Self.eventPaths` on the port its requests
    /// leave from.
    public static func makeClient(
        transmission: CoAPTransmission = CoAPTransmission(), threadName: String = "hap-coap-ctl"
    ) throws(CoAPError) -> CoAPClient {
        var configuration = CoAPClient.Configuration()
        configuration.transmission = transmission
        configuration.eventPaths = eventPaths
        configuration.threadName = threadName
        return try CoAPClient(configuration: configuration)
    }

    public func post(_ path: String, _ payload: [UInt8]) async throws(HAPError) -> CoAPReply {
        do throws(CoAPError) {
            let response = try await client.request(
                .post, peer: accessory, path: CoAPMapping.uriPath(path), payload: payload, deadline: deadline)
            return CoAPReply(HAP.CoAPCode(response.code), response.payload)
        } catch {
            throw CoAPMapping.hapError(error, to: accessory)
        }
    }

    /// Hands the events this link's accessory PUTs to `/` to `controller`, in arrival order,
    /// until the client closes (its `events` finish) or the task is cancelled. Requests from
    /// other addresses or to other paths are not this accessory's events and are skipped.
    /// Only one loop may read a client's events: a client serves one accessory's events here.
    public func deliverEvents(to controller: HAPCoAPController) async {
        let path = CoAPMapping.uriPath(HAPCoAPPath.pdus)
        for await incoming in client.events where incoming.path == path && incoming.method == .put {
            guard Self.sameAddress(incoming.peer, accessory) else { continue }
            _ = await controller.receiveEvent(incoming.payload)
        }
    }

    /// The same host and port; hosts compared as written, with `::1` and `[::1]` alike.
    static func sameAddress(_ a: CoAPPeer, _ b: CoAPPeer) -> Bool {
        let strip = { (h: String) in h.hasPrefix("[") ? String(h.dropFirst().dropLast()) : h }
        return a.port == b.port && strip(a.host).lowercased() == strip(b.host).lowercased()
    }
}

extension HAPThreadControllerLink: HAPThreadLink {
    /// Frees the client's socket and thread; `deliverEvents` ends with its events.
    public func close() async { await client.close() }

    /// Links for the HAP source and the pairing commands: a client of its own per accessory
    /// session (its events come to the port its requests leave from), each POST waiting at
    /// most `deadline` for its answer.
    public static func maker(deadline: Duration = .seconds(16)) -> HAPThreadLinkMaker {
        { (host: String, port: Int) throws(HAPError) -> any HAPThreadLink in
            guard let udpPort = UInt16(exactly: port) else {
                throw HAPError(code: .unreachable, message: "\(port) is not a UDP port")
            }
            let accessory = CoAPPeer(host: host, port: udpPort)
            do throws(CoAPError) {
                return HAPThreadControllerLink(client: try makeClient(), accessory: accessory, deadline: deadline)
            } catch {
                throw CoAPMapping.hapError(error, to: accessory)
            }
        }
    }
}
