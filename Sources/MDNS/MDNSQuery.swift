import NIOCore
import NIOPosix

/// One question for a service type, asked once from an ephemeral port: the answers come back
/// by unicast (RFC 6762 §5.1), so no other browser or responder on the machine is in the way.
public enum MDNSQuery {
    /// Asks for `service`'s PTR records and returns every record of every answer that came
    /// within `timeout` seconds (at least 0.1).
    public static func records(service: String, timeout: Double) async throws(MDNSError) -> [DNSMessage.Record] {
        let (inbound, continuation) = AsyncStream.makeStream(of: Datagram.self)
        let channel: any Channel
        do {
            channel = try await DatagramBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .channelInitializer { ch in
                    ch.eventLoop.makeCompletedFuture {
                        try ch.pipeline.syncOperations.addHandler(DatagramReceiver(continuation))
                    }
                }
                .bind(host: "0.0.0.0", port: 0).get()
        } catch {
            throw MDNSError(code: .io, message: "cannot open a UDP socket for mDNS: \(error)")
        }
        defer { channel.close(promise: nil) }
        let query = DNSMessage.query(name: service, type: DNSMessage.RecordType.ptr)
        do {
            var buffer = channel.allocator.buffer(capacity: query.count)
            buffer.writeBytes(query)
            try await channel.writeAndFlush(AddressedEnvelope(remoteAddress: SocketAddress.mDNSGroup, data: buffer))
                .get()
        } catch {
            throw MDNSError(code: .unreachable, message: "cannot send the mDNS query (no multicast route?): \(error)")
        }
        var records: [DNSMessage.Record] = []
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                try? await Task.sleep(nanoseconds: UInt64(max(0.1, timeout) * 1_000_000_000))
                continuation.finish()
            }
            for await datagram in inbound {
                if let msg = try? DNSMessage.parse(datagram.bytes) { records += msg.records }
            }
            group.cancelAll()
        }
        return records
    }
}
