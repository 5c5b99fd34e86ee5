import Foundation
import HomeModel

#if canImport(Glibc)
    import Glibc
#endif

// A Thread accessory keeps its UDP port across restarts, as real ones keep theirs: a controller
// that paired with it (and one that has not heard a new `_hap._udp` announcement yet, or cannot
// hear mDNS at all) reaches it where it was. The port is kept in the accessory's directory
// (`thread-port`), and taken again only when nothing holds it: libcoap binds with SO_REUSEADDR,
// which would share a port another socket holds and split its datagrams, so the port is first
// bound without it, by a socket that is closed at once. Otherwise a free port, as the first time.

extension BridgeFiles {
    var threadPortFile: URL { directory.appendingPathComponent("thread-port") }

    /// The port served on last time, when no socket holds it now on `host`; else 0 (a free one).
    func threadPort(host: String) -> UInt16 {
        guard let text = try? String(contentsOf: threadPortFile, encoding: .utf8),
            let port = UInt16(text.trimmingCharacters(in: .whitespacesAndNewlines)), port != 0,
            Self.isFree(port: port, host: host)
        else { return 0 }
        return port
    }

    /// Keeps the port for the next start; a failure only costs that start its port.
    func keepThreadPort(_ port: Int) {
        try? AtomicFileWriter().write(Data("\(port)\n".utf8), to: threadPortFile)
    }

    /// After a reset: the next server takes a free port.
    func forgetThreadPort() { try? FileManager.default.removeItem(at: threadPortFile) }

    /// Whether a UDP socket without SO_REUSEADDR can bind `host` (IPv6) and `port` now.
    static func isFree(port: UInt16, host: String) -> Bool {
        var address = sockaddr_in6()
        address.sin6_family = sa_family_t(AF_INET6)
        address.sin6_port = port.bigEndian
        guard inet_pton(AF_INET6, host, &address.sin6_addr) == 1 else { return false }
        let fd = socket(AF_INET6, Int32(SOCK_DGRAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size))
            }
        }
        return bound == 0
    }
}
