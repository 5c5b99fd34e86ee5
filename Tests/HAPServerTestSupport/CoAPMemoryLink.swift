public import HAP
public import HAPServer
import Synchronization

/// HAP over CoAP in one process: controllers' POSTs go straight to a `HAPCoAPAccessory`'s
/// `handle`, its event PUTs straight to the controller registered at that address. What a lossy
/// network does is asked for, never random: `loseNextAnswer(to:)` lets the accessory answer (its
/// counter moves) and loses the answer; `loseNextRequest(from:)` loses the request before the
/// accessory sees it. `posts` records every POST that reached the accessory, in order.
public final class CoAPMemoryLink: HAPCoAPEventSender {
    private struct State {
        var accessory: HAPCoAPAccessory?
        var receivers: [String: @Sendable ([UInt8]) async -> CoAPCode] = [:]
        var posts: [(peer: String, path: String)] = []
        var loseAnswer: Set<String> = []
        var loseRequest: Set<String> = []
    }

    private let state = Mutex(State())

    public init() {}

    public func attach(_ accessory: HAPCoAPAccessory) { state.withLock { $0.accessory = accessory } }

    /// The exchange a controller at `peer` posts through.
    public func exchange(from peer: String) -> Exchange { Exchange(link: self, peer: peer) }

    /// Where the accessory's events for `peer` go.
    public func register(_ controller: HAPCoAPController, at peer: String) {
        register(events: { await controller.receiveEvent($0) }, at: peer)
    }

    /// Where the accessory's events for `peer` go when no `HAPCoAPController` is there (a test
    /// that carries them to another controller).
    public func register(events receiver: @escaping @Sendable ([UInt8]) async -> CoAPCode, at peer: String) {
        state.withLock { $0.receivers[peer] = receiver }
    }

    public func loseNextAnswer(to peer: String) { _ = state.withLock { $0.loseAnswer.insert(peer) } }
    public func loseNextRequest(from peer: String) { _ = state.withLock { $0.loseRequest.insert(peer) } }

    /// The paths `peer` posted to that reached the accessory, in order.
    public func posts(from peer: String) -> [String] {
        state.withLock { $0.posts.filter { $0.peer == peer }.map(\.path) }
    }

    public struct Exchange: HAPCoAPExchange {
        let link: CoAPMemoryLink
        public let peer: String

        public func post(_ path: String, _ payload: [UInt8]) async throws(HAPError) -> CoAPReply {
            let (accessory, loseRequest) = link.state.withLock { s in
                (s.accessory, s.loseRequest.remove(peer) != nil)
            }
            guard let accessory, !loseRequest else {
                throw HAPError(code: .timeout, message: "no answer from the accessory (the request was lost)")
            }
            link.state.withLock { $0.posts.append((peer, path)) }
            let reply = await accessory.handle(path, payload, from: peer)
            if link.state.withLock({ $0.loseAnswer.remove(peer) != nil }) {
                throw HAPError(code: .timeout, message: "no answer from the accessory (the answer was lost)")
            }
            return reply
        }
    }

    public func put(_ payload: [UInt8], to peer: String) async throws(HAPError) -> CoAPCode {
        guard let receiver = state.withLock({ $0.receivers[peer] }) else {
            throw HAPError(code: .unreachable, message: "no controller at \(peer)")
        }
        return await receiver(payload)
    }
}
