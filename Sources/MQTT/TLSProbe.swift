import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Whether a broker address that closed a plain MQTT connection before its CONNACK speaks TLS:
/// `mqtt://` pointed at a TLS listener (port 8883, or any port a broker serves with TLS) fails
/// exactly as a broker that does not speak MQTT 5 fails — the connection closed, no CONNACK —
/// and only asking in TLS tells the two apart. One TLS ClientHello: a TLS server answers it with
/// a handshake record (its ServerHello) or an alert, both `0x16`/`0x15` then version `0x03`; an
/// MQTT broker closes the connection without a byte.
public enum BrokerTLSProbe {
    /// The hint for a broker that answered in TLS.
    public static func hint(host: String, port: Int) -> String {
        "the broker at \(host):\(port) may be a TLS listener: use mqtts://"
    }

    /// Whether the failure of a plain (`mqtt://`) connection is worth asking about: the
    /// connection was closed (or spoke nonsense) before the broker accepted it.
    public static func mayBeTLS(_ error: MQTTError, _ configuration: MQTTConfiguration) -> Bool {
        configuration.tls == nil && [.connectionLost, .protocolError].contains(error.code)
    }

    /// Asks `host:port` in TLS; true when it answers in TLS within `timeout` seconds. The
    /// blocking socket calls run on a dispatch thread: on two cores the cooperative pool has two
    /// threads, and the gateway starting beside it needs them.
    public static func answersInTLS(host: String, port: Int, timeout: Double = 1) async -> Bool {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(returning: askInTLS(host: host, port: port, timeout: timeout))
            }
        }
    }

    /// One connection, at most `timeout` for each of connect, send and receive.
    static func askInTLS(host: String, port: Int, timeout: Double) -> Bool {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &list) == 0, let first = list else { return false }
        defer { freeaddrinfo(list) }
        let fd = socket(first.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var limit = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - Double(Int(timeout))) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        guard connect(fd, first.pointee.ai_addr, first.pointee.ai_addrlen) == 0 else { return false }
        let hello = clientHello(serverName: host)
        let sent = hello.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard sent == hello.count else { return false }
        var answer = [UInt8](repeating: 0, count: 5)
        var received = 0
        while received < 2 {
            let n = answer.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + received, $0.count - received, 0) }
            if n <= 0 { break }
            received += n
        }
        return received >= 2 && (answer[0] == 0x16 || answer[0] == 0x15) && answer[1] == 0x03
    }

    /// A TLS 1.2 ClientHello with the common suites and the extensions a TLS 1.2/1.3 server
    /// needs to answer it (SNI, groups, signature algorithms): enough for a ServerHello or an
    /// alert, never a session.
    static func clientHello(serverName: String) -> [UInt8] {
        func u16(_ v: Int) -> [UInt8] { [UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
        func ext(_ type: Int, _ body: [UInt8]) -> [UInt8] { u16(type) + u16(body.count) + body }
        let suites: [UInt8] = [
            0x13, 0x01, 0x13, 0x02, 0xC0, 0x2F, 0xC0, 0x30, 0xC0, 0x2B, 0xC0, 0x2C, 0x00, 0x9C, 0x00, 0x2F,
        ]
        var extensions: [UInt8] = []
        let name = Array(serverName.utf8)
        if !name.isEmpty, serverName.contains(where: \.isLetter) {
            extensions += ext(0x0000, u16(name.count + 3) + [0x00] + u16(name.count) + name)
        }
        extensions += ext(0x000A, u16(6) + [0x00, 0x1D, 0x00, 0x17, 0x00, 0x18])
        extensions += ext(0x000B, [0x01, 0x00])
        extensions += ext(0x000D, u16(8) + [0x04, 0x01, 0x08, 0x04, 0x04, 0x03, 0x02, 0x01])
        var body: [UInt8] = [0x03, 0x03] + (0..<32).map { _ in UInt8.random(in: 0...255) } + [0x00]
        body += u16(suites.count) + suites + [0x01, 0x00] + u16(extensions.count) + extensions
        let handshake: [UInt8] = [0x01, 0x00] + u16(body.count) + body
        return [0x16, 0x03, 0x01] + u16(handshake.count) + handshake
    }
}
