import Foundation
import HomeModel
import MQTT

/// The health report: the `health` request's answer and the retained `<base>/$gateway/health`,
/// one document (`GatewayHealth.document`) of what the actor holds (`healthInputs`), refreshed
/// every `health-interval` on `clock` and at once when what it says of the home or the broker
/// changes.
extension Gateway {
    nonisolated var healthTopic: String { "\(base)/$gateway/health" }

    /// Whether the retained document is published (`health-interval` above 0).
    nonisolated var publishesHealth: Bool { config.healthInterval > 0 }

    /// What the document says, as the actor holds it now.
    private var healthInputs: GatewayHealth.Inputs {
        GatewayHealth.Inputs(
            status: "online", uptime: ContinuousClock.now - parts.startedAt, brokerURL: config.brokerDisplay,
            brokerState: "\(mqtt.connectionState)", connected: mqtt.connectionState.isConnected,
            lastError: connection.lastError, activity: activity, backlog: outbox.backlog,
            sourceName: source.sourceName, accessories: tree.accessories.map { ($0.id, $0.accessory.isReachable) },
            rooms: tree.rooms.count, characteristics: tree.characteristicCount, retainedTopics: retainedCount,
            publishesNotSent: outbox.failedPublishes, publishesRefused: mqtt.refusedPublishCount,
            interval: publishesHealth ? config.healthInterval : nil)
    }

    /// The `health` request's answer: the retained document's, with `status`.
    func health(status: String = "online") -> JSONValue {
        var inputs = healthInputs
        inputs.status = status
        return healthState.document(inputs)
    }

    /// The retained document's payload under the broker's packet limit; nil when none fits.
    func healthPayload(status: String = "online") -> [UInt8]? {
        var inputs = healthInputs
        inputs.status = status
        return healthState.payload(
            inputs, budget: budget.payload(healthTopic), topic: healthTopic, limit: budget.limitText, logger: logger)
    }

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

    /// The tree was rebuilt (an accessory came, went or changed reachability): a document that
    /// no longer says how many are reachable is published again at once.
    func healthMayHaveChanged() {
        guard publishesHealth, isStarted, let published = healthState.publishedKey, published != healthKey else {
            return
        }
        publishHealth(sample: false)
    }

    /// Every `health-interval` on `clock` (`Refresh`, started with the first document, which is
    /// queued before `online`); until cancelled.
    func runHealth() async {
        while let due = healthState.refresh.next {
            do { try await clock.sleep(until: due) } catch { return }
            publishHealth(sample: true)
            healthState.refresh.done(due, now: clock.now)
        }
    }
}
