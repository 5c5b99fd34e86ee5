// Publish failures logged without flooding the log.

/// Which publish failures to log. A broker that goes away fails every queued message at once
/// (thousands at a stop), and a document larger than the broker's maximum packet size fails at
/// every republication: the first failure of each kind (its error code) is logged with its
/// topic, and the others of that kind within `interval` are only counted, their number given
/// with the next one logged and at the end. The MQTT client logs the publishes the broker
/// refuses the same way (by reason), and the gateway's outbox those it could not send.
public struct PublishFailures: Sendable {
    public static let interval: Duration = .seconds(10)

    private var kinds: [String: (logged: ContinuousClock.Instant, suppressed: Int)] = [:]

    public init() {}

    /// Whether to log a failure of `kind` now, and how many of its kind went unlogged before it.
    public mutating func admit(_ kind: String, now: ContinuousClock.Instant) -> (log: Bool, suppressed: Int) {
        guard let previous = kinds[kind], now - previous.logged < Self.interval else {
            let suppressed = kinds[kind]?.suppressed ?? 0
            kinds[kind] = (now, 0)
            return (true, suppressed)
        }
        kinds[kind] = (previous.logged, previous.suppressed + 1)
        return (false, 0)
    }

    /// The failures counted and never logged, by kind; forgets them.
    public mutating func takeSuppressed() -> [(kind: String, count: Int)] {
        defer { kinds = kinds.mapValues { ($0.logged, 0) } }
        return kinds.filter { $0.value.suppressed > 0 }.map { ($0.key, $0.value.suppressed) }.sorted {
            $0.kind < $1.kind
        }
    }
}
