import Foundation
import NIOCore
import NIOPosix

// The browser's IPv6 side: a second socket on [::]:5353, joined to ff02::fb on every
// multicast-capable IPv6 interface the filter admits, asking on each. Accessories that announce
// AAAA records only (behind a Thread border router, on an IPv6-only network) are found here; a
// link-local address is kept with the interface it was heard on as its scope.

extension MDNSBrowser {
    static let group6: SocketAddress = {
        do { return try SocketAddress(ipAddress: "ff02::fb", port: 5353) } catch {
            preconditionFailure("ff02::fb is a valid address")
        }
    }()

    /// Opens the IPv6 socket and joins the group on each admitted interface; nil (and IPv4 only)
    /// on a machine without IPv6 or where port 5353 cannot be shared.
    func openIPv6() async -> AsyncStream<Datagram>? {
        let (inbound, continuation) = AsyncStream.makeStream(of: Datagram.self, bufferingPolicy: .bufferingNewest(256))
        let channel: any Channel
        do {
            channel = try await DatagramBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .channelOption(.socketOption(.so_reuseaddr), value: 1)
                .channelOption(.socketOption(NIOBSDSocket.Option(rawValue: SO_REUSEPORT)), value: 1)
                .channelOption(ChannelOptions.Types.SocketOption(level: .ipv6, name: .ipv6_v6only), value: 1)
                .channelOption(.receivePacketInfo, value: true)
                .channelInitializer { ch in
                    ch.eventLoop.makeCompletedFuture {
                        try ch.pipeline.syncOperations.addHandler(DatagramReceiver(continuation))
                    }
                }
                .bind(host: "::", port: 5353).get()
        } catch {
            logger.debug("mDNS: no IPv6 socket (\(error)); browsing over IPv4 only")
            continuation.finish()
            return nil
        }
        if let multicast = channel as? any MulticastChannel {
            let devices = interfaceDevices { device in
                if case .v6? = device.address { return true }
                return false
            }
            joined6 = await join(Self.group6, on: devices, multicast)
        }
        channel6 = channel
        return inbound
    }

    /// Warns, once both sockets are open, when the service is not followed in both families:
    /// over IPv6 only (a host without IPv4, or without an IPv4 multicast route) or not at all.
    /// Saying "not followed" while IPv6 follows it would send a user looking for a fault that
    /// is not there.
    func sayWhatIsFollowed() {
        guard let ipv4Problem else { return }
        if joined6.isEmpty {
            logger.warning(
                "mDNS: \(service) is not followed: no IPv4 multicast (\(ipv4Problem)) and no IPv6 interface to ask on")
        } else {
            let interfaces = joined6.map(\.name).joined(separator: ", ")
            logger.warning(
                "mDNS: \(service) is followed over IPv6 only, on \(interfaces): no IPv4 multicast (\(ipv4Problem))")
        }
    }

    /// Sends `bytes` to ff02::fb on each interface joined, setting the outgoing interface
    /// before each copy (the event loop keeps the order).
    func sendIPv6(_ bytes: [UInt8]) {
        guard let channel = channel6, let options = channel as? any SocketOptionProvider else { return }
        var buffer = channel.allocator.buffer(capacity: bytes.count)
        buffer.writeBytes(bytes)
        let envelope = AddressedEnvelope(remoteAddress: Self.group6, data: buffer)
        for device in joined6 {
            options.setIPv6MulticastIF(CUnsignedInt(device.interfaceIndex)).whenFailure { error in
                self.sendFailed(error)
            }
            channel.writeAndFlush(envelope).whenFailure { error in self.sendFailed(error) }
        }
    }
}

extension DNSMessage.Record {
    /// An AAAA record of a link-local address (fe80::/10) with `interface` as its scope.
    func scopingLinkLocal(to interface: String) -> DNSMessage.Record {
        guard case .aaaa(let ip) = data, ip.lowercased().hasPrefix("fe80:"), !ip.contains("%") else { return self }
        var scoped = self
        scoped.data = .aaaa("\(ip)%\(interface)")
        return scoped
    }
}
