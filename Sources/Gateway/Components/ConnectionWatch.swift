import Foundation

/// The broker connection as the last states said: whether it is up, and when it was lost lately.
struct ConnectionWatch {
    private(set) var isConnected = false
    private var recentLosses: [ContinuousClock.Instant] = []
    /// Why it was last lost, and when (the health document says so).
    private(set) var lastError: (message: String, at: Date)?

    /// Whether it was down before.
    mutating func connected() -> Bool {
        defer { isConnected = true }
        return !isConnected
    }

    /// Whether it was up before.
    mutating func lost() -> Bool {
        defer { isConnected = false }
        return isConnected
    }

    mutating func failed(_ message: String, at date: Date = Date()) { lastError = (message, date) }

    /// How many times it was lost within the last minute, this one counted.
    mutating func countLoss(at now: ContinuousClock.Instant = .now) -> Int {
        recentLosses = recentLosses.filter { now - $0 < .seconds(60) } + [now]
        return recentLosses.count
    }
}
