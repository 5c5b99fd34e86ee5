import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// What a request to the HAP peer costs any client before HAP: round trips to an echo listener
/// on the peer's own event loop, from a blocking socket on a thread of its own (no concurrency
/// runtime, no event loop, no crypto, no parsing). A client's share of a request (its latency
/// minus the peer's own handling) cannot be below this.
enum TransportFloor {
    /// Seconds per round trip of `size` bytes, `count` times, after 100 unmeasured ones.
    static func echoRoundTrips(port: Int, size: Int, count: Int) async throws -> [Double] {
        try await withCheckedThrowingContinuation { continuation in
            Thread {
                continuation.resume(with: Result { try measure(port: port, size: size, count: count) })
            }.start()
        }
    }

    private static func measure(port: Int, size: Int, count: Int) throws -> [Double] {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw BenchError("socket: errno \(errno)") }
        defer { close(fd) }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else { throw BenchError("connect to the echo listener: errno \(errno)") }
        let message = [UInt8](repeating: 0x78, count: size)
        var buffer = [UInt8](repeating: 0, count: 4096)
        var samples: [Double] = []
        samples.reserveCapacity(count)
        for round in 0..<(count + 100) {
            let start = ContinuousClock.now
            guard message.withUnsafeBytes({ send(fd, $0.baseAddress, size, 0) }) == size else {
                throw BenchError("send to the echo listener: errno \(errno)")
            }
            var received = 0
            while received < size {
                let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                guard n > 0 else { throw BenchError("the echo listener closed (errno \(errno))") }
                received += n
            }
            if round >= 100 { samples.append(elapsed(start)) }
        }
        return samples
    }
}
