/// Where the simulated home gets its time from.
///
/// Behaviours never sleep: they schedule steps at simulated times, and the home runs the steps
/// that are due. With `.system` the home's time follows the wall clock and `run()` runs due
/// steps as real time passes; with `.manual` time stands still until
/// `SimulatedHome.advance(by:)` moves it, which makes a door's 12-second travel instant and
/// deterministic in tests.
public struct SimulatorClock: Sendable, Hashable {
    enum Kind: Sendable, Hashable { case system, manual }

    let kind: Kind
    /// How often `run()` looks for due steps when following the wall clock.
    public var tick: Duration

    init(kind: Kind, tick: Duration = .milliseconds(100)) {
        self.kind = kind
        self.tick = tick
    }

    /// Real time; `run()` drives behaviours.
    public static let system = SimulatorClock(kind: .system)
    /// Test time; only `advance(by:)` moves it.
    public static let manual = SimulatorClock(kind: .manual)

    /// The wall clock with a different polling interval for `run()`.
    public static func system(tick: Duration) -> SimulatorClock { SimulatorClock(kind: .system, tick: tick) }

    public var isManual: Bool { kind == .manual }
}
