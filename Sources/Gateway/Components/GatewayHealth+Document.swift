import Foundation
import HomeModel
import Logging

/// The health document itself: made from what the gateway holds at one moment (`Inputs`) and
/// the rates of the last refresh, and shrunk to the broker's packet limit. Pure but for the
/// process's own usage (`ProcessUsage`), so the `health` request and the retained document are
/// one function of one gathering (`Gateway.health(status:)`).
extension GatewayHealth {
    /// What the gateway holds, gathered on the actor.
    struct Inputs {
        var status: String
        var uptime: Duration
        var brokerURL: String
        var brokerState: String
        var connected: Bool
        var lastError: (message: String, at: Date)?
        /// The counters of `/metrics` and the last errors.
        var activity: GatewayActivity
        var backlog: Int
        var sourceName: String
        /// Each accessory in scope: its id (whose prefix names its source) and reachability.
        var accessories: [(id: String, reachable: Bool)]
        var rooms: Int
        var characteristics: Int
        var retainedTopics: Int
        /// Never sent (a topic or packet the broker would not take, or a failure).
        var publishesNotSent: Int
        /// Refused by the broker after sending.
        var publishesRefused: Int
        /// `health-interval` when the document is published; nil when it is only asked for.
        var interval: Double?
    }

    /// How many of the last errors the document lists (the web view's events page has more).
    static let errorCount = 5

    /// Everything a dashboard watches: the process, the broker connection, messages per second,
    /// the outbox, publishes that failed, accessories reachable by source, the last errors.
    /// The rates are those of the last refresh (the `health` request takes no sample of its own,
    /// so it says what the retained document says, within one interval).
    func document(_ inputs: Inputs, now: Date = Date()) -> JSONValue {
        let (totals, requests) = (inputs.activity.totals, inputs.activity.requestCounts)
        var broker: [String: JSONValue] = [
            "url": .string(inputs.brokerURL), "state": .string(inputs.brokerState),
            "connected": .bool(inputs.connected), "reconnects": .int(Int64(totals.reconnects)),
        ]
        if let failure = inputs.lastError {
            broker["last-error"] = .string(failure.message)
            broker["last-error-at"] = .string(UTCTimestamp.string(failure.at))
        }
        var process: [String: JSONValue] = [
            "cpu-seconds": Self.rounded(ProcessUsage.cpuSeconds()), "cpu-percent": Self.rounded(rates.cpuPercent),
        ]
        if let rss = ProcessUsage.residentBytes() { process["rss-bytes"] = .int(Int64(rss)) }

        var bySource: [String: (reachable: Int64, unreachable: Int64)] = [:]
        for (id, reachable) in inputs.accessories {
            let prefix = id.split(separator: ":", maxSplits: 1).first.map(String.init) ?? id
            bySource[prefix, default: (0, 0)].reachable += reachable ? 1 : 0
            bySource[prefix, default: (0, 0)].unreachable += reachable ? 0 : 1
        }
        let reachable = bySource.values.reduce(0) { $0 + $1.reachable }
        let errors = inputs.activity.recentErrors().suffix(Self.errorCount).map { record -> JSONValue in
            .object([
                "time": .string(UTCTimestamp.string(record.time)), "topic": .string(record.topic),
                "op": .string(record.op), "code": .string(record.code), "message": .string(record.message),
            ])
        }
        let inScope = Int64(inputs.accessories.count)
        var document: [String: JSONValue] = [
            "status": .string(inputs.status), "time": .string(UTCTimestamp.string(now)),
            "uptime": .double(Self.seconds(inputs.uptime)), "process": .object(process), "broker": .object(broker),
            "messages": .object([
                "received": .int(Int64(totals.received)), "published": .int(Int64(totals.published)),
                "received-per-second": Self.rounded(rates.received),
                "published-per-second": Self.rounded(rates.published),
            ]),
            "outbox": .object(["backlog": .int(Int64(inputs.backlog))]),
            "sources": .array([.object(["name": .string(inputs.sourceName)])]),
            "accessories": .object([
                "in-scope": .int(inScope), "reachable": .int(reachable), "unreachable": .int(inScope - reachable),
                "by-source": .object(
                    bySource.mapValues {
                        .object(["reachable": .int($0.reachable), "unreachable": .int($0.unreachable)])
                    }
                ),
            ]),
            "counts": .object([
                "rooms": .int(Int64(inputs.rooms)), "accessories": .int(inScope),
                "characteristics": .int(Int64(inputs.characteristics)),
                "retained-topics": .int(Int64(inputs.retainedTopics)),
                "sets": .int(Int64(requests.sets)), "gets": .int(Int64(requests.gets)),
                "errors": .int(Int64(requests.errors)),
                "publishes-not-sent": .int(Int64(inputs.publishesNotSent)),
                "publishes-refused": .int(Int64(inputs.publishesRefused)),
            ]),
            "last-errors": .array(errors),
        ]
        if let interval = inputs.interval { document["interval"] = .double(interval) }
        return .object(document)
    }

    /// The document's bytes under the broker's maximum packet size (`budget`, on `topic`):
    /// without its last errors if need be, else none (said once: a broker that small takes no
    /// health document).
    mutating func payload(_ inputs: Inputs, budget: Int, topic: String, limit: String, logger: Logger) -> [UInt8]? {
        var document = document(inputs)
        var payload = document.encodedUTF8()
        if payload.count > budget, case .object(var fields) = document {
            fields["last-errors"] = .array([])
            document = .object(fields)
            payload = document.encodedUTF8()
        }
        guard payload.count <= budget else {
            if !saidTooLarge {
                saidTooLarge = true
                logger.warning(
                    "the health document does not fit the broker's maximum packet size; not published",
                    metadata: ["topic": "\(topic)", "bytes": "\(payload.count)", "limit": "\(limit)"])
            }
            return nil
        }
        return payload
    }

    private static func rounded(_ value: Double) -> JSONValue { .double((value * 100).rounded() / 100) }
}
