public import Gateway
import HomeModel
import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
public import Logging
import NIOCore
public import ServiceLifecycle

/// The gateway's web view as a service of the gateway's group: the page, its live feed, the
/// request API, `/metrics` and `/healthz` on `web.listen`. It stops with the group (before the
/// gateway: the group stops services in reverse), and every open page reconnects by itself to
/// the next run.
public struct WebView: Service, CustomStringConvertible {
    let gateway: Gateway
    let config: WebConfig
    /// The users' tokens and roles (`access:`).
    let access: AccessConfig
    let metrics: WebMetrics
    let logger: Logger
    let onListening: @Sendable (Int) async -> Void
    let homeKitSetup: @Sendable () async -> HomeKitSetup?
    let hub: LiveHub

    /// - Parameters:
    ///   - metrics: the process's exporter; `WebMetrics.shared` must exist before `gateway` is
    ///     made, so that the gateway's counters are exported.
    ///   - onListening: called with the port once the server listens (port 0 picks a free one).
    ///   - homeKitSetup: the setup of the served home's HomeKit bridge, nil while it has none
    ///     running (the composition root reads it from the bridge: WebView does not import it).
    public init(
        gateway: Gateway, config: WebConfig, access: AccessConfig = AccessConfig(), metrics: WebMetrics = .shared,
        logger: Logger, onListening: @escaping @Sendable (Int) async -> Void = { _ in },
        homeKitSetup: @escaping @Sendable () async -> HomeKitSetup? = { nil }
    ) {
        self.gateway = gateway
        self.config = config
        self.access = access
        self.metrics = metrics
        self.logger = logger
        self.onListening = onListening
        self.homeKitSetup = homeKitSetup
        self.hub = LiveHub(gateway: gateway, pageQueue: config.pageQueue)
    }

    /// What ServiceLifecycle logs of the service: where it listens, never its token.
    public var description: String { "WebView(http://\(config.listenDisplay)/)" }

    public func run() async throws {
        let app = await application()
        let hub = hub
        try await withThrowingDiscardingTaskGroup { group in
            // The hub lets every page go as shutdown begins, so the server has no open socket to wait for.
            group.addTask { await cancelWhenGracefulShutdown { await hub.run() } }
            try await app.run()
            group.cancelAll()
        }
    }

    /// The HTTP application `run` serves: the routes, behind the connection guard, on
    /// `web.listen`. `hub` must run beside it. The tests run it with HummingbirdTesting.
    func application() async -> some ApplicationProtocol {
        let base = await gateway.config.baseTopic
        let limiter = ConnectionLimiter(cap: config.maxConnections)
        let gateway = gateway
        let webAccess = WebAccess(
            token: config.token, users: access, home: { await gateway.servedHome() },
            homes: { await gateway.allHomes() },
            gatewayBase: await gateway.config.gatewayBase)
        let routes = WebRoutes(
            hub: hub, requests: PageRequests(gateway: gateway, base: base), access: webAccess,
            metrics: metrics, limiter: limiter, homeKitSetup: homeKitSetup, logger: logger)
        let router = routes.router()
        // Hummingbird's own lines (started, shutting down) only at warning: ours says where.
        var serverLogger = logger
        serverLogger.logLevel = max(logger.logLevel, .warning)
        let config = config
        let logger = logger
        let onListening = onListening
        return Application(
            router: router,
            server: Self.server(
                router: router, config: config, limiter: limiter, refusals: RefusalLog(logger: logger),
                upgradeCheck: { head in webAccess.refusal(upgrade: head) }),
            configuration: .init(address: .hostname(config.host, port: config.port), serverName: "homemqtt"),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? config.port
                var shown = config
                shown.port = port
                let fitted = limiter.fitToDescriptorLimit(configured: config.maxConnections)
                logger.info(
                    "web view listening",
                    metadata: [
                        "address": "http://\(shown.listenDisplay)/",
                        "token": "\(config.token == nil ? "none" : "required")",
                        "connections": "\(fitted.cap)",
                    ])
                if fitted.cap < config.maxConnections {
                    logger.warning(
                        "web view serves fewer connections than web.max-connections: the descriptor limit leaves no more",
                        metadata: [
                            "connections": "\(fitted.cap)", "max-connections": "\(config.maxConnections)",
                            "descriptor-limit": "\(fitted.limit)", "open": "\(fitted.open)",
                            "reserved": "\(ConnectionLimiter.reserve)",
                        ])
                }
                await onListening(port)
            },
            logger: serverLogger)
    }

    /// HTTP/1 with the WebSocket upgrade, every connection behind a `ConnectionGuard`; the HTTP
    /// decoder bounds later heads of a keep-alive connection as the guard bounds the first.
    static func server(
        router: Router<WebRoutes.Context>, config: WebConfig, limiter: ConnectionLimiter, refusals: RefusalLog,
        upgradeCheck: @escaping ConnectionGuard.UpgradeCheck
    ) -> HTTPServerBuilder {
        let responder = router.buildResponder()
        let limits = ConnectionGuard.Limits(
            headTimeout: .nanoseconds(Int64(config.headTimeout * 1e9)), maxHeaderBytes: config.maxHeaderBytes,
            stallTimeout: .nanoseconds(Int64(config.idleTimeout * 1e9)), maxBodyBytes: PageSession.maxMessageSize)
        let headers = config.maxHeaderBytes
        let configuration = HTTP1WebSocketUpgradeChannel.Configuration(
            http1: .init(
                idleTimeout: .nanoseconds(Int64(config.idleTimeout * 1e9)),
                httpDecoderConfiguration: .init(maxHeaderFieldSize: headers, maxHeaderListSize: headers)),
            ws: .init(
                maxFrameSize: PageSession.maxMessageSize, autoPing: .enabled(timePeriod: .seconds(30)),
                validateUTF8: true))
        return HTTPServerBuilder { httpResponder in
            GuardedChildChannel(
                base: HTTP1WebSocketUpgradeChannel(
                    responder: httpResponder, webSocketResponder: responder, configuration: configuration),
                limiter: limiter, limits: limits, refusals: refusals, upgradeCheck: upgradeCheck)
        }
    }
}
