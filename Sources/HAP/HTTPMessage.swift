// HTTP as HAP accessories speak it: responses and EVENT/1.0 messages, and their incremental parser.

/// One HTTP response or `EVENT/1.0` message from an accessory.
public struct HAPHTTPMessage: Sendable, Hashable {
    public var isEvent: Bool
    public var status: Int
    public var headers: [String: String]
    public var body: [UInt8]
}

/// Incremental parser for the responses and events an accessory sends: Content-Length or
/// chunked bodies (HAP-python's h11 chunks empty-bodied 200/401 responses), bounded sizes.
///
/// It parses the bytes directly: a response is a handful of short ASCII lines.
struct HTTPResponseParser {
    /// Received bytes not yet taken as a message; the buffer keeps its capacity.
    var buffer: [UInt8] = []
    static let maxHeaderBytes = 16 * 1024
    static let maxBodyBytes = 8 * 1024 * 1024

    mutating func feed(_ bytes: [UInt8]) { buffer.append(contentsOf: bytes) }

    mutating func feed(_ bytes: UnsafeRawBufferPointer) { buffer.append(contentsOf: bytes) }

    /// The next complete message, nil if more bytes are needed.
    mutating func next() throws(HAPError) -> HAPHTTPMessage? {
        guard let headerEnd = Self.find(Self.blankLine, in: buffer, from: 0) else {
            if buffer.count > Self.maxHeaderBytes {
                throw Self.bad("response header longer than \(Self.maxHeaderBytes) bytes")
            }
            return nil
        }
        let head = try Self.head(buffer[0..<headerEnd])
        let bodyStart = headerEnd + 4
        var body: [UInt8] = []
        let end: Int
        if head.chunked {
            guard let chunkedEnd = try chunks(from: bodyStart, into: &body) else { return nil }
            end = chunkedEnd
        } else if let length = head.contentLength {
            guard length >= 0 else {
                throw Self.bad("malformed Content-Length '\(head.headers["content-length"]?.prefix(20) ?? "")'")
            }
            guard length <= Self.maxBodyBytes else { throw Self.bad("response body of \(length) bytes is too large") }
            guard buffer.count >= bodyStart + length else { return nil }
            body = Array(buffer[bodyStart..<bodyStart + length])
            end = bodyStart + length
        } else {
            // Without a length the message has no body (204, or an accessory that omits it).
            end = bodyStart
        }
        // Usually nothing is left over, and the buffer empties without a copy.
        if end == buffer.count { buffer.removeAll(keepingCapacity: true) } else { buffer.removeFirst(end) }
        return HAPHTTPMessage(isEvent: head.isEvent, status: head.status, headers: head.headers, body: body)
    }

    struct Head {
        var isEvent: Bool
        var status: Int
        var headers: [String: String] = [:]
        /// The Content-Length, -1 if it is not a number: an error only when the body is not chunked.
        var contentLength: Int?
        var chunked = false
    }

    static let crlf: [UInt8] = [13, 10]
    static let blankLine: [UInt8] = [13, 10, 13, 10]

    /// The status line and headers (without the blank line that ends them).
    static func head(_ bytes: ArraySlice<UInt8>) throws(HAPError) -> Head {
        let lineEnd = find(crlf, in: bytes) ?? bytes.endIndex
        let statusLine = bytes[bytes.startIndex..<lineEnd]
        let firstSpace = statusLine.firstIndex(of: 0x20)
        let proto = statusLine[statusLine.startIndex..<(firstSpace ?? lineEnd)]
        let isEvent: Bool
        if proto.starts(with: "HTTP/1.".utf8) {
            isEvent = false
        } else if proto.elementsEqual("EVENT/1.0".utf8) {
            isEvent = true
        } else if firstSpace == nil {
            throw bad("malformed status line '\(String(decoding: statusLine.prefix(80), as: UTF8.self))'")
        } else {
            throw bad("unexpected protocol '\(String(decoding: proto.prefix(20), as: UTF8.self))' in status line")
        }
        guard let firstSpace else { throw bad("malformed status line") }
        let rest = statusLine[(firstSpace + 1)...]
        guard let status = decimal(rest.prefix { $0 != 0x20 }) else {
            throw bad("malformed status line '\(String(decoding: statusLine.prefix(80), as: UTF8.self))'")
        }
        var head = Head(isEvent: isEvent, status: status)
        var lineStart = min(lineEnd + 2, bytes.endIndex)
        while lineStart < bytes.endIndex {
            let end = find(crlf, in: bytes[lineStart...]) ?? bytes.endIndex
            defer { lineStart = min(end + 2, bytes.endIndex) }
            let line = bytes[lineStart..<end]
            if line.isEmpty { continue }
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { throw bad("malformed header line") }
            let name = trimmed(line[line.startIndex..<colon])
            let value = trimmed(line[(colon + 1)...])
            let key = String(unsafeUninitializedCapacity: name.count) { out in
                for (i, byte) in name.enumerated() { out[i] = lowercased(byte) }
                return name.count
            }
            head.headers[key] = String(decoding: value, as: UTF8.self)
            if key == "content-length" {
                head.contentLength = decimal(value) ?? -1
            } else if key == "transfer-encoding" {
                head.chunked = containsChunked(value)
            }
        }
        // A chunked body wins over a Content-Length (as HTTP/1.1 says).
        return head
    }

    /// The chunks of a chunked body from `pos`, appended to `body`; the index after the last
    /// chunk's trailer, or nil if the body is not complete yet.
    private func chunks(from pos: Int, into body: inout [UInt8]) throws(HAPError) -> Int? {
        var pos = pos
        while true {
            guard let lineEnd = Self.find(Self.crlf, in: buffer, from: pos) else { return nil }
            var sizeField = buffer[pos..<lineEnd]
            if let semicolon = sizeField.firstIndex(of: UInt8(ascii: ";")) {
                sizeField = sizeField[sizeField.startIndex..<semicolon]
            }
            guard let size = Self.hexadecimal(Self.trimmed(sizeField)) else { throw Self.bad("malformed chunk size") }
            guard body.count + size <= Self.maxBodyBytes else { throw Self.bad("response body too large") }
            let dataStart = lineEnd + 2
            if size == 0 {
                // The last chunk's line, any trailer lines, then an empty line.
                guard let end = Self.find(Self.blankLine, in: buffer, from: lineEnd) else { return nil }
                return end + 4
            }
            guard buffer.count >= dataStart + size + 2 else { return nil }
            guard buffer[dataStart + size] == 13, buffer[dataStart + size + 1] == 10 else {
                throw Self.bad("chunk of \(size) bytes not followed by CRLF")
            }
            body.append(contentsOf: buffer[dataStart..<dataStart + size])
            pos = dataStart + size + 2
        }
    }

    static func bad(_ message: String) -> HAPError {
        HAPError(code: .badHTTP, message: "invalid HTTP from the accessory: \(message)")
    }

    static func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
        find(needle, in: haystack[start...])
    }

    /// Where `needle` (a line ending or the blank line) first occurs in `haystack`.
    static func find(_ needle: [UInt8], in haystack: ArraySlice<UInt8>) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        var i = haystack.startIndex
        let last = haystack.endIndex - needle.count
        while i <= last {
            if haystack[i] == needle[0] {
                var match = true
                for j in 1..<needle.count where haystack[i + j] != needle[j] { match = false; break }
                if match { return i }
            }
            i += 1
        }
        return nil
    }

    /// The bytes without leading and trailing spaces and tabs (HTTP's optional whitespace).
    static func trimmed(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var lower = bytes.startIndex
        var upper = bytes.endIndex
        while lower < upper, bytes[lower] == 0x20 || bytes[lower] == 0x09 { lower += 1 }
        while upper > lower, bytes[upper - 1] == 0x20 || bytes[upper - 1] == 0x09 { upper -= 1 }
        return bytes[lower..<upper]
    }

    static func lowercased(_ byte: UInt8) -> UInt8 {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte + 32 : byte
    }

    /// Whether a Transfer-Encoding value names `chunked`, in any case.
    static func containsChunked(_ value: ArraySlice<UInt8>) -> Bool {
        let word = Array("chunked".utf8)
        let lower = value.map(lowercased)
        guard lower.count >= word.count else { return false }
        return (0...(lower.count - word.count)).contains { lower[$0..<$0 + word.count].elementsEqual(word) }
    }

    /// A non-negative decimal number of at most 18 digits, nothing else.
    static func decimal(_ digits: some Collection<UInt8>) -> Int? {
        guard !digits.isEmpty, digits.count <= 18 else { return nil }
        var value = 0
        for d in digits {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(d) else { return nil }
            value = value * 10 + Int(d - UInt8(ascii: "0"))
        }
        return value
    }

    /// A chunk size: hexadecimal digits, at most 15 of them.
    static func hexadecimal(_ digits: ArraySlice<UInt8>) -> Int? {
        guard !digits.isEmpty, digits.count <= 15 else { return nil }
        var value = 0
        for d in digits {
            let nibble: UInt8
            switch d {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = d - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = d - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): nibble = d - UInt8(ascii: "A") + 10
            default: return nil
            }
            value = value << 4 | Int(nibble)
        }
        return value
    }
}
