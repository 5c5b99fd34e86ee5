import Foundation
public import HomeModel
import TestSupport

/// An HTTP exchange through `curl`: status, headers (names lowercased) and body, exactly as on
/// the wire, redirects not followed.
public struct HTTPResult: Sendable {
    public var status: Int
    public var headers: [String: String]
    public var body: String

    public var json: JSONValue? { try? JSONValue(parsing: Array(body.utf8)) }
}

public enum HTTP {
    public static func get(_ url: String, headers: [String: String] = [:]) async throws -> HTTPResult {
        try await request("GET", url, headers: headers)
    }

    public static func request(
        _ method: String, _ url: String, headers: [String: String] = [:], body: String? = nil
    ) async throws -> HTTPResult {
        let files = try TemporaryDirectory(prefix: "homemqtt-curl")
        var arguments = [
            "-s", "-S", "-X", method, "--max-time", "20", "-o", files.file("body"), "-D", files.file("headers"),
            "-w", "%{http_code}",
        ]
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) { arguments += ["-H", "\(name): \(value)"] }
        if let body {
            try body.write(toFile: files.file("request"), atomically: true, encoding: .utf8)
            arguments += ["--data-binary", "@" + files.file("request")]
        }
        arguments.append(url)
        let result = try await runProcess("curl", arguments, timeout: 30)
        guard let status = Int(result.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)), status > 0
        else {
            throw ProcessError("curl \(method) \(url) failed: \(result.standardError)")
        }
        var headerFields: [String: String] = [:]
        let rawHeaders = (try? String(contentsOfFile: files.file("headers"), encoding: .utf8)) ?? ""
        for line in rawHeaders.split(separator: "\r\n").dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            headerFields[name] = headerFields[name].map { $0 + "\n" + value } ?? value
        }
        let text = (try? String(contentsOfFile: files.file("body"), encoding: .utf8)) ?? ""
        return HTTPResult(status: status, headers: headerFields, body: text)
    }
}

extension JSONValue {
    /// `self["a"]?["b"]` as a path: `value(at: "a", "b")`.
    public func value(at path: String...) -> JSONValue? {
        var current: JSONValue? = self
        for key in path { current = current?[key] }
        return current
    }
}
