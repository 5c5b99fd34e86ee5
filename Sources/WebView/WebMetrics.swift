public import Metrics
public import Prometheus

/// `/metrics`: every swift-metrics counter and timer of the process (the gateway's
/// `GatewayActivity`) in the Prometheus text format, plus the web view's own gauges, read
/// from the live home when scraped.
public final class WebMetrics: Sendable {
    public let registry: PrometheusCollectorRegistry
    private let accessories: Prometheus.Gauge
    private let reachable: Prometheus.Gauge
    private let connected: Prometheus.Gauge
    private let pages: Prometheus.Gauge
    private let connections: Prometheus.Gauge
    private let connectionCap: Prometheus.Gauge
    private let refused: Prometheus.Gauge
    private let replaced: Prometheus.Gauge

    /// The process's one exporter. swift-metrics takes one factory per process, and the
    /// gateway makes its metric handles from it when it is created: touch this before making
    /// the gateway (`homemqtt run` does when `web.enabled`).
    public static let shared = WebMetrics(bootstrap: true)

    /// An exporter of its own, not the process's: give `factory` to one gateway
    /// (`HomeMQTTApp.Options.metrics`) and this web view's `/metrics` counts that gateway alone,
    /// whatever else runs in the process (the in-process tests).
    public static func separate() -> WebMetrics { WebMetrics(bootstrap: false) }

    /// What makes the counters this exporter exports.
    public let factory: PrometheusMetricsFactory

    private init(bootstrap: Bool) {
        let registry = PrometheusCollectorRegistry()
        self.registry = registry
        var factory = PrometheusMetricsFactory(registry: registry)
        // Requests to accessories take from under a millisecond (a simulated one) to seconds
        // (a HAP accessory on a busy network): buckets from 0.5 ms to 10 s.
        factory.defaultDurationHistogramBuckets = [
            .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10),
            .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500),
            .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10),
        ]
        self.factory = factory
        if bootstrap { MetricsSystem.bootstrap(factory) }
        func gauge(_ name: String, _ help: String) -> Prometheus.Gauge {
            registry.makeGauge(
                descriptor: MetricNameDescriptor(namespace: "homemqtt", metricName: name, unitName: "", helpText: help))
        }
        accessories = gauge("accessories", "Accessories in scope")
        reachable = gauge("accessories_reachable", "In-scope accessories reachable now")
        connected = gauge("broker_connected", "1 while the gateway is connected to the broker")
        pages = gauge("web_pages", "Pages connected to the web view's live feed")
        connections = gauge("web_connections", "Connections the web view has open")
        connectionCap = gauge("web_connections_max", "Connections the web view serves at once")
        // Totals since the start, kept by the limiter and read when scraped (so gauges here).
        refused = gauge("web_connections_refused", "Connections answered 503: every one was busy")
        replaced = gauge(
            "web_connections_replaced", "Connections closed at the cap because they had sent no whole request head")
    }

    /// The exposition text, with the gauges brought up to date first.
    func render(hub: LiveHub, limiter: ConnectionLimiter) async -> [UInt8] {
        connections.set(to: Double(limiter.openCount))
        connectionCap.set(to: Double(limiter.cap))
        let totals = limiter.counts
        refused.set(to: Double(totals.refused))
        replaced.set(to: Double(totals.evicted))
        let counts = await hub.accessoryCounts
        accessories.set(to: Double(counts.total))
        reachable.set(to: Double(counts.reachable))
        connected.set(to: await hub.isConnected ? 1 : 0)
        pages.set(to: Double(await hub.clientCount))
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        return buffer
    }
}
