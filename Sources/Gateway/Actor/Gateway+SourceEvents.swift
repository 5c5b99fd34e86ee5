import Foundation
import HomeModel
import MQTT

/// What the source and the home database report: values (published as `state`),
/// reachability and structure (a rebuild); which characteristics notify, and polling of those
/// that cannot.
extension Gateway {
    func remember(_ accessory: Accessory) {
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
            rebuild(announce: false)
            if let node = tree.accessory(id: id) {
                event(reachable ? .accessoryReachable : .accessoryUnreachable, accessory: node)
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
            rebuild(announce: true)
        }
    }

    func handle(homeEvent: HomeEvent) async {
        await refreshHome()
        switch homeEvent {
        case .roomAdded(let room):
            event(.roomAdded, fields: ["room": .object(["id": .string(room.id), "name": .string(room.name)])])
        case .roomRemoved(let room):
            event(.roomRemoved, fields: ["room": .object(["id": .string(room.id), "name": .string(room.name)])])
        case .roomRenamed(let room, let oldName):
            event(
                .roomRenamed,
                fields: [
                    "room": .object(["id": .string(room.id), "name": .string(room.name)]), "old-name": .string(oldName),
                ])
        case .serviceRenamed(let accessoryID, let iid, let name):
            event(
                .serviceRenamed,
                fields: [
                    "accessory": .string(accessoryID), "iid": .uint(iid), "name": name.map(JSONValue.string) ?? .null,
                ])
        case .homeRenamed(let name):
            event(.homeRenamed, fields: ["name": .string(name)])
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
            announce(change)
        case .accessoryAssigned, .accessoryRenamed, .accessoryForgotten:
            break // announced by the tree diff, which knows the topics
        }
        work.rebuildRequests.yield()
    }

    /// A change to the list of homes, on every home's event topic; a home's own rename is
    /// `home-renamed` without an id, as it always was.
    func announce(_ change: HomesChange) {
        func describe(_ home: Home) -> JSONValue {
            .object([
                "id": .string(home.id), "name": .string(home.name),
                "base-topic": .string(home.baseTopic ?? config.gatewayBase),
            ])
        }
        switch change {
        case .added(let home):
            event(.homeAdded, fields: ["home": describe(home)])
        case .removed(let home):
            event(.homeRemoved, fields: ["home": describe(home)])
        case .renamed(let home, let oldName):
            guard home.id != currentHome?.id else { return }
            event(
                .homeRenamed,
                fields: ["home": describe(home), "name": .string(home.name), "old-name": .string(oldName)])
        case .primaryChanged(let home, let previous):
            event(.primaryHomeChanged, fields: ["home": describe(home), "previous": describe(previous)])
        case .baseTopicChanged(let home, let old):
            event(
                .homeBaseTopicChanged,
                fields: ["home": describe(home), "old-base-topic": .string(old ?? config.gatewayBase)])
        }
    }

    func update(_ address: CharacteristicAddress, _ value: CharacteristicValue) {
        // Another home's value is not kept here (its gateway keeps it).
        if served.accessories[address.accessoryID] == nil, !database.serves(accessoryID: address.accessoryID) { return }
        let previous = served.record(value, at: address)
        guard isStarted, let node = publishedTree.characteristic(address) else { return }
        if node.isEvent {
            // A press: each report is published once, and never retained (a later subscriber
            // must not see an old press as a new one).
            let text = ValueCodec.text(value, metadata: node.characteristic.metadata)
            enqueue(node.topic + "/state", Array(text.utf8), retain: false)
            notifyObservers(.value(node, value))
            return
        }
        guard previous != value else { return }
        // What is on the broker is the text of the previous value: publish only a change.
        let metadata = node.characteristic.metadata
        let text = ValueCodec.text(value, metadata: metadata)
        if let previous, ValueCodec.text(previous, metadata: metadata) == text { return }
        enqueue(node.topic + "/state", Array(text.utf8), retain: true)
        outputsValueChanged(address.accessoryID)
        notifyObservers(.value(node, value))
    }

    /// The in-scope characteristics that can notify, straight from the tree (no array of every
    /// address on the way).
    func notifyingAddresses() -> Set<CharacteristicAddress> {
        var out = Set<CharacteristicAddress>(minimumCapacity: tree.characteristicCount)
        for accessory in tree.accessories {
            for service in accessory.services {
                for c in service.characteristics where c.characteristic.metadata.permissions.contains(.notify) {
                    out.insert(c.address)
                }
            }
        }
        return out
    }

    func syncNotifications() async {
        var enabled = Set<CharacteristicAddress>()
        for await desired in work.notificationStream {
            let off = enabled.subtracting(desired).sorted()
            let on = desired.subtracting(enabled).sorted()
            if !off.isEmpty {
                _ = await source.setNotifications(enabled: false, for: off)
            }
            if !on.isEmpty {
                let failures = await source.setNotifications(enabled: true, for: on)
                for (address, error) in failures {
                    logger.debug(
                        "notifications not enabled", metadata: ["characteristic": "\(address)", "error": "\(error)"])
                }
            }
            enabled = desired
        }
    }

    func pollTargets() -> [CharacteristicAddress] {
        tree.accessories.filter(\.accessory.isReachable).flatMap { node in
            node.services.flatMap { service in
                service.characteristics.filter {
                    let permissions = $0.characteristic.metadata.permissions
                    return permissions.contains(.read) && !permissions.contains(.notify)
                }.map(\.address)
            }
        }
    }

    func pollLoop() async throws {
        while true {
            try await clock.sleep(for: .seconds(config.pollInterval))
            // A read value comes back as the source's `valueUpdated` event, in order.
            for address in pollTargets() {
                _ = try? await source.read(address)
            }
        }
    }
}
