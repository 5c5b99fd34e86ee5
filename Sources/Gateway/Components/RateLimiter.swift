import HomeModel
import Synchronization

/// `scope.rate-limits` applied: for each limited characteristic, what its `state` on the broker
/// says and since when, and whether a newer value waits for its window to close. Pure but for
/// the wake-up of the loop that releases held values (`Gateway.runRateLimits`); the gateway's
/// `update` asks `offer` for every change of a limited characteristic, and publishes only on
/// `.publish`.
///
/// What holds:
/// - a held value is never lost: when its window closes the latest value is published (the
///   gateway reads it from what it recorded, not from here), and a characteristic that loses
///   its limit keeps its held value until that window closes;
/// - a dead band (`minChange`) measures from the value on the broker, so a slow drift is
///   published once it has moved that far, never swallowed change by change;
/// - nothing here is touched for a characteristic without a limit: with no `rate-limits`,
///   `update` checks `isEmpty` and nothing else.
struct RateLimiter {
    /// What `offer` decides for a change.
    enum Decision: Equatable {
        /// Publish it now (a window opens now).
        case publish
        /// Wait: it is published when its window closes, at `due`, unless a newer one replaces it.
        case hold
        /// Nothing to publish: the broker already says this, or a value within the dead band.
        case skip
    }

    /// What the broker's `state` of a limited characteristic says, and when it was published
    /// (nil: before this run limited it, so no window is open).
    private struct Shown {
        var text: String
        var number: Double?
        var at: ContinuousClock.Instant?
    }

    private(set) var limits: [CharacteristicAddress: CharacteristicRateLimit] = [:]
    private var shown: [CharacteristicAddress: Shown] = [:]
    /// Characteristics whose latest value waits, with when their window closes.
    private(set) var held: [CharacteristicAddress: ContinuousClock.Instant] = [:]
    /// Values read on request (`get`) that their source has not reported yet: published at
    /// once when it does, never held.
    private var requested: [CharacteristicAddress: String] = [:]
    /// Wakes the releasing loop when a window closes earlier than the one it sleeps for.
    let wake = RateLimitWake()

    var isEmpty: Bool { limits.isEmpty && held.isEmpty }

    /// The limits of a new tree. Records of characteristics no longer limited go; their held
    /// values stay until their window closes.
    mutating func assign(_ limits: [CharacteristicAddress: CharacteristicRateLimit]) {
        self.limits = limits
        shown = shown.filter { limits[$0.key] != nil }
        if !held.isEmpty { wake.wake() }
    }

    /// A change of `address` to `text` (its `number`, for a dead band); `previous` is the text
    /// the broker has when nothing was recorded here yet (every change was published until now).
    mutating func offer(
        _ address: CharacteristicAddress, text: String, number: Double?, previous: (String, Double?)?,
        now: ContinuousClock.Instant
    ) -> Decision {
        guard let limit = limits[address] else {
            // Held, then its limit went: the latest waits for the window all the same.
            return held[address] == nil ? .publish : .hold
        }
        if let asked = requested.removeValue(forKey: address), asked == text {
            published(address, text: text, number: number, at: now)
            return .publish
        }
        if shown[address] == nil, let previous {
            // What the broker shows: every change was published until this one.
            shown[address] = Shown(text: previous.0, number: previous.1, at: nil)
        }
        if let shown = shown[address] {
            if shown.text == text || Self.within(limit.minChange, number, shown.number) {
                // The latest value is the broker's, or close enough to it: nothing waits.
                held[address] = nil
                return .skip
            }
            if let interval = limit.minInterval, let at = shown.at, now < at + interval {
                let due = at + interval
                if held.updateValue(due, forKey: address) == nil { wake.wake(before: due) }
                return .hold
            }
        }
        published(address, text: text, number: number, at: now)
        return .publish
    }

    private static func within(_ band: Double?, _ number: Double?, _ shown: Double?) -> Bool {
        guard let band, let number, let shown else { return false }
        return abs(number - shown) < band
    }

    /// `text` went out on `address`'s `state` at `now`: its next window starts now.
    mutating func published(
        _ address: CharacteristicAddress, text: String, number: Double?, at now: ContinuousClock.Instant
    ) {
        held[address] = nil
        guard limits[address] != nil else { return }
        shown[address] = Shown(text: text, number: number, at: now)
    }

    /// A `get` read `text` (`current`: the value recorded now, as text). Whatever is held for
    /// the address is released (`true`: the caller publishes the recorded value now), and a read
    /// value its source has not reported yet is published at once when it is: a `get` shows
    /// the latest value, never one held back.
    mutating func read(_ address: CharacteristicAddress, text: String, current: String?) -> Bool {
        if limits[address] != nil || held[address] != nil, text != current { requested[address] = text }
        return held.removeValue(forKey: address) != nil
    }

    /// Whether the broker's `state` of `address` says `text` already.
    func shows(_ address: CharacteristicAddress, _ text: String) -> Bool { shown[address]?.text == text }

    /// Every held characteristic, no longer held (the gateway stopping publishes them all).
    mutating func takeAll() -> [CharacteristicAddress] {
        defer { held = [:] }
        return held.keys.sorted()
    }

    /// When the earliest window with a held value closes.
    var nextDue: ContinuousClock.Instant? { held.values.min() }

    /// The held characteristics whose window has closed by `now`, no longer held.
    mutating func takeDue(now: ContinuousClock.Instant) -> [CharacteristicAddress] {
        let due = held.filter { $0.value <= now }.map(\.key).sorted()
        for address in due { held[address] = nil }
        return due
    }
}

/// The same decisions for values as the gateway holds them: each compared at its
/// characteristic's precision, as its `state` text (and that text's number, for a dead band).
extension RateLimiter {
    /// Whether a change of `node` to `value` (its `state` text `text`) goes out now. `previous`
    /// is the value it replaces (what the broker shows, when nothing was limited before it).
    mutating func passes(
        _ node: TopicTree.CharacteristicNode, _ value: CharacteristicValue, text: String,
        previous: CharacteristicValue?, now: ContinuousClock.Instant
    ) -> Bool {
        let metadata = node.characteristic.metadata
        let before = previous.map { previous -> (String, Double?) in
            let text = ValueCodec.text(previous, metadata: metadata)
            return (text, Self.number(previous, text: text))
        }
        return offer(node.address, text: text, number: Self.number(value, text: text), previous: before, now: now)
            == .publish
    }

    /// A `get` (or a `set`) was answered with `value` (`current`: the value recorded now):
    /// `true` when what was held for it goes out now (`read`).
    mutating func answered(
        _ node: TopicTree.CharacteristicNode, _ value: CharacteristicValue, current: CharacteristicValue?
    ) -> Bool {
        guard !isEmpty else { return false }
        let metadata = node.characteristic.metadata
        let text = ValueCodec.text(value, metadata: metadata)
        return read(node.address, text: text, current: current.map { ValueCodec.text($0, metadata: metadata) })
    }

    /// `value` went out as `text` at `now` (`published`).
    mutating func published(
        _ address: CharacteristicAddress, _ value: CharacteristicValue, text: String, at now: ContinuousClock.Instant
    ) {
        published(address, text: text, number: Self.number(value, text: text), at: now)
    }

    /// A number's value at the characteristic's precision (its `state` text); nil for others.
    static func number(_ value: CharacteristicValue, text: String) -> Double? {
        switch value {
        case .int, .uint, .float: Double(text)
        case .bool, .string, .data: nil
        }
    }
}

/// The releasing loop's wake-up: it sleeps until the earliest window closes, and a value held
/// for an earlier one (a characteristic with a shorter interval) ends that sleep. One waiter;
/// a wake-up while nobody waits is kept for the next wait.
final class RateLimitWake: Sendable {
    /// The deadline the loop sleeps for; nil while it waits for a first held value.
    private let until = Mutex<ContinuousClock.Instant?>(nil)
    private let signal = WakeSignal()

    /// The loop is about to sleep until `deadline` (nil: until woken).
    func sleeping(until deadline: ContinuousClock.Instant?) { until.withLock { $0 = deadline } }

    /// Wakes the loop if it would sleep past `due`.
    func wake(before due: ContinuousClock.Instant) {
        let needed = until.withLock { until in until.map { due < $0 } ?? true }
        if needed { wake() }
    }

    func wake() { signal.wake() }

    /// Returns at the next `wake` (at once if one came since the last wait), or when cancelled.
    func wait() async { await signal.wait() }
}
