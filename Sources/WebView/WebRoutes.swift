import Foundation
import Gateway
import HTTPTypes
import HomeModel
import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOCore

/// Every path the web view serves:
/// - `/` — the page (`?token=` once: it is kept in a cookie and the address cleaned);
///   `/assets/<file>` — its scripts and style, from the binary;
/// - `/ws` — the live feed (`PageSession`);
/// - `/api/home` — the home document the feed starts with; `/api/request` (POST) — a request
///   as the page sends it; `/api/pairings` — the HAP pairings; `/api/session` — whether the
///   token is accepted; `/api/homekit/setup` and `/api/homekit/setup.svg` — the HomeKit
///   bridge's setup code, URI and QR code, for an administrator only;
/// - `/metrics` — Prometheus; `/healthz` — for systemd or Docker, without a token.
struct WebRoutes: Sendable {
    typealias Context = PageContext

    let hub: LiveHub
    let requests: PageRequests
    let access: WebAccess
    let metrics: WebMetrics
    let limiter: ConnectionLimiter
    var homeKitSetup: @Sendable () async -> HomeKitSetup? = { nil }
    let logger: Logger

    func router() -> Router<Context> {
        // HEAD on every GET route: the same status and headers, no body (RFC 9110 §9.3.2).
        let router = Router(context: Context.self, options: .autoGenerateHeadEndpoints)
        router.get("/") { request, _ in try await page(request) }
        router.get("/index.html") { request, _ in try await page(request) }
        router.get("/assets/:name") { request, context in
            try await asset(context.parameters.get("name") ?? "", request)
        }
        router.get("/favicon.ico") { request, _ in try await asset("favicon.svg", request) }
        // Open to any Host and without a token: a supervisor's liveness probe. It says whether
        // the gateway runs and reaches the broker, nothing of the home, and changes nothing.
        router.get("/healthz") { _, _ in await health() }
        router.get("/metrics") { request, _ in
            try await access.check(request)
            let text = await metrics.render(hub: hub, limiter: limiter)
            return Self.response(
                .ok, ByteBuffer(bytes: text), type: "text/plain; version=0.0.4; charset=utf-8")
        }
        router.get("/api/session") { request, _ in
            let grant = try await access.check(request)
            return Self.json(
                .object(["status": "ok", "base": .string(requests.base), "role": .string(grant.role.rawValue)]))
        }
        router.get("/api/home") { request, _ in
            try await access.check(request)
            guard let home = await hub.currentHome() else {
                throw WebError(
                    status: .serviceUnavailable, code: .unreachable, message: "the gateway has not loaded the home yet")
            }
            return Self.response(.ok, ByteBuffer(string: home), type: "application/json; charset=utf-8")
        }
        router.post("/api/request") { request, context in
            let grant = try await access.check(request)
            try access.checkSite(request)
            // A body over the limit is refused as the guard refuses a connection's first one,
            // here for a later request of a keep-alive connection (or a chunked body).
            let tooLarge = WebError(
                status: .contentTooLarge, code: .tooLarge,
                message: "the request body may be \(PageSession.maxMessageSize) bytes at most")
            if let declared = request.headers[.contentLength].flatMap({ Int($0) }),
                declared > PageSession.maxMessageSize
            {
                throw tooLarge
            }
            var request = request
            let body: ByteBuffer
            do {
                body = try await request.collectBody(upTo: PageSession.maxMessageSize)
            } catch let error as HTTPError where error.status == .contentTooLarge {
                throw tooLarge
            }
            let (id, answer) = await requests.answer(Array(buffer: body), grant: grant)
            return Self.json(.object(["id": id, "answer": answer]))
        }
        router.get("/api/pairings") { request, _ in
            try WebAccess.require(.administrator, try await access.check(request), for: "the pairings")
            // The gateway's `pairings` operation, performed on the typed API; without a HAP
            // source it has none.
            let gateway = requests.gateway
            guard let pairings = try? ManagementOperations.make("pairings", fields: [:], among: gateway.operations),
                case .success(.data(let data)) = await gateway.perform(.manage(pairings))
            else {
                return Self.json(.object(["pairings": .array([]), "hap": false]))
            }
            return Self.json(.object(["pairings": data["pairings"] ?? .array([]), "hap": true]))
        }
        router.get("/api/homekit/setup") { request, _ in
            let setup = try await bridgeSetup(request)
            return Self.json(.object(["status": "ok", "code": .string(setup.code), "uri": .string(setup.uri)]))
        }
        router.get("/api/homekit/setup.svg") { request, _ in
            try await bridgeSetup(request).svgResponse()
        }
        router.ws("/ws") { request, _ in
            try await access.check(request)
            try access.checkSite(request)
            return .upgrade([:])
        } onUpgrade: { inbound, outbound, context in
            // Checked again for the grant itself: the upgrade's answer cannot carry it along.
            let grant = (try? await access.check(context.request)) ?? WebAccess.Grant(role: .guest)
            try await PageSession(
                hub: hub, requests: requests, grant: grant, channel: context.requestContext.channel, logger: logger
            )
            .run(inbound: inbound, outbound: outbound)
        }
        return router
    }

    /// The served home's bridge setup, for an administrator: the setup code pairs a controller
    /// with every accessory of the bridge, which is more than a member may do (the gateway's
    /// pairing requests are an administrator's too); a guest or member gets a 403.
    private func bridgeSetup(_ request: Request) async throws -> HomeKitSetup {
        try WebAccess.require(.administrator, try await access.check(request), for: "the HomeKit setup code")
        guard let setup = await homeKitSetup() else {
            throw WebError(
                status: .notFound, code: .unavailable,
                message: "this home has no HomeKit bridge running; set homekit.enabled: true in the config")
        }
        return setup
    }

    /// The page; with a right `?token=` the token goes to a cookie and the browser is sent to
    /// the address without it (out of the history and the address bar).
    private func page(_ request: Request) async throws -> Response {
        try await access.check(request, needsToken: false)
        if let token = request.uri.queryParameters["token"].map(String.init) {
            var response = Response.redirect(to: "/", type: .found)
            if await access.accepts(token) {
                response.setCookie(WebAccess.cookie(for: token))
            } else {
                response = Response.redirect(to: "/#token-refused", type: .found)
            }
            response.headers[.cacheControl] = "no-store"
            return response
        }
        return try await asset("index.html", request)
    }

    private func asset(_ name: String, _ request: Request) async throws -> Response {
        try await access.check(request, needsToken: false)
        guard let asset = WebAssets.named(name) else {
            throw WebError(status: .notFound, code: .notFound, message: "no asset '\(name)'")
        }
        if request.headers[.ifNoneMatch] == asset.etag {
            return Response(status: .notModified, headers: [.eTag: asset.etag])
        }
        var response = Self.response(.ok, ByteBuffer(string: asset.text), type: WebAssets.contentType(name))
        response.headers[.eTag] = asset.etag
        // Revalidated on every load (a 304 when unchanged): an upgraded binary's page is seen at once.
        response.headers[.cacheControl] = "no-cache"
        // No script, style or connection from anywhere but here: the page works offline and
        // nothing injected into it can call out.
        response.headers[.contentSecurityPolicy] =
            "default-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'"
        response.headers[.xContentTypeOptions] = "nosniff"
        return response
    }

    /// 200 while the gateway is observed and connected to the broker; 503 otherwise, with why.
    private func health() async -> Response {
        let observing = await hub.isObserving
        let connected = await hub.isConnected
        let healthy = observing && connected
        let body: JSONValue = .object([
            "status": .string(healthy ? "ok" : "unavailable"),
            "gateway": .string(observing ? "running" : "starting or stopped"),
            "broker": .string(connected ? "connected" : "disconnected"),
        ])
        var response = Self.json(body)
        response.status = healthy ? .ok : .serviceUnavailable
        return response
    }

    static func json(_ value: JSONValue) -> Response {
        response(.ok, ByteBuffer(string: value.encoded()), type: "application/json; charset=utf-8")
    }

    static func response(_ status: HTTPResponse.Status, _ body: ByteBuffer, type: String) -> Response {
        Response(
            status: status, headers: [.contentType: type, .cacheControl: "no-store"], body: .init(byteBuffer: body))
    }
}

/// Hummingbird's WebSocket request context, keeping the connection's channel: a page that
/// overflows is closed through it.
struct PageContext: RequestContext, WebSocketRequestContext {
    var coreContext: CoreRequestContextStorage
    let webSocket: WebSocketHandlerReference<Self>
    let channel: any Channel

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        webSocket = .init()
        channel = source.channel
    }
}

extension HTTPField.Name {
    static let xContentTypeOptions = HTTPField.Name("X-Content-Type-Options")!
}
