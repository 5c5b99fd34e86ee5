import Foundation
import HomeModel
import MQTT

/// What the source and the home database report: values (published as `state`),
/// reachability and structure (a rebuild); which characteristics notify, and polling of those
/// that cannot.
extension Gateway {
    func remember(_ accessory: Accessory) {
        lastSeen.heard(accessory.id)
        for (address, value) in served.values(describedIn: accessory) { update(address, value) }
        served.describe(accessory)
    }

    func refreshHome() async {
        served.read(await database.home)
    }

    func handle(sourceEvent: SourceEvent) async {
        activity.sourceEvent(sourceEvent)
        switch sourceEvent {
        case .valueUpdated(let address, let value):
            update(address, value)
        case .reachabilityChanged(let id, let reachable):
            guard database.serves(accessoryID: id), served.setReachable(id, reachable) else { return }
            if reachable {
                lastSeen.reconnected(id)
                lastSeen.heard(id)
            }
            rebuild(announce: false)
            if let node = tree.accessory(id: id) {
                event(
                    reachable ? .accessoryReachable : .accessoryUnreachable,
                    fields: GatewayEvent.fields(accessory: node))
            }
        case .accessoryAdded(let accessory), .accessoryChanged(let accessory):
            // Another home's: its own gateway serves it.
            guard database.serves(accessoryID: accessory.id) else { return }
            do {
                try await database.adopt([accessory])
            } catch {
                // The accessory is still served; only its room suggestion is not kept.
                logger.error(
                    "cannot record the accessory in the home database",
                    metadata: [
                        "accessory": "\(accessory.id)", "error": "\(error.message)",
                    ])
            }
            await refreshHome()
            // It may have moved to another home while this one was recording it.
            guard database.serves(accessoryID: accessory.id) else { return }
            remember(accessory)
            rebuild(announce: true)
        case .accessoryRemoved(let id):
            served.forget(id)
            lastSeen.forget(id)
            rebuild(announce: true)
        }
    }

    func handle(homeEvent: HomeEvent) async {
        await refreshHome()
        if let (name, fields) = GatewayEvent.of(homeEvent) { event(name, fields: fields) }
        switch homeEvent {
        case .accessoryJoined(let accessoryID):
            // Out of this home's tree until now: its description and values come from the source.
            if let accessory = await source.accessories().first(where: { $0.id == accessoryID }) {
                remember(accessory)
            }
            rebuild(announce: true)
            event(.accessoryJoinedHome, fields: ["accessory": .string(accessoryID)])
        case .accessoryLeft(let accessoryID, let toHome):
            served.forget(accessoryID)
            rebuild(announce: true)
            event(.accessoryLeftHome, fields: ["accessory": .string(accessoryID), "home": .string(toHome)])
        case .homes(let change):
            let announced = GatewayEvent.of(change, gatewayBase: config.gatewayBase, currentHomeID: currentHome?.id)
            if let (name, fields) = announced { event(name, fields: fields) }
        default:
            // Rooms, names: announced above; an accessory's room or name by the tree diff, which
            // knows the topics.
            break
        }
        work.rebuildRequests.yield()
    }

    func update(_ address: CharacteristicAddress, _ value: CharacteristicValue) {
        // Found on the published tree first (`Publication.characteristic`: one look-up for a run
        // of one accessory's values). What is on it is served here: once started, the tree is
        // published at each rebuild, and an accessory leaves `served` only with a rebuild.
        let node = isStarted ? publication.characteristic(address) : nil
        // Else another home's value is not kept here (its gateway keeps it). `index(forKey:)`:
        // comparing the looked-up accessory with nil made a copy of it, retaining and releasing
        // every reference it holds.
        if node == nil, served.accessories.index(forKey: address.accessoryID) == nil,
            !database.serves(accessoryID: address.accessoryID)
        {
            return
        }
        lastSeen.heard(address.accessoryID)
        let previous = served.record(value, at: address)
        guard let node else { return }
        if node.isEvent {
            // A press: each report is published once, and never retained (a later subscriber
            // must not see an old press as a new one).
            let text = ValueCodec.text(value, metadata: node.characteristic.metadata)
            enqueue(node.topic("/state"), Array(text.utf8), retain: false)
            notifyObservers(.value(node, value))
            return
        }
        guard previous != value else { return }
        // What is on the broker is the text of the previous value: publish only a change.
        let metadata = node.characteristic.metadata
        let text = ValueCodec.text(value, metadata: metadata)
        if let previous, !ValueCodec.textsDiffer(previous, value, format: metadata.format),
            ValueCodec.text(previous, metadata: metadata) == text
        {
            return
        }
        // `scope.rate-limits`: without any, one emptiness check and nothing else.
        if !rateLimiter.isEmpty, !rateLimiter.passes(node, value, text: text, previous: previous, now: clock.now) {
            return
        }
        publishState(node, value, text: text)
    }

    /// A characteristic's new value out to the broker (`state`), the outputs (`$state`) and the
    /// observers (Homie, the web view).
    func publishState(_ node: TopicTree.CharacteristicNode, _ value: CharacteristicValue, text: String) {
        enqueue(node.topic("/state"), Array(text.utf8), retain: true)
        outputs.valueChanged(node.address.accessoryID, self)
        notifyObservers(.value(node, value))
    }

    /// How many addresses `syncNotifications` hands the source in one call, about.
    static var notificationBatch: Int { 4096 }

    func syncNotifications() async {
        // Kept by accessory (`CharacteristicAddressSet`): at 10,000 accessories a `Set` of the
        // 250,000 addresses that notify cost 12.6 MB, made again at each change of the tree.
        var enabled = CharacteristicAddressSet()
        for await desired in work.notificationStream {
            // A batch of whole accessories at a time (`batches`): a home of a few thousand
            // characteristics in one call each way, a large one without its every address in
            // arrays at once.
            for off in enabled.batches(notIn: desired, size: Self.notificationBatch) {
                _ = await source.setNotifications(enabled: false, for: off)
            }
            for on in desired.batches(notIn: enabled, size: Self.notificationBatch) {
                let failures = await source.setNotifications(enabled: true, for: on)
                for (address, error) in failures {
                    logger.debug(
                        "notifications not enabled", metadata: ["characteristic": "\(address)", "error": "\(error)"])
                }
            }
            enabled = desired
        }
    }

    func pollLoop() async throws {
        while true {
            try await clock.sleep(for: .seconds(config.pollInterval))
            // A read value comes back as the source's `valueUpdated` event, in order.
            for address in tree.pollTargets() {
                _ = try? await source.read(address)
            }
        }
    }
}
