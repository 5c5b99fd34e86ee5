import Gateway
import HomeModel
import Logging
import ServiceLifecycle
import WebView

/// The web view in `homemqtt run` when `web.enabled`: its exporter made before the gateway (whose
/// counters come from it), and its service added to the gateway's group.
enum WebSetup {
    /// Call before making the gateway: swift-metrics hands the gateway its counters from the
    /// factory bootstrapped here. Without `web:` nothing is bootstrapped, and counting costs nothing.
    static func prepare(_ config: GatewayConfig) {
        if config[WebConfig.self].enabled { _ = WebMetrics.shared }
    }

    /// The web view as a service of the group, after the gateway (so stopped before it); nil when
    /// `web.enabled` is false.
    static func service(
        gateway: Gateway, config: GatewayConfig, logger: Logger
    ) -> ServiceGroupConfiguration.ServiceConfiguration? {
        guard config[WebConfig.self].enabled else { return nil }
        return .init(service: WebView(gateway: gateway, config: config[WebConfig.self], logger: logger))
    }
}
