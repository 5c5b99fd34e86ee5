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
struct HTTPResponseParser {
    private var buffer: [UInt8] = []
    static let maxHeaderBytes = 16 * 1024
    static let maxBodyBytes = 8 * 1024 * 1024

    mutating func feed(_ bytes: [UInt8]) { buffer.append(contentsOf: bytes) }

    var hasPartialData: Bool { !buffer.isEmpty }

    /// The next complete message, nil if more bytes are needed.
    mutating func next() throws(HAPError) -> HAPHTTPMessage? {
        guard let headerEnd = Self.find([13, 10, 13, 10], in: buffer, from: 0) else {
            if buffer.count > Self.maxHeaderBytes {
                throw Self.bad("response header longer than \(Self.maxHeaderBytes) bytes")
            }
            return nil
        }
        let headerText = String(decoding: buffer[0..<headerEnd], as: UTF8.self)
        var lines = headerText.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst()
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, let status = Int(parts[1]) else {
            throw Self.bad("malformed status line '\(statusLine.prefix(80))'")
        }
        let isEvent: Bool
        if parts[0].hasPrefix("HTTP/1.") {
            isEvent = false
        } else if parts[0] == "EVENT/1.0" {
            isEvent = true
        } else {
            throw Self.bad("unexpected protocol '\(parts[0].prefix(20))' in status line")
        }
        var headers: [String: String] = [:]
        for line in lines where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":") else { throw Self.bad("malformed header line") }
            let name = line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
            headers[name] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        let bodyStart = headerEnd + 4
        var body: [UInt8] = []
        var consumed: Int
        if let te = headers["transfer-encoding"], te.lowercased().contains("chunked") {
            var pos = bodyStart
            while true {
                guard let lineEnd = Self.find([13, 10], in: buffer, from: pos) else { return nil }
                let sizeText =
                    String(decoding: buffer[pos..<lineEnd], as: UTF8.self).split(separator: ";").first.map(String.init)
                    ?? ""
                guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16), size >= 0 else {
                    throw Self.bad("malformed chunk size")
                }
                guard body.count + size <= Self.maxBodyBytes else { throw Self.bad("response body too large") }
                let dataStart = lineEnd + 2
                if size == 0 {
                    // Trailers end with an empty line; HAP sends none.
                    guard let end = Self.find([13, 10], in: buffer, from: dataStart) else { return nil }
                    consumed = end + 2
                    break
                }
                guard buffer.count >= dataStart + size + 2 else { return nil }
                body.append(contentsOf: buffer[dataStart..<dataStart + size])
                pos = dataStart + size + 2
            }
        } else if let cl = headers["content-length"] {
            guard let length = Int(cl), length >= 0 else {
                throw Self.bad("malformed Content-Length '\(cl.prefix(20))'")
            }
            guard length <= Self.maxBodyBytes else { throw Self.bad("response body of \(length) bytes is too large") }
            guard buffer.count >= bodyStart + length else { return nil }
            body = Array(buffer[bodyStart..<bodyStart + length])
            consumed = bodyStart + length
        } else {
            // Without a length the message has no body (204, or an accessory that omits it).
            consumed = bodyStart
        }
        buffer.removeFirst(consumed)
        return HAPHTTPMessage(isEvent: isEvent, status: status, headers: headers, body: body)
    }

    static func bad(_ message: String) -> HAPError {
        HAPError(code: .badHTTP, message: "invalid HTTP from the accessory: \(message)")
    }

    static func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
        guard haystack.count >= needle.count, start <= haystack.count - needle.count else { return nil }
        var i = start
        while i <= haystack.count - needle.count {
            if haystack[i] == needle[0] {
                var match = true
                for j in 1..<needle.count where haystack[i + j] != needle[j] { match = false; break }
                if match { return i }
            }
            i += 1
        }
        return nil
    }
}

import Foundation
