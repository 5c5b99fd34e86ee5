// HTTP as a HAP accessory reads and writes it: requests with a Content-Length body (controllers
// send nothing else), responses and EVENT/1.0 messages with a reason phrase and a length.

/// One request from a controller.
struct HAPRequest: Sendable, Equatable {
    var method: String
    /// The path without the query.
    var path: String
    var query: [(String, String)]
    var headers: [String: String]
    var body: [UInt8]

    static func == (a: Self, b: Self) -> Bool {
        a.method == b.method && a.path == b.path && a.query.elementsEqual(b.query, by: ==) && a.headers == b.headers
            && a.body == b.body
    }

    func queryValue(_ name: String) -> String? { query.first { $0.0 == name }?.1 }
}

/// Why a request could not be read: the connection gets a 400 and is closed.
struct HTTPRequestError: Error, Equatable {
    var message: String
}

/// Incremental request parser with bounded sizes.
struct HTTPRequestParser: Sendable {
    static let maxHeaderBytes = 8 * 1024
    static let maxBodyBytes = 1024 * 1024
    private(set) var buffer: [UInt8] = []

    mutating func feed(_ bytes: some Sequence<UInt8>) { buffer.append(contentsOf: bytes) }

    /// Bytes received and not yet part of a request (the start of the encrypted session after
    /// pair-verify's last request, when they come in the same read).
    mutating func takeRemainder() -> [UInt8] {
        defer { buffer = [] }
        return buffer
    }

    /// The next complete request, nil if more bytes are needed.
    ///
    /// Read as bytes (CRLF, space and colon are ASCII), not as `String` characters: splitting the
    /// head into grapheme clusters was a quarter of the instructions of a whole read.
    mutating func next() throws(HTTPRequestError) -> HAPRequest? {
        guard let headerEnd = Self.find([13, 10, 13, 10], in: buffer) else {
            if buffer.count > Self.maxHeaderBytes {
                throw HTTPRequestError(message: "request header longer than \(Self.maxHeaderBytes) bytes")
            }
            return nil
        }
        guard headerEnd <= Self.maxHeaderBytes else {
            throw HTTPRequestError(message: "request header longer than \(Self.maxHeaderBytes) bytes")
        }
        let head = buffer[0..<headerEnd]
        guard String(validating: head, as: UTF8.self) != nil else {
            throw HTTPRequestError(message: "request header is not UTF-8")
        }
        var lines = Self.lines(head)
        let parts = lines.removeFirst().split(separator: 32, omittingEmptySubsequences: false)
        // The method in upper-case ASCII letters, checked as bytes.
        guard parts.count == 3, !parts[0].isEmpty, parts[0].allSatisfy({ $0 >= 65 && $0 <= 90 }) else {
            throw HTTPRequestError(message: "malformed request line")
        }
        let requestLine = parts.map { String(decoding: $0, as: UTF8.self) }
        guard requestLine[2].hasPrefix("HTTP/1."), requestLine[1].hasPrefix("/") else {
            throw HTTPRequestError(message: "malformed request line")
        }
        var headers: [String: String] = [:]
        for line in lines where !line.isEmpty {
            guard let colon = line.firstIndex(of: 58) else { throw HTTPRequestError(message: "malformed header line") }
            let name = Self.lowercased(Self.trimmingSpaces(line[..<colon]))
            guard !name.isEmpty else { throw HTTPRequestError(message: "malformed header line") }
            headers[name] = String(decoding: Self.trimmingSpaces(line[(colon + 1)...]), as: UTF8.self)
        }
        if headers["transfer-encoding"] != nil {
            throw HTTPRequestError(message: "chunked request bodies are not supported")
        }
        var length = 0
        if let text = headers["content-length"] {
            guard let n = Int(text), n >= 0, text.allSatisfy(\.isNumber) else {
                throw HTTPRequestError(message: "malformed Content-Length")
            }
            guard n <= Self.maxBodyBytes else { throw HTTPRequestError(message: "request body of \(n) bytes") }
            length = n
        }
        let bodyStart = headerEnd + 4
        guard buffer.count >= bodyStart + length else { return nil }
        let body = Array(buffer[bodyStart..<bodyStart + length])
        buffer.removeFirst(bodyStart + length)
        let (path, query) = Self.split(requestLine[1])
        return HAPRequest(method: requestLine[0], path: path, query: query, headers: headers, body: body)
    }

    /// The head's lines, split at each CRLF.
    static func lines(_ head: ArraySlice<UInt8>) -> [ArraySlice<UInt8>] {
        var lines: [ArraySlice<UInt8>] = []
        var start = head.startIndex
        var i = head.startIndex
        while i + 1 < head.endIndex {
            if head[i] == 13 && head[i + 1] == 10 {
                lines.append(head[start..<i])
                i += 2
                start = i
            } else {
                i += 1
            }
        }
        lines.append(head[start...])
        return lines
    }

    /// Without the spaces and tabs at either end.
    static func trimmingSpaces(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var s = bytes
        while let f = s.first, f == 32 || f == 9 { s.removeFirst() }
        while let l = s.last, l == 32 || l == 9 { s.removeLast() }
        return s
    }

    /// A header name in lower case: ASCII by bytes, anything else as `String` lowercases it.
    static func lowercased(_ bytes: ArraySlice<UInt8>) -> String {
        guard bytes.allSatisfy({ $0 < 128 }) else { return String(decoding: bytes, as: UTF8.self).lowercased() }
        return String(decoding: bytes.map { $0 >= 65 && $0 <= 90 ? $0 + 32 : $0 }, as: UTF8.self)
    }

    /// The path and the query's pairs, split at `?`, `&` and `=` as bytes (as HTTP has them;
    /// splitting `String` characters cost a read 12 k instructions).
    static func split(_ target: String) -> (String, [(String, String)]) {
        let bytes = Array(target.utf8)
        guard let mark = bytes.firstIndex(of: UInt8(ascii: "?")) else { return (target, []) }
        func text(_ slice: ArraySlice<UInt8>) -> String { String(decoding: slice, as: UTF8.self) }
        let pairs = bytes[(mark + 1)...].split(separator: UInt8(ascii: "&")).map { item -> (String, String) in
            guard let eq = item.firstIndex(of: UInt8(ascii: "=")) else { return (text(item), "") }
            return (text(item[..<eq]), text(item[(eq + 1)...]))
        }
        return (text(bytes[..<mark]), pairs)
    }

    static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        return haystack.withUnsafeBufferPointer { hay in
            needle.withUnsafeBufferPointer { wanted in
                for i in 0...(hay.count - wanted.count) where hay[i] == wanted[0] {
                    var j = 1
                    while j < wanted.count && hay[i + j] == wanted[j] { j += 1 }
                    if j == wanted.count { return i }
                }
                return nil
            }
        }
    }
}

/// One response (or event) to write.
struct HAPResponse: Sendable, Equatable {
    var status: Int
    var contentType: String?
    var body: [UInt8]

    static let json = "application/hap+json"
    static let tlv8 = "application/pairing+tlv8"

    static func tlv(_ tlv: TLV8Bytes) -> HAPResponse { HAPResponse(status: 200, contentType: Self.tlv8, body: tlv) }
    static func json(_ status: Int, _ body: [UInt8]) -> HAPResponse {
        HAPResponse(status: status, contentType: Self.json, body: body)
    }
    static let noContent = HAPResponse(status: 204, contentType: nil, body: [])

    /// `{"status": code}` with an HTTP status, as HAP answers a request it refuses whole.
    static func status(_ http: Int, _ hap: HAPStatus) -> HAPResponse {
        json(http, Array("{\"status\":\(hap.rawValue)}".utf8))
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 204: "No Content"
        case 207: "Multi-Status"
        case 400: "Bad Request"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 422: "Unprocessable Entity"
        case 470: "Connection Authorization Required"
        case 500: "Internal Server Error"
        case 503: "Service Unavailable"
        default: "Status"
        }
    }

    /// The message's bytes; `event` writes `EVENT/1.0` in place of `HTTP/1.1`.
    /// Written as bytes into one array of the right size: no `String` interpolation per response.
    func encoded(event: Bool = false) -> [UInt8] {
        let reason = Self.reason(status)
        var out: [UInt8] = []
        out.reserveCapacity(64 + reason.utf8.count + (contentType?.utf8.count ?? 0) + body.count)
        out.append(contentsOf: (event ? "EVENT/1.0 " : "HTTP/1.1 ").utf8)
        out.append(contentsOf: String(status).utf8)
        out.append(32)
        out.append(contentsOf: reason.utf8)
        out.append(contentsOf: [13, 10])
        if let contentType {
            out.append(contentsOf: "Content-Type: ".utf8)
            out.append(contentsOf: contentType.utf8)
            out.append(contentsOf: [13, 10])
        }
        out.append(contentsOf: "Content-Length: ".utf8)
        out.append(contentsOf: String(body.count).utf8)
        out.append(contentsOf: [13, 10, 13, 10])
        out.append(contentsOf: body)
        return out
    }
}

typealias TLV8Bytes = [UInt8]
