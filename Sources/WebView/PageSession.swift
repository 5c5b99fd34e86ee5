import Gateway
import HomeModel
import HummingbirdWebSocket
import Logging
import NIOCore
import Synchronization

/// One page's WebSocket, `/ws`. The server sends JSON text frames:
/// - `{"type": "home", …}` — the whole home (`HomeDocument`), first and after every
///   structural change;
/// - `{"type": "history", "events": […], "errors": […]}` — what happened before the page came;
/// - `{"type": "update", "values": {<characteristic topic>: value}, "events": […], "errors": […],
///   "connected": bool}` — what changed in the last 100 ms, each part only when there is one;
/// - `{"type": "answer", "id": …, "answer": {…}}` — the answer to one of the page's requests.
///
/// The page sends requests, `{"id": 1, "topic": "home/…/set", "payload": "80"}`
/// (`PageRequests`); anything else is answered with an error, never a closed socket.
struct PageSession: Sendable {
    let hub: LiveHub
    let requests: PageRequests
    let logger: Logger
    /// Requests one page may have waiting at once; more are answered `busy` (a page sends one
    /// per click, a script that floods is told so).
    static let maxInFlight = 32
    /// The largest request a page sends is a scope; a megabyte is far above it.
    static let maxMessageSize = 1 << 20

    func run(inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter) async throws {
        let (id, outlet) = await hub.join()
        let inFlight = InFlight()
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                // The only writer: frames go out in the order the hub and the answers queued them.
                group.addTask {
                    for await frame in outlet.frames {
                        outlet.taken()
                        try await outbound.write(.text(frame))
                    }
                }
                group.addTask {
                    try await withThrowingDiscardingTaskGroup { answers in
                        for try await message in inbound.messages(maxSize: Self.maxMessageSize) {
                            let bytes: [UInt8]
                            switch message {
                            case .text(let text): bytes = Array(text.utf8)
                            case .binary:
                                await reply(
                                    to: id, requestID: .null,
                                    PageRequests.error(
                                        GatewayFailure(
                                            code: .invalidPayload, message: "requests are JSON text, not binary")))
                                continue
                            }
                            guard inFlight.count.add(1, ordering: .relaxed).newValue <= Self.maxInFlight else {
                                inFlight.count.subtract(1, ordering: .relaxed)
                                await reply(
                                    to: id, requestID: PageRequests.id(in: bytes),
                                    PageRequests.error(
                                        GatewayFailure(
                                            code: .busy,
                                            message: "\(Self.maxInFlight) requests of this page are still waiting")))
                                continue
                            }
                            answers.addTask {
                                let (requestID, answer) = await requests.answer(bytes)
                                inFlight.count.subtract(1, ordering: .relaxed)
                                await reply(to: id, requestID: requestID, answer)
                            }
                        }
                    }
                }
                // Either side ending ends the page: the socket closed, or the hub let it go.
                _ = try await group.next()
                group.cancelAll()
            }
        } catch {
            logger.debug("a page's WebSocket ended", metadata: ["error": "\(error)"])
        }
        await hub.leave(id)
    }

    private func reply(to client: Int, requestID: JSONValue, _ answer: JSONValue) async {
        let frame = JSONValue.object(["type": "answer", "id": requestID, "answer": answer]).encoded()
        await hub.send(frame, to: client)
    }
}

/// A page's requests still waiting for their answer.
private final class InFlight: Sendable {
    let count = Atomic<Int>(0)
}
