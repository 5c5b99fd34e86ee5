/// A document refreshed every interval on the gateway's clock (`health-interval`,
/// `last-seen-interval`; 0 turns it off), counted from `start` — the first publication — and
/// not from when the loop that waits for it begins: a test that saw the first document and moves
/// the clock past the interval wakes the loop however late it starts.
struct Refresh {
    let interval: Duration
    /// When the next refresh is due; nil before `start` (and always when off).
    private(set) var next: GatewayClock.Instant?

    init(seconds: Double) { interval = .milliseconds(Int64((seconds * 1000).rounded())) }

    var isOn: Bool { interval > .zero }

    mutating func start(now: GatewayClock.Instant) {
        if isOn { next = now + interval }
    }

    /// The refresh due at `due` is done: the next one an interval on, or an interval from `now`
    /// when it came late by more than an interval (a machine asleep).
    mutating func done(_ due: GatewayClock.Instant, now: GatewayClock.Instant) {
        let following = due + interval
        next = following > now ? following : now + interval
    }
}
