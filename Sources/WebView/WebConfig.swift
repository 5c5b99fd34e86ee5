import Foundation
public import Gateway

// The config file's `web:` section: whether the gateway serves its web view, where, and the
// token that guards it. A `ConfigSection`, read by the module that serves it.

/// The web view's settings. Off by default: a gateway that nobody looks at in a browser opens
/// no port.
public struct WebConfig: ConfigSection, Hashable, CustomStringConvertible {
    public var enabled = false
    /// The address to listen on; loopback unless the file says otherwise.
    public var host = "127.0.0.1"
    public var port = 8080
    /// What a browser, `curl` or Prometheus must present (`Authorization: Bearer`, `?token=`
    /// or the page's cookie). Nil: no token, allowed only on loopback. Never logged.
    public var token: String?
    /// Connections served at once (HTTP and WebSockets together); fewer when the descriptor
    /// limit leaves less room (`WebView` keeps a reserve for the broker, HAP and state files).
    public var maxConnections = 256
    /// Seconds a connection has to send its first request head, and the largest head in bytes
    /// (431 beyond): a client that opens and says little or too much is closed, not kept.
    public var headTimeout = 10.0
    public var maxHeaderBytes = 32 * 1024
    /// Seconds a keep-alive HTTP connection may stay idle between requests, and a connection's
    /// writes may wait for its peer to read them.
    public var idleTimeout = 60.0
    /// Frames one page may have waiting to be sent: a page that falls this far behind (it does
    /// not read) is closed with 1013, and reconnects to a fresh home when it reads again.
    public var pageQueue = 256

    public init() {}

    /// `host:port` as configured, for logs and the README's address (`[::1]:8080` for IPv6).
    public var listenDisplay: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// What a log shows of it (ServiceLifecycle logs its services at debug): never the token.
    public var description: String {
        "WebConfig(enabled: \(enabled), listen: \(listenDisplay), token: \(token == nil ? "none" : "***"))"
    }

    /// Whether only this machine can reach the address: a token is then optional.
    public var isLoopback: Bool { Self.isLoopback(host) }

    /// `localhost`, an IPv4 address in 127.0.0.0/8 or `::1`, as literals: a name is looked at
    /// as a whole (`127.evil.example` and `localhost.evil` are names anyone can point anywhere,
    /// so a browser that resolves them to this machine must not pass them as loopback).
    public static func isLoopback(_ host: String) -> Bool {
        let name = host.lowercased()
        if name == "localhost" { return true }
        var v4 = in_addr()
        if inet_pton(AF_INET, name, &v4) == 1 {
            // s_addr is in network order: its first byte in memory is the first octet.
            return withUnsafeBytes(of: &v4.s_addr) { $0[0] } == 127
        }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, name, &v6) == 1 else { return false }
        return withUnsafeBytes(of: &v6) { Array($0) } == Array(repeating: 0, count: 15) + [1]
    }

    /// `host:port`, `[v6]:port`, or `:port` (loopback); nil when it is none of these.
    static func parseListen(_ text: String) -> (host: String, port: Int)? {
        let host: Substring
        let port: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                return nil
            }
            host = text[text.index(after: text.startIndex)..<close]
            port = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":"), !text[..<colon].contains(":") else { return nil }
            host = text[..<colon]
            port = text[text.index(after: colon)...]
        }
        guard let number = Int(port), (1...65535).contains(number), !host.contains(where: \.isWhitespace) else {
            return nil
        }
        return (host.isEmpty ? "127.0.0.1" : String(host), number)
    }

    /// Reads `web:` of the file's top level strictly: unknown keys are errors listing the allowed
    /// ones, and a token is required as soon as the page would be reachable from another machine.
    /// `HOMEMQTT_WEB_ENABLED` (`true`/`false`) overrides `enabled`: a demo or a container turns
    /// the page on without editing the file.
    public static func read(_ top: ConfigReader, _ context: ConfigContext) throws(ConfigError) -> Self {
        var config = WebConfig()
        if let web = try top.reader("web") {
            try config.read(web, resolve: context.resolve)
        }
        if let value = context.environment["HOMEMQTT_WEB_ENABLED"], !value.isEmpty {
            guard let enabled = ["true": true, "1": true, "false": false, "0": false][value.lowercased()] else {
                throw top.error("HOMEMQTT_WEB_ENABLED", "expected true or false, got '\(value)'")
            }
            config.enabled = enabled
        }
        // A user's token (`access:`) guards it as well as `web.token` does.
        let userTokens = (try? AccessConfig.read(top, context))?.hasTokens ?? false
        if config.enabled, config.token == nil, !userTokens, !config.isLoopback {
            throw top.error(
                "web.token",
                "required when web.listen is not a loopback address (\(config.listenDisplay)): anyone on the network could control the home; set web.token or web.token-file"
            )
        }
        return config
    }

    private mutating func read(_ web: ConfigReader, resolve: (String) -> String) throws(ConfigError) {
        var config = self
        if let enabled = try web.bool("enabled") { config.enabled = enabled }
        if let listen = try web.string("listen") {
            guard let (host, port) = Self.parseListen(listen) else {
                throw web.error(
                    "listen", "expected host:port such as 127.0.0.1:8080, 0.0.0.0:8080 or [::1]:8080, got '\(listen)'")
            }
            (config.host, config.port) = (host, port)
        }
        try config.readLimits(web)
        let inline = try web.string("token")
        let tokenFile = try web.string("token-file")
        if inline != nil, tokenFile != nil {
            throw web.error("token-file", "give token or token-file, not both")
        }
        if let inline {
            guard let token = Self.cleaned(inline) else { throw web.error("token", "must not be empty") }
            config.token = token
        }
        if let tokenFile {
            let path = resolve(tokenFile)
            guard let data = FileManager.default.contents(atPath: path),
                let token = String(data: data, encoding: .utf8).flatMap(Self.cleaned)
            else {
                throw web.error("token-file", "cannot read a token from '\(path)'")
            }
            config.token = token
        }
        try web.finish()
        self = config
    }

    /// `max-connections`, `head-timeout`, `max-header-bytes`, `idle-timeout`, `page-queue`.
    private mutating func readLimits(_ web: ConfigReader) throws(ConfigError) {
        func count(_ key: String, _ range: ClosedRange<Int>) throws(ConfigError) -> Int? {
            guard let value = try web.int(key) else { return nil }
            guard range.contains(value) else {
                throw web.error(key, .outOfRange, "must be \(range.lowerBound)…\(range.upperBound), got \(value)")
            }
            return value
        }
        func seconds(_ key: String) throws(ConfigError) -> Double? {
            guard let value = try web.positive(key) else { return nil }
            guard value <= 3600 else { throw web.error(key, .outOfRange, "must be at most 3600 seconds, got \(value)") }
            return value
        }
        if let value = try count("max-connections", 1...100_000) { maxConnections = value }
        if let value = try count("max-header-bytes", 1024...(1 << 20)) { maxHeaderBytes = value }
        if let value = try count("page-queue", 8...100_000) { pageQueue = value }
        if let value = try seconds("head-timeout") { headTimeout = value }
        if let value = try seconds("idle-timeout") { idleTimeout = value }
    }

    /// A token as written, without the newline a file ends with; nil when nothing is left.
    private static func cleaned(_ text: String) -> String? {
        let token = text.trimmingCharacters(in: .whitespacesAndNewlines)
        return token.isEmpty ? nil : token
    }
}
