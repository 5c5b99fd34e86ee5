import Foundation
import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// A TCP connection to the web view driven byte by byte: what a misbehaving client does (a
/// partial head, a huge header, an unmasked frame, a WebSocket it never reads) and no library
/// would send.
public final class RawConnection: @unchecked Sendable {
    public let descriptor: Int32
    /// Bytes received after the upgrade's response head, for the next `receive`.
    private var pending: [UInt8] = []

    /// Connects to 127.0.0.1:`port`; `receiveBuffer` shrinks the socket's receive buffer (a
    /// reader that never reads then stops the server's writes sooner).
    public init(port: Int, receiveBuffer: Int32? = nil) throws {
        // Close-on-exec: the curl and mosquitto_pub a test runs meanwhile inherit none of them.
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw ProcessError("socket: \(String(cString: strerror(errno)))") }
        if var size = receiveBuffer {
            setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            let message = String(cString: strerror(errno))
            close(descriptor)
            throw ProcessError("connect to port \(port): \(message)")
        }
    }

    deinit { close(descriptor) }

    public func send(_ text: String) throws { try send(Array(text.utf8)) }

    public func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            guard sent > 0 else { throw ProcessError("send: \(String(cString: strerror(errno)))") }
            offset += sent
        }
    }

    /// What arrives within `timeout` seconds, until the peer closes (or `until` is satisfied).
    public func receive(timeout: Double, until: ([UInt8]) -> Bool = { _ in false }) -> (bytes: [UInt8], closed: Bool) {
        var received = pending
        pending = []
        if !received.isEmpty, until(received) { return (received, false) }
        let deadline = Date().addingTimeInterval(timeout)
        var buffer = [UInt8](repeating: 0, count: 65536)
        while Date() < deadline {
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let milliseconds = Int32(max(1, deadline.timeIntervalSinceNow * 1000))
            guard poll(&poller, 1, milliseconds) > 0 else { continue }
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count <= 0 { return (received, true) }
            received += buffer[..<count]
            if until(received) { return (received, false) }
        }
        return (received, false)
    }

    /// Whether the server has closed the connection (reading what it sent meanwhile).
    public func isClosed(within timeout: Double) -> Bool { receive(timeout: timeout).closed }

    /// The status line of the response that arrives within `timeout` seconds ("" if none).
    public func statusLine(timeout: Double) -> String {
        let (bytes, _) = receive(timeout: timeout) { $0.contains(UInt8(ascii: "\n")) }
        let text = String(decoding: bytes, as: UTF8.self)
        return String(text.split(separator: "\r\n", maxSplits: 1).first ?? "")
    }

    /// Sends a WebSocket upgrade for `/ws` naming `host` and returns the status line.
    public func upgrade(host: String, path: String = "/ws") throws -> String {
        try send(
            "GET \(path) HTTP/1.1\r\nHost: \(host)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
        let separator = Array("\r\n\r\n".utf8)
        let (bytes, _) = receive(timeout: 10) { $0.firstRange(of: separator) != nil }
        guard let end = bytes.firstRange(of: separator) else { return "" }
        pending = Array(bytes[end.upperBound...])
        let text = String(decoding: bytes[..<end.lowerBound], as: UTF8.self)
        return String(text.split(separator: "\r\n", maxSplits: 1).first ?? "")
    }

    /// Reads frames until the server's close frame, answers it as a client must, and returns its
    /// code and whether the server then closed the connection.
    public func awaitClose(timeout: Double = 10) -> (code: Int?, closed: Bool, bytes: [UInt8]) {
        let (bytes, closed) = receive(timeout: timeout) { Self.closeCode(in: $0) != nil }
        let code = Self.closeCode(in: bytes)
        if closed { return (code, true, bytes) }
        try? send(Self.frame([0x03, 0xE8], opcode: 0x8))
        return (code, isClosed(within: 5), bytes)
    }

    /// `method path` naming `host`, with `Connection: close`: the status line, the headers (names
    /// lowercased) and every byte after them until the server closes — for HEAD, which curl
    /// cannot show as sent.
    public static func exchange(port: Int, _ method: String, _ path: String, host: String = "127.0.0.1") throws -> (
        status: String, headers: [String: String], body: [UInt8]
    ) {
        let connection = try RawConnection(port: port)
        try connection.send("\(method) \(path) HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n")
        let (bytes, _) = connection.receive(timeout: 10)
        guard let end = bytes.firstRange(of: Array("\r\n\r\n".utf8)) else { return ("", [:], bytes) }
        let lines = String(decoding: bytes[..<end.lowerBound], as: UTF8.self).split(separator: "\r\n")
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                in: .whitespaces)
        }
        return (String(lines.first ?? ""), headers, Array(bytes[end.upperBound...]))
    }

    /// A client's frame: masked unless `masked` is false (which RFC 6455 forbids); text by
    /// default, `fin` false for the first part of a fragmented message.
    public static func frame(_ payload: [UInt8], opcode: UInt8 = 0x1, fin: Bool = true, masked: Bool = true) -> [UInt8]
    {
        var frame: [UInt8] = [(fin ? 0x80 : 0) | opcode]
        let maskBit: UInt8 = masked ? 0x80 : 0
        if payload.count < 126 {
            frame.append(maskBit | UInt8(payload.count))
        } else if payload.count <= 0xFFFF {
            frame.append(maskBit | 126)
            frame += [UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        } else {
            frame.append(maskBit | 127)
            frame += (0..<8).reversed().map { UInt8((payload.count >> ($0 * 8)) & 0xFF) }
        }
        guard masked else { return frame + payload }
        let key: [UInt8] = [0x12, 0x34, 0x56, 0x78]
        return frame + key + payload.enumerated().map { $0.element ^ key[$0.offset % 4] }
    }

    public static func textFrame(_ text: String, masked: Bool = true) -> [UInt8] {
        frame(Array(text.utf8), masked: masked)
    }

    /// The close code of the first close frame among the server's frames `bytes`, if any.
    public static func closeCode(in bytes: [UInt8]) -> Int? {
        var index = 0
        while index + 2 <= bytes.count {
            let opcode = bytes[index] & 0x0F
            var length = Int(bytes[index + 1] & 0x7F)
            var start = index + 2
            if length == 126, start + 2 <= bytes.count {
                length = Int(bytes[start]) << 8 | Int(bytes[start + 1])
                start += 2
            } else if length == 127, start + 8 <= bytes.count {
                length = bytes[start..<(start + 8)].reduce(0) { $0 << 8 | Int($1) }
                start += 8
            }
            if opcode == 0x8, start + 2 <= bytes.count { return Int(bytes[start]) << 8 | Int(bytes[start + 1]) }
            index = start + length
        }
        return nil
    }
}

/// The resident memory of process `pid`, in MB (VmRSS).
public func residentMegabytes(_ pid: Int32) -> Double? {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
        let kilobytes = Double(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
    else { return nil }
    return kilobytes / 1024
}

/// How many descriptors process `pid` has open.
public func openDescriptors(_ pid: Int32) -> Int {
    (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
}

/// A WebSocket upgrade's whole answer, head and body, on a raw connection.
public enum HTTP1Upgrade {
    public static func response(port: Int, path: String, extra: String = "") throws -> String {
        let connection = try RawConnection(port: port)
        try connection.send(
            "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" + extra + "\r\n")
        return String(decoding: connection.receive(timeout: 5).bytes, as: UTF8.self)
    }
}
