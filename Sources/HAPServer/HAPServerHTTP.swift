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
        guard let head = String(validating: buffer[0..<headerEnd], as: UTF8.self) else {
            throw HTTPRequestError(message: "request header is not UTF-8")
        }
        var lines = head.split(separator: "\r\n", omittingEmptySubsequences: false).map(String.init)
        let requestLine = lines.removeFirst().split(separator: " ", omittingEmptySubsequences: false)
        guard requestLine.count == 3, requestLine[2].hasPrefix("HTTP/1."),
            !requestLine[0].isEmpty, requestLine[0].allSatisfy({ $0.isASCII && $0.isUppercase }),
            requestLine[1].hasPrefix("/")
        else { throw HTTPRequestError(message: "malformed request line") }
        var headers: [String: String] = [:]
        for line in lines where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":") else { throw HTTPRequestError(message: "malformed header line") }
            let name = line[..<colon].trimmingSpaces.lowercased()
            guard !name.isEmpty else { throw HTTPRequestError(message: "malformed header line") }
            headers[name] = String(line[line.index(after: colon)...].trimmingSpaces)
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
        let target = String(requestLine[1])
        let (path, query) = Self.split(target)
        return HAPRequest(method: String(requestLine[0]), path: path, query: query, headers: headers, body: body)
    }

    static func split(_ target: String) -> (String, [(String, String)]) {
        guard let mark = target.firstIndex(of: "?") else { return (target, []) }
        let pairs = target[target.index(after: mark)...].split(separator: "&").map { item -> (String, String) in
            guard let eq = item.firstIndex(of: "=") else { return (String(item), "") }
            return (String(item[..<eq]), String(item[item.index(after: eq)...]))
        }
        return (String(target[..<mark]), pairs)
    }

    static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for i in 0...(haystack.count - needle.count) where haystack[i] == needle[0] {
            if haystack[i..<i + needle.count].elementsEqual(needle) { return i }
        }
        return nil
    }
}

extension Substring {
    var trimmingSpaces: Substring {
        var s = self
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return s
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
    func encoded(event: Bool = false) -> [UInt8] {
        var head = "\(event ? "EVENT/1.0" : "HTTP/1.1") \(status) \(Self.reason(status))\r\n"
        if let contentType { head += "Content-Type: \(contentType)\r\n" }
        head += "Content-Length: \(body.count)\r\n\r\n"
        return Array(head.utf8) + body
    }
}

typealias TLV8Bytes = [UInt8]
