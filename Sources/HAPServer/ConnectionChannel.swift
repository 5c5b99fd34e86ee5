import NIOCore

/// An accepted connection as its task takes it: the channel (written on directly) and the
/// stream its handler feeds.
struct AcceptedConnection: Sendable {
    let channel: any Channel
    let inputs: AsyncStream<ConnectionInput>
    let input: AsyncStream<ConnectionInput>.Continuation

    /// Sets up a just-accepted channel; runs on its event loop, before the channel reads.
    static func make(_ channel: any Channel) throws -> AcceptedConnection {
        let (inputs, input) = AsyncStream.makeStream(of: ConnectionInput.self)
        try channel.pipeline.syncOperations.addHandler(ConnectionInputHandler(input))
        return AcceptedConnection(channel: channel, inputs: inputs, input: input)
    }
}

/// Puts what the socket says into the connection's one stream (`ConnectionInput`), beside the
/// events and closes others put there.
///
/// Why not `NIOAsyncChannel`: its inbound sequence and writer, and a task relaying bytes from one
/// stream into another, were half of a read's instructions. Here bytes go straight into the
/// stream, and the connection writes on the channel from its loop (`EventLoopTaskExecutor`).
///
/// What holds: the channel reads only when asked (`autoRead` off): the connection asks again when
/// it has handled what came (`HAPServerConnection.serve`), so a controller that sends faster than
/// it is served waits in its socket, not in our memory.
final class ConnectionInputHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let input: AsyncStream<ConnectionInput>.Continuation

    init(_ input: AsyncStream<ConnectionInput>.Continuation) { self.input = input }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        input.yield(.bytes(unwrapInboundIn(data)))
    }

    func channelInactive(context: ChannelHandlerContext) {
        input.yield(.peerClosed)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A reset or a failed read: the connection ends as if the peer had closed it.
        context.close(promise: nil)
    }
}
