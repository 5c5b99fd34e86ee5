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
///
/// A page that lets `web.page-queue` frames pile up unread is let go: it is sent close code 1013
/// (try again later) if it still reads, and its connection is closed within five seconds either
/// way, so that nothing of it stays queued. The page reconnects and starts from a fresh home.
struct PageSession: Sendable {
    let hub: LiveHub
    let requests: PageRequests
    /// What the page's token may do: every request it sends is checked against it.
    let grant: WebAccess.Grant
    /// The page's connection, closed when it overflows (its writer may be waiting on a peer
    /// that does not read, and would never see it).
    let channel: any Channel
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
            // Each task says whether its end ends the page.
            try await withThrowingTaskGroup(of: Bool.self) { group in
                // The only writer: frames go out in the order the hub and the answers queued them.
                // On an overflow it stops, and the task below sends 1013.
                group.addTask {
                    for await frame in outlet.frames {
                        if outlet.overflowed { return false }
                        outlet.taken()
                        try await outbound.write(.text(frame))
                    }
                    return !outlet.overflowed
                }
                // An outlet that finishes without overflowing is the writer's to end the page with.
                group.addTask {
                    guard await outlet.overflow() else { return false }
                    logger.info("a page fell behind and was let go", metadata: ["frames waiting": "\(outlet.limit)"])
                    // Closed in five seconds whatever happens: the close frame below waits behind
                    // what the page has not read, and waits for ever if it never reads.
                    channel.eventLoop.scheduleTask(in: .seconds(5)) { channel.close(promise: nil) }
                    try? await outbound.close(.unknown(1013), reason: "the page fell behind")
                    // The page ends with its inbound side: when its client answers the close, or
                    // the connection is closed. Ending it here would cancel the reader, and a
                    // cancelled read closes the connection before the close frame is read.
                    return false
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
                                let (requestID, answer) = await requests.answer(bytes, grant: grant)
                                inFlight.count.subtract(1, ordering: .relaxed)
                                await reply(to: id, requestID: requestID, answer)
                            }
                        }
                    }
                    return true
                }
                // Any side ending ends the page: the socket closed, the hub let it go, or it overflowed.
                while let ends = try await group.next(), !ends {}
                group.cancelAll()
            }
        } catch {
            // Thrown on, so that the WebSocket closes with the code that says why (1009 for a
            // message too large, 1007 for text that is not UTF-8, 1002 for a protocol error).
            logger.debug("a page's WebSocket ended", metadata: ["error": "\(error)"])
            await hub.leave(id)
            throw error
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
