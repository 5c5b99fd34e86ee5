import Foundation
import Gateway
import HTTPTypes
import HomeModel
import Hummingbird

/// A refused HTTP request: its status, and the same `code`/`message` JSON as every answer of
/// the gateway, so that a script reads a refusal the way it reads an MQTT `result`.
struct WebError: HTTPResponseError {
    var status: HTTPResponse.Status
    var code: ErrorCode
    var message: String

    static let unauthorized = WebError(
        status: .unauthorized, code: .unauthorized,
        message: "a token is needed: Authorization: Bearer <token>, ?token=<token>, or open the page and enter it")

    func response(from request: Request, context: some RequestContext) throws -> Response {
        var headers: HTTPFields = [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"]
        if status == .unauthorized { headers[.wwwAuthenticate] = "Bearer" }
        let body = JSONValue.object([
            "status": "error", "code": .string(code.rawValue), "message": .string(message),
        ]).encoded()
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: body)))
    }
}

/// Who may use the web view: the token (when one is configured) from the `Authorization`
/// header, the `token` query parameter (a WebSocket from a script) or the page's cookie; and,
/// for a browser, only pages of this same site.
///
/// Without a token the web view answers only requests that name it by a loopback literal
/// (`localhost`, 127.0.0.0/8, `::1`, with any port): a DNS rebinding attack points a name of
/// the attacker's (`127.evil.example`) at 127.0.0.1, and the browser then sends that name as
/// `Host` — every route refuses it, so a page at such a name neither reads nor changes the home.
struct WebAccess: Sendable {
    /// The cookie the page gets after its token was entered once.
    static let cookieName = "homemqtt-token"

    /// `web.token`: an administrator's.
    let token: String?
    /// `access:`: each user's token (as its hash) and role per home.
    var users = AccessConfig()
    /// The home this web view serves, for the users' roles in it.
    var home: @Sendable () async -> Home? = { nil }
    /// Every home, for whether a user administers them all.
    var homes: @Sendable () async -> [Home] = { [] }
    var gatewayBase = "home"

    /// What a request may do: its role in the home and, for a guest, what it may control.
    struct Grant: Sendable {
        var role: HomeRole
        var guestControl: [String] = []
        /// An administrator of every home: may change the list of homes.
        var ownsEveryHome = false
        static let administrator = Grant(role: .administrator, ownsEveryHome: true)

        func mayPublish(_ topic: String, base: String) -> Bool {
            AccessPolicy.mayPublish(
                topic, base: base, role: role, guestControl: guestControl, ownsEveryHome: ownsEveryHome)
        }
    }

    private var needsToken: Bool { token != nil || users.hasTokens }

    /// Refuses a request that may not use the web view: a `Host` that is not a loopback literal
    /// while no token is configured; then, unless `needsToken` is false (the page and its files,
    /// which hold nothing of the home), a request without a token that has a role in the home.
    /// Returns what it may do.
    @discardableResult
    func check(_ request: Request, needsToken: Bool = true) async throws(WebError) -> Grant {
        guard self.needsToken else {
            let host = request.head.authority ?? ""
            guard Self.isLocalHost(host) else {
                throw WebError(
                    status: .forbidden, code: .forbiddenOrigin,
                    message:
                        "the web view without a token answers only to localhost, 127.0.0.0/8 and [::1], not '\(host)'")
            }
            return .administrator
        }
        guard needsToken else { return Grant(role: .guest) }
        guard let presented = Self.presentedToken(request) else { throw WebError.unauthorized }
        return try await grant(for: presented)
    }

    /// The grant of a token: `web.token`'s is an administrator's; an `access:` user's is their
    /// role in this home (refused when they have none).
    func grant(for presented: String) async throws(WebError) -> Grant {
        if let token, Self.same(presented, token) { return .administrator }
        guard let user = users.user(presenting: presented) else { throw WebError.unauthorized }
        guard let home = await home(), let role = user.role(in: home, gatewayBase: gatewayBase) else {
            throw WebError(
                status: .forbidden, code: .insufficientPrivileges,
                message: "this token has no role in the home this web view serves")
        }
        let owns = await homes().allSatisfy { user.role(in: $0, gatewayBase: gatewayBase) == .administrator }
        return Grant(role: role, guestControl: user.guestControl, ownsEveryHome: owns)
    }

    /// Refuses a request that needs an administrator.
    static func require(_ role: HomeRole, _ grant: Grant, for what: String) throws(WebError) {
        guard grant.role >= role else {
            throw WebError(
                status: .forbidden, code: .insufficientPrivileges,
                message: "\(what) needs the \(role.rawValue) role; this token is a \(grant.role.rawValue)'s")
        }
    }

    /// Whether `candidate` is a token with a role here (true when none is configured).
    func accepts(_ candidate: String) async -> Bool {
        guard needsToken else { return true }
        return (try? await grant(for: candidate)) != nil
    }

    /// The token a request carries, from the header, the query or the cookie, in that order.
    static func presentedToken(_ request: Request) -> String? {
        if let header = request.headers[.authorization], header.lowercased().hasPrefix("bearer ") {
            return String(header.dropFirst("bearer ".count)).trimmingCharacters(in: .whitespaces)
        }
        if let query = request.uri.queryParameters["token"] { return String(query) }
        if let cookie = request.cookies[cookieName]?.value { return cookie.removingPercentEncoding }
        return nil
    }

    /// The cookie that carries `token` (percent-encoded: a token may hold characters a cookie
    /// may not).
    static func cookie(for token: String) -> Cookie {
        let value = token.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        return Cookie(
            name: cookieName, value: value, maxAge: 365 * 24 * 3600, path: "/", httpOnly: true, sameSite: .strict)
    }

    /// Compares in time that does not depend on where the strings differ, so that the token
    /// cannot be guessed a character at a time from response times.
    static func same(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8)
        let y = Array(b.utf8)
        var difference = UInt8(x.count == y.count ? 0 : 1)
        for index in 0..<max(x.count, y.count) {
            difference |= (index < x.count ? x[index] : 0) ^ (index < y.count ? y[index] : 0)
        }
        return difference == 0
    }

    /// Why a WebSocket upgrade is refused from its head alone (`ConnectionGuard`, before the
    /// WebSocket library, which would answer any refusal with a bare 400): a `Host` refused as
    /// `check` refuses it, no token or one that is nobody's (401, the body every route gives),
    /// a page of another site. Nil lets the router decide the rest (a user's role in the home
    /// needs the home).
    func refusal(upgrade head: HeadScanner) -> WebError? {
        let host = head.fields["host"]?.first ?? ""
        if !needsToken, !Self.isLocalHost(host) {
            return WebError(
                status: .forbidden, code: .forbiddenOrigin,
                message: "the web view without a token answers only to localhost, 127.0.0.0/8 and [::1], not '\(host)'")
        }
        if needsToken {
            var presented: String?
            if let header = head.fields["authorization"]?.first, header.lowercased().hasPrefix("bearer ") {
                presented = String(header.dropFirst("bearer ".count)).trimmingCharacters(in: .whitespaces)
            } else if let query = head.query("token") {
                presented = query
            } else if let cookie = head.cookie(Self.cookieName) {
                presented = cookie.removingPercentEncoding
            }
            guard let presented else { return .unauthorized }
            let isAdministrator = token.map { Self.same(presented, $0) } ?? false
            if !isAdministrator, users.user(presenting: presented) == nil { return .unauthorized }
        }
        do {
            try checkSite(host: host, origins: head.fields["origin"] ?? [])
        } catch {
            return error
        }
        return nil
    }

    /// Refuses what a page of another site makes a browser send: a WebSocket or a request that
    /// changes something, whose `Origin` is not this server (with `check`, which refuses a
    /// foreign `Host`, this is what stops a web page the user visits from controlling the home
    /// through 127.0.0.1). Clients that are not browsers send no `Origin`.
    func checkSite(_ request: Request) throws(WebError) {
        try checkSite(host: request.head.authority ?? "", origins: request.headers[values: .origin])
    }

    func checkSite(host: String, origins: [String]) throws(WebError) {
        let allowed = ["http://\(host.lowercased())", "https://\(host.lowercased())"]
        for origin in origins {
            let lower = origin.lowercased()
            // A browser names the page's origin, http(s), or `null`; only other clients (a script's
            // WebSocket library) say ws:// or wss://, and no page can make a browser say it.
            if lower.hasPrefix("ws://") || lower.hasPrefix("wss://") { continue }
            guard allowed.contains(lower) else {
                throw WebError(
                    status: .forbidden, code: .forbiddenOrigin,
                    message: "a page of another site (\(origin)) may not use this web view")
            }
        }
    }

    /// `127.0.0.1:8080`, `localhost:8080`, `[::1]:8080` and the like: a `Host` header's name
    /// without its port, a loopback literal (`WebConfig.isLoopback`). A bare `::1` without
    /// brackets is not a valid `Host` and is refused.
    static func isLocalHost(_ authority: String) -> Bool {
        var host = Substring(authority)
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return false }
            let rest = host[host.index(after: close)...]
            guard rest.isEmpty || (rest.hasPrefix(":") && isPort(rest.dropFirst())) else {
                return false
            }
            host = host[host.index(after: host.startIndex)..<close]
            return host.contains(":") && WebConfig.isLoopback(String(host))
        }
        if let colon = host.firstIndex(of: ":") {
            guard isPort(host[host.index(after: colon)...]) else { return false }
            host = host[..<colon]
        }
        return !host.contains(":") && WebConfig.isLoopback(String(host))
    }

    private static func isPort(_ text: Substring) -> Bool {
        !text.isEmpty && text.count <= 5 && text.allSatisfy { ("0"..."9").contains($0) }
    }
}
