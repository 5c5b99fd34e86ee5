// A loopback port where a connect gets nowhere, for the tests of stopping a client (or the
// gateway) in the middle of a connect attempt, and of how many connections a client opens.
import Foundation
#if canImport(Glibc)
    import Glibc
#endif
/// A loopback port where a connection gets nowhere. With `dropsPackets`, a listener that never
/// accepts and whose accept queue is full, so the kernel drops every further SYN and a connect
/// hangs as it does to a host that drops packets; otherwise the handshake completes and nothing
/// is ever said. `accepting()` accepts every connection, says nothing, and counts them.
public final class SilentListener: @unchecked Sendable {
    public let port: Int
    private let lock = NSLock()
    private var descriptors: [Int32] = []
    /// `accepting()`'s: the connections open now, and how many were accepted in all.
    private var open: [Int32] = []
    private var accepted = 0

    public init(dropsPackets: Bool) throws {
        let (listener, address) = try Self.bindLoopback(backlog: 0)
        descriptors.append(listener)
        port = Int(UInt16(bigEndian: address.sin_port))
        guard dropsPackets else { return }
        // A backlog of 0 queues one connection; the next ones wait for room, and later SYNs are dropped.
        for _ in 0..<4 {
            let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            descriptors.append(client)
            _ = fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK)
            var target = address
            _ = withUnsafePointer(to: &target) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(client, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
        usleep(200_000)
    }

    private init(listener: Int32, port: Int) {
        self.port = port
        descriptors = [listener]
    }

    /// Accepts every connection on a thread of its own and keeps it open, silent.
    public static func accepting() throws -> SilentListener {
        let (listener, address) = try bindLoopback(backlog: 64)
        let silent = SilentListener(listener: listener, port: Int(UInt16(bigEndian: address.sin_port)))
        Thread {
            while true {
                let fd = accept(listener, nil, nil)
                if fd < 0 { return }
                silent.lock.withLock {
                    silent.open.append(fd)
                    silent.accepted += 1
                }
            }
        }.start()
        return silent
    }

    /// `accepting()`'s counts: connections accepted in all, and open now.
    public var counts: (accepted: Int, open: Int) { lock.withLock { (accepted, open.count) } }

    /// Closes the connections `accepting()` holds, as an accessory that hangs up.
    public func dropAccepted() {
        lock.withLock {
            for fd in open { Glibc.close(fd) }
            open = []
        }
    }

    public func close() {
        dropAccepted()
        lock.withLock {
            for fd in descriptors {
                shutdown(fd, Int32(SHUT_RDWR))
                Glibc.close(fd)
            }
            descriptors = []
        }
    }

    private static func bindLoopback(backlog: Int32) throws -> (Int32, sockaddr_in) {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard listener >= 0 else { throw ProcessError("socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, length) == 0 && listen(listener, backlog) == 0
                    && getsockname(listener, $0, &length) == 0
            }
        }
        guard bound else {
            let reason = String(cString: strerror(errno))
            Glibc.close(listener)
            throw ProcessError("bind/listen: \(reason)")
        }
        return (listener, address)
    }
}
