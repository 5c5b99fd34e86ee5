import Foundation
import HomeModel

/// The health document's state between refreshes: the last sample of the counters (so each
/// refresh says what happened per second since the one before), the rates it gave, and what the
/// last document said of the home and the broker (a change of those publishes at once).
///
/// One document, one place: `document(_:)` (`GatewayHealth+Document`) makes it for the `health` request and for the
/// retained `<base>/$gateway/health`; its message counts are the ones `GatewayActivity` adds to
/// `/metrics` (`homemqtt_mqtt_messages_*_total`, `homemqtt_broker_reconnects_total`), at the
/// same calls.
struct GatewayHealth {
    /// Counters at one moment.
    struct Sample {
        var at: ContinuousClock.Instant
        var received: Int
        var published: Int
        /// The process's CPU time (user and system), in seconds.
        var cpu: Double
    }

    /// Per second between the last two samples.
    struct Rates: Equatable {
        var received = 0.0
        var published = 0.0
        /// Of one core: 100 is one core busy all the time.
        var cpuPercent = 0.0
    }

    /// What makes a document worth publishing before its interval is up.
    struct Key: Equatable {
        var accessories: Int
        var reachable: Int
        var connected: Bool
    }

    private(set) var last: Sample?
    private(set) var rates = Rates()
    /// What the last published document said; nil before the first.
    var publishedKey: Key?
    /// Whether the log said that the document does not fit the broker's packets.
    var saidTooLarge = false
    /// Every `health-interval`; the retained document is off at 0 (the request still answers).
    var refresh: Refresh

    init(interval seconds: Double) { refresh = Refresh(seconds: seconds) }

    /// Takes a sample; the rates become those since the previous one.
    mutating func sample(received: Int, published: Int, now: ContinuousClock.Instant = .now) {
        let next = Sample(at: now, received: received, published: published, cpu: ProcessUsage.cpuSeconds())
        if let last {
            let elapsed = Self.seconds(next.at - last.at)
            if elapsed > 0 {
                rates = Rates(
                    received: Double(next.received - last.received) / elapsed,
                    published: Double(next.published - last.published) / elapsed,
                    cpuPercent: (next.cpu - last.cpu) / elapsed * 100)
            }
        }
        last = next
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}

/// The process as the kernel counts it: resident memory and CPU time.
enum ProcessUsage {
    /// Resident set size in bytes (`/proc/self/statm`'s second field, in pages); nil where there
    /// is no `/proc`.
    static func residentBytes() -> Int? {
        guard let data = FileManager.default.contents(atPath: "/proc/self/statm"),
            let text = String(data: data, encoding: .utf8)
        else { return nil }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return nil }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    /// CPU time used so far, user and system, in seconds.
    static func cpuSeconds() -> Double {
        var usage = rusage()
        guard getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage) == 0 else { return 0 }
        func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }
}
