// A loopback port where an MQTT connect gets nowhere, for the tests of stopping a client (or the
// gateway) in the middle of a connect attempt.
import Foundation
#if canImport(Glibc)
    import Glibc
#endif
/// A loopback port where an MQTT connect gets nowhere. With `dropsPackets`, a listener that never
/// accepts and whose accept queue is full, so the kernel drops every further SYN and a connect
/// hangs as it does to a host that drops packets; otherwise the handshake completes and nothing
/// is ever said.
public final class SilentListener: @unchecked Sendable {
    public let port: Int
    private var descriptors: [Int32] = []

    public init(dropsPackets: Bool) throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard listener >= 0 else { throw ProcessError("socket: \(String(cString: strerror(errno)))") }
        descriptors.append(listener)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, length) == 0 && listen(listener, 0) == 0 && getsockname(listener, $0, &length) == 0
            }
        }
        guard bound else { throw ProcessError("bind/listen: \(String(cString: strerror(errno)))") }
        port = Int(UInt16(bigEndian: address.sin_port))
        guard dropsPackets else { return }
        // A backlog of 0 queues one connection; the next ones wait for room, and later SYNs are dropped.
        for _ in 0..<4 {
            let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            descriptors.append(client)
            _ = fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK)
            _ = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(client, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
        usleep(200_000)
    }

    public func close() {
        for fd in descriptors { Glibc.close(fd) }
        descriptors = []
    }
}
