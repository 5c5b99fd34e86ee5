import Foundation
import NIOCore

/// Where a request head ends (the empty line, CRLF or a bare LF as the HTTP parser accepts),
/// how long it is, whether it asks for a WebSocket (`Upgrade: websocket`), and the few fields
/// the guard decides on before the HTTP parser sees the head: the request target and `Host`,
/// `Origin`, `Authorization`, `Cookie` and `Content-Length`.
struct HeadScanner {
    enum Result: Equatable {
        case more
        case tooLarge
        /// The head ends after `length` bytes of the buffer just scanned.
        case complete(length: Int)
    }

    /// The fields kept, by lowercased name.
    static let kept: Set<String> = ["host", "origin", "authorization", "cookie", "content-length"]

    private(set) var bytes = 0
    private(set) var isWebSocketUpgrade = false
    /// The request line's target (`/ws?token=…`).
    private(set) var target = ""
    /// The kept fields' values, in order, by lowercased name.
    private(set) var fields: [String: [String]] = [:]
    private var line: [UInt8] = []
    /// Whether the line is kept past 64 bytes, decided when it reaches them.
    private var keepLine: Bool?
    private var sawLine = false

    mutating func scan(_ data: ByteBufferView, limit: Int) -> Result {
        var offset = 0
        for byte in data {
            offset += 1
            bytes += 1
            if bytes > limit { return .tooLarge }
            switch byte {
            case UInt8(ascii: "\r"):
                continue
            case UInt8(ascii: "\n"):
                if line.isEmpty {
                    // Empty lines before the request line are allowed and skipped (RFC 9112 §2.2).
                    if sawLine { return .complete(length: offset) }
                    continue
                }
                if sawLine { noteHeader() } else { noteRequestLine() }
                sawLine = true
                line.removeAll(keepingCapacity: true)
                keepLine = nil
            default:
                // A line is kept whole (the head's limit bounds it) when it is the request line
                // or one of the fields kept; any other is dropped after its first 64 bytes.
                if line.count >= 64 {
                    if keepLine == nil { keepLine = isKeptLine }
                    if keepLine == false { continue }
                }
                line.append(byte)
            }
        }
        return .more
    }

    /// Whether the line so far is the request line or a kept field's.
    private var isKeptLine: Bool {
        guard sawLine else { return true }
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return false }
        return Self.kept.contains(String(decoding: line[..<colon], as: UTF8.self).lowercased())
    }

    private mutating func noteRequestLine() {
        let parts = line.split(separator: UInt8(ascii: " "))
        if parts.count >= 2 { target = String(decoding: parts[1], as: UTF8.self) }
    }

    private mutating func noteHeader() {
        let text = String(decoding: line, as: UTF8.self)
        guard let colon = text.firstIndex(of: ":") else { return }
        let name = text[..<colon].lowercased()
        let value = text[text.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        if name == "upgrade", value.lowercased().contains("websocket") { isWebSocketUpgrade = true }
        if Self.kept.contains(name) { fields[name, default: []].append(value) }
    }

    /// The declared body length, when the head declares one; nil also when it declares
    /// several or none that is a number (the HTTP parser refuses those).
    var contentLength: Int? {
        guard let values = fields["content-length"], let first = values.first,
            values.allSatisfy({ $0 == first })
        else { return nil }
        return Int(first)
    }

    /// The target's path, without the query.
    var path: Substring { target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? "" }

    /// A query parameter of the target, percent-decoded as Hummingbird's `queryParameters`
    /// decode it (a `+` stays a `+`), so that a token reads the same here and on every route.
    func query(_ name: String) -> String? {
        guard let query = target.split(separator: "?", maxSplits: 1).dropFirst().first else { return nil }
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.first == Substring(name) else { continue }
            let value = parts.count > 1 ? String(parts[1]) : ""
            return value.removingPercentEncoding ?? value
        }
        return nil
    }

    /// A cookie's value, as the browser sent it.
    func cookie(_ name: String) -> String? {
        for header in fields["cookie"] ?? [] {
            for pair in header.split(separator: ";") {
                let parts = pair.trimmingCharacters(in: .whitespaces).split(
                    separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                if parts.first == Substring(name) { return parts.count > 1 ? String(parts[1]) : "" }
            }
        }
        return nil
    }
}

/// Follows a client's WebSocket frames through their headers and lengths, to see the mask bit
/// of each; false as soon as one is unmasked.
struct MaskScanner {
    private var header: [UInt8] = []
    private var payloadLeft: UInt64 = 0

    mutating func scan(_ data: ByteBufferView) -> Bool {
        var index = data.startIndex
        while index < data.endIndex {
            if payloadLeft > 0 {
                let skip = Int(min(payloadLeft, UInt64(data.endIndex - index)))
                index += skip
                payloadLeft -= UInt64(skip)
                continue
            }
            header.append(data[index])
            index += 1
            if header.count == 2, header[1] & 0x80 == 0 { return false }
            guard header.count >= 2 else { continue }
            let short = header[1] & 0x7F
            let extended = short == 126 ? 2 : short == 127 ? 8 : 0
            guard header.count == 2 + extended + 4 else { continue }
            payloadLeft =
                extended == 0 ? UInt64(short) : header[2..<(2 + extended)].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            header.removeAll(keepingCapacity: true)
        }
        return true
    }
}
