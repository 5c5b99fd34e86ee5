import Foundation
import MQTT

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

    /// An MQTT 3.1.1 broker cannot tell its maximum packet size, and closes the connection of a
    /// client that sends a larger packet: without `broker.max-packet-size` the gateway then
    /// reconnects, republishes the same packet and loses the connection again. True at the
    /// third such loss within a minute, so the log says so once, with the setting that ends it
    /// (`BrokerReports.repeatedLosses`).
    mutating func isRepeatedLossOverPacketSize(_ error: MQTTError?, mqtt: any MQTTTransport) -> Bool {
        guard error?.code == .connectionLost, mqtt.protocolVersion == .v311,
            mqtt.brokerLimits.maximumPacketSize == nil
        else { return false }
        return countLoss() == 3
    }

    /// How many times it was lost within the last minute, this one counted.
    private mutating func countLoss(at now: ContinuousClock.Instant = .now) -> Int {
        recentLosses = recentLosses.filter { now - $0 < .seconds(60) } + [now]
        return recentLosses.count
    }
}
