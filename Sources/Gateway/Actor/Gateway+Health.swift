import Foundation
import HomeModel
import MQTT

/// The health report: the `health` request's answer and the retained `<base>/$gateway/health`,
/// one document made in one place (`health(status:)`), refreshed every `health-interval` on
/// `clock` and at once when what it says of the home or the broker changes.
extension Gateway {
    nonisolated var healthTopic: String { "\(base)/$gateway/health" }

    /// Whether the retained document is published (`health-interval` above 0).
    nonisolated var publishesHealth: Bool { config.healthInterval > 0 }

    /// Everything a dashboard watches: the process, the broker connection, messages per second,
    /// the outbox, publishes that failed, accessories reachable by source, the last errors.
    /// The rates are those of the last refresh (the `health` request takes no sample of its own,
    /// so it says what the retained document says, within one interval).
    func health(status: String = "online") -> JSONValue {
        let uptime = ContinuousClock.now - parts.startedAt
        let requests = activity.requestCounts
        let totals = activity.totals
        let rates = healthState.rates
        func rounded(_ value: Double) -> JSONValue { .double((value * 100).rounded() / 100) }
        let dates = ISO8601DateFormatter()

        var broker: [String: JSONValue] = [
            "url": .string(config.brokerDisplay),
            "state": .string("\(mqtt.connectionState)"),
            "connected": .bool(mqtt.connectionState.isConnected),
            "reconnects": .int(Int64(totals.reconnects)),
        ]
        if let failure = connection.lastError {
            broker["last-error"] = .string(failure.message)
            broker["last-error-at"] = .string(dates.string(from: failure.at))
        }
        var process: [String: JSONValue] = [
            "cpu-seconds": rounded(ProcessUsage.cpuSeconds()), "cpu-percent": rounded(rates.cpuPercent),
        ]
        if let rss = ProcessUsage.residentBytes() { process["rss-bytes"] = .int(Int64(rss)) }

        var bySource: [String: (reachable: Int, unreachable: Int)] = [:]
        for node in tree.accessories {
            let prefix = node.id.split(separator: ":", maxSplits: 1).first.map(String.init) ?? node.id
            var counts = bySource[prefix] ?? (0, 0)
            if node.accessory.isReachable { counts.reachable += 1 } else { counts.unreachable += 1 }
            bySource[prefix] = counts
        }
        let reachable = bySource.values.reduce(0) { $0 + $1.reachable }
        let errors = activity.recentErrors().suffix(Self.healthErrorCount).map { record -> JSONValue in
            .object([
                "time": .string(dates.string(from: record.time)), "topic": .string(record.topic),
                "op": .string(record.op), "code": .string(record.code), "message": .string(record.message),
            ])
        }

        var document: [String: JSONValue] = [
            "status": .string(status),
            "time": .string(dates.string(from: Date())),
            "uptime": .double(GatewayHealth.seconds(uptime)),
            "process": .object(process),
            "broker": .object(broker),
            "messages": .object([
                "received": .int(Int64(totals.received)), "published": .int(Int64(totals.published)),
                "received-per-second": rounded(rates.received), "published-per-second": rounded(rates.published),
            ]),
            "outbox": .object(["backlog": .int(Int64(outbox.backlog))]),
            "sources": .array([.object(["name": .string(source.sourceName)])]),
            "accessories": .object([
                "in-scope": .int(Int64(tree.accessories.count)),
                "reachable": .int(Int64(reachable)),
                "unreachable": .int(Int64(tree.accessories.count - reachable)),
                "by-source": .object(
                    bySource.mapValues {
                        .object(["reachable": .int(Int64($0.reachable)), "unreachable": .int(Int64($0.unreachable))])
                    }),
            ]),
            "counts": .object([
                "rooms": .int(Int64(tree.rooms.count)),
                "accessories": .int(Int64(tree.accessories.count)),
                "characteristics": .int(Int64(tree.characteristicCount)),
                "retained-topics": .int(Int64(retainedCount)),
                "sets": .int(Int64(requests.sets)),
                "gets": .int(Int64(requests.gets)),
                "errors": .int(Int64(requests.errors)),
                // Never sent (a topic or packet the broker would not take, or a failure), and
                // refused by the broker after sending.
                "publishes-not-sent": .int(Int64(outbox.failedPublishes)),
                "publishes-refused": .int(Int64(mqtt.refusedPublishCount)),
            ]),
            "last-errors": .array(errors),
        ]
        if publishesHealth { document["interval"] = .double(config.healthInterval) }
        return .object(document)
    }

    /// How many of the last errors the document lists (the web view's events page has more).
    static let healthErrorCount = 5

    /// What the document says of the home and the broker, for `healthMayHaveChanged`.
    private var healthKey: GatewayHealth.Key {
        GatewayHealth.Key(
            accessories: tree.accessories.count, reachable: tree.accessories.count(where: { $0.accessory.isReachable }),
            connected: mqtt.connectionState.isConnected)
    }

    /// Publishes the retained document (`sample`: the rates become those since the last refresh).
    func publishHealth(sample: Bool, status: String = "online") {
        guard publishesHealth else { return }
        if sample {
            let totals = activity.totals
            healthState.sample(received: totals.received, published: totals.published)
        }
        healthState.publishedKey = healthKey
        guard let payload = healthPayload(status: status) else { return }
        enqueue(healthTopic, payload, retain: true)
    }

    /// The document under the broker's maximum packet size: without its last errors if need be,
    /// else none (said once: a broker that small takes no health document).
    func healthPayload(status: String = "online") -> [UInt8]? {
        let budget = payloadBudget(healthTopic)
        var document = health(status: status)
        var payload = document.encodedUTF8()
        if payload.count > budget, case .object(var fields) = document {
            fields["last-errors"] = .array([])
            document = .object(fields)
            payload = document.encodedUTF8()
        }
        guard payload.count <= budget else {
            if !healthState.saidTooLarge {
                healthState.saidTooLarge = true
                logger.warning(
                    "the health document does not fit the broker's maximum packet size; not published",
                    metadata: ["topic": "\(healthTopic)", "bytes": "\(payload.count)", "limit": "\(packetLimitText)"])
            }
            return nil
        }
        return payload
    }

    /// The tree was rebuilt (an accessory came, went or changed reachability): a document that
    /// no longer says how many are reachable is published again at once.
    func healthMayHaveChanged() {
        guard publishesHealth, isStarted, let published = healthState.publishedKey, published != healthKey else {
            return
        }
        publishHealth(sample: false)
    }

    nonisolated var healthInterval: Duration { .milliseconds(Int64((config.healthInterval * 1000).rounded())) }

    /// The first document, queued before `online` (a client that sees `online` finds it there);
    /// the refreshes are counted from now.
    func publishFirstHealth() {
        guard publishesHealth else { return }
        publishHealth(sample: true)
        healthState.nextRefresh = clock.now + healthInterval
    }

    /// Every `health-interval` on `clock` after the first document; until cancelled. The
    /// deadlines are counted from `publishFirstHealth`, not from when this task begins: a test
    /// that saw the document and moves the clock past the interval wakes it, however late it
    /// starts.
    func runHealth() async {
        guard publishesHealth else { return }
        while let next = healthState.nextRefresh {
            do { try await clock.sleep(until: next) } catch { return }
            publishHealth(sample: true)
            // Late by more than an interval (a machine asleep): the next one an interval on.
            let following = next + healthInterval
            healthState.nextRefresh = following > clock.now ? following : clock.now + healthInterval
        }
    }
}
