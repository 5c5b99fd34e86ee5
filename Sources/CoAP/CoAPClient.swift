import Foundation
public import Logging

/// A CoAP client (RFC 7252 over UDP, IPv6 or IPv4) on libcoap, with one network thread.
///
/// `request` sends a confirmable GET/POST/PUT/DELETE and returns the answer: piggybacked on the
/// ACK or separate (an empty ACK, then a confirmable response matched by token), Block2 bodies
/// reassembled. libcoap retransmits per `CoAPTransmission`; each request also has a deadline.
/// Several requests may wait at once, to one peer or many (libcoap sends at most NSTART
/// confirmables to one peer at a time and queues the rest in order).
///
/// The client also answers requests peers send it on `eventPaths` (a HAP accessory's events,
/// CoAP PUTs to its controller), on the port its requests left from or on `listen`; each is
/// answered with the path's code and handed to `events`.
public final class CoAPClient: Sendable {
    public struct Configuration: Sendable {
        public var transmission = CoAPTransmission()
        /// Also receive on this address and port (port 0: a free one, read back in `listening`).
        public var listen: CoAPPeer?
        /// Paths peers may PUT/POST events to, and the code each answers (2.04 Changed, 2.03 Valid).
        public var eventPaths: [String: CoAPCode] = [:]
        /// The network thread's name (at most 15 bytes are kept).
        public var threadName = "coap-client"

        public init() {}
    }

    /// Requests peers sent to `eventPaths`, in arrival order (the newest 1024 kept while nobody
    /// reads); finishes when the client closes.
    public let events: AsyncStream<CoAPIncoming>
    let engine: CoAPEngine

    public init(configuration: Configuration = Configuration(), logger: Logger = Logger(label: "CoAP.client"))
        throws(CoAPError)
    {
        let (events, continuation) = AsyncStream.makeStream(
            of: CoAPIncoming.self, bufferingPolicy: .bufferingNewest(1024))
        self.events = events
        var routes: [String: CoAPRoute] = [:]
        for (path, code) in configuration.eventPaths {
            routes[path] = .immediate { _ in CoAPResponse(code: code) }
        }
        engine = try CoAPEngine(
            bind: configuration.listen, routes: routes, transmission: configuration.transmission, libcoapBlocks: false,
            logger: logger,
            jobs: nil, incoming: continuation)
        engine.start(name: configuration.threadName)
    }

    deinit { engine.stop() }

    /// The address and port `listen` bound, if any.
    public var listening: CoAPPeer? { engine.bound }

    /// Sends a confirmable request to `uri` (`coap://[::1]:5683/path` or `coap://10.0.0.2/1`).
    public func request(
        _ method: CoAPMethod, _ uri: String, payload: [UInt8] = [], deadline: Duration? = nil
    ) async throws(CoAPError) -> CoAPResponse {
        let (peer, path) = try CoAPURI.parse(uri)
        return try await request(method, peer: peer, path: path, payload: payload, deadline: deadline)
    }

    /// Sends a confirmable request to `path` on `peer`. Without a deadline, it waits
    /// MAX_TRANSMIT_WAIT (RFC 7252 §4.8.2: 93 s with the defaults) plus a second.
    public func request(
        _ method: CoAPMethod, peer: CoAPPeer, path: String, payload: [UInt8] = [], deadline: Duration? = nil
    ) async throws(CoAPError) -> CoAPResponse {
        try await engine.request(method, peer: peer, path: path, payload: payload, deadline: deadline)
    }

    /// Stops the network thread: what still waits fails with `CoAPError.closed`; `events` finishes.
    public func close() async { await engine.stopAndWait() }
}

extension CoAPEngine {
    func request(
        _ method: CoAPMethod, peer: CoAPPeer, path: String, payload: [UInt8], deadline: Duration?
    ) async throws(CoAPError) -> CoAPResponse {
        let wait = deadline ?? transmission.maxTransmitWait + .seconds(1)
        let until = ContinuousClock.now + wait
        let id = makeID()
        let outcome = await exchange(id: id) { engine in
            engine.send(id: id, method: method, peer: peer, path: path, payload: payload, deadline: until)
        }
        return try outcome.get()
    }
}

extension CoAPTransmission {
    /// RFC 7252 §4.8.2: ACK_TIMEOUT × (2^(MAX_RETRANSMIT+1) − 1) × ACK_RANDOM_FACTOR.
    public var maxTransmitWait: Duration {
        let applied = effective
        let factor = Double((1 << (Int(applied.maxRetransmit) + 1)) - 1)
        return .milliseconds(Int64((applied.ackTimeout * factor * applied.ackRandomFactor * 1000).rounded()))
    }
}

/// `coap://host[:port]/path`, IPv6 hosts in brackets (RFC 7252 §6.1); numeric hosts only.
enum CoAPURI {
    static func parse(_ uri: String) throws(CoAPError) -> (CoAPPeer, String) {
        guard uri.hasPrefix("coap://") else { throw .badAddress(uri) }
        var rest = Substring(uri.dropFirst("coap://".count))
        let host: String
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw .badAddress(uri) }
            host = String(rest[rest.index(after: rest.startIndex)..<close])
            rest = rest[rest.index(after: close)...]
        } else {
            let end = rest.firstIndex { $0 == ":" || $0 == "/" } ?? rest.endIndex
            host = String(rest[..<end])
            rest = rest[end...]
        }
        var port: UInt16 = 5683
        if rest.hasPrefix(":") {
            let end = rest.firstIndex(of: "/") ?? rest.endIndex
            guard let parsed = UInt16(rest[rest.index(after: rest.startIndex)..<end]) else { throw .badAddress(uri) }
            port = parsed
            rest = rest[end...]
        }
        guard !host.isEmpty, rest.isEmpty || rest.hasPrefix("/") else { throw .badAddress(uri) }
        return (CoAPPeer(host: host, port: port), String(rest.drop { $0 == "/" }))
    }
}
