import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A bare UDP socket on ::1 for the CoAP bad-input tests (CoAPTests, and HAP over CoAP in
/// HAPServerTests): sends any bytes, reads what comes back.
public final class RawUDP {
    public let fd: Int32
    public let port: UInt16

    public init() throws {
        let fd = socket(AF_INET6, Int32(SOCK_DGRAM.rawValue), 0)
        self.fd = fd
        var address = sockaddr_in6()
        address.sin6_family = sa_family_t(AF_INET6)
        address.sin6_addr = in6addr_loopback
        var length = socklen_t(MemoryLayout<sockaddr_in6>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard fd >= 0, bound else { throw POSIXError(.EADDRNOTAVAIL) }
        port = UInt16(bigEndian: address.sin6_port)
    }

    deinit { close(fd) }

    public func send(_ bytes: [UInt8], to port: UInt16) {
        var address = sockaddr_in6()
        address.sin6_family = sa_family_t(AF_INET6)
        address.sin6_addr = in6addr_loopback
        address.sin6_port = port.bigEndian
        _ = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                sendto(fd, bytes, bytes.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in6>.size))
            }
        }
    }

    /// The next datagram and the port it came from, or nil after `timeout` seconds.
    public func receive(timeout: Double) -> (bytes: [UInt8], port: UInt16)? {
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&descriptor, 1, Int32(timeout * 1000)) == 1 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 4096)
        var address = sockaddr_in6()
        var length = socklen_t(MemoryLayout<sockaddr_in6>.size)
        let count = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                recvfrom(fd, &buffer, buffer.count, 0, $0, &length)
            }
        }
        guard count >= 0 else { return nil }
        return (Array(buffer.prefix(count)), UInt16(bigEndian: address.sin6_port))
    }
}

/// A CoAP message by hand (RFC 7252 §3): version 1, type, token, code, message id, options
/// (number, value; in order), payload.
public func coapMessage(
    type: UInt8, code: UInt8, mid: UInt16, token: [UInt8], options: [(UInt16, [UInt8])] = [], payload: [UInt8] = []
) -> [UInt8] {
    var bytes: [UInt8] = [0x40 | type << 4 | UInt8(token.count), code, UInt8(mid >> 8), UInt8(mid & 0xFF)] + token
    var last: UInt16 = 0
    for (number, value) in options {
        // Deltas and lengths under 13 only: all these tests need.
        bytes.append(UInt8(number - last) << 4 | UInt8(value.count))
        bytes += value
        last = number
    }
    if !payload.isEmpty { bytes += [0xFF] + payload }
    return bytes
}
