import HomeModel

// What each event on `<base>/$gateway/event` says, made from what happened: a pure function of
// trees, home events and changes to the list of homes. The gateway adds the `event` name when
// it publishes one (`Gateway.event`), and sends it to the observers as it is.
extension GatewayEvent {
    /// An accessory's event: its id, name, room and topic, and `extra` (`old-name`, ...).
    static func fields(accessory node: TopicTree.AccessoryNode, extra: [String: JSONValue] = [:]) -> [String: JSONValue]
    {
        var object: [String: JSONValue] = [
            "accessory": .object([
                "id": .string(node.id), "name": .string(node.displayName),
                "room": .string(node.room.name), "topic": .string(node.topic),
            ])
        ]
        object.merge(extra) { a, _ in a }
        return object
    }

    /// What a rebuild changed, accessory by accessory: added, renamed, moved (or only its topic
    /// changed), then those gone from `new`, `removed` (from the home) or out of scope.
    static func changes(
        from old: TopicTree, to new: TopicTree, removed: (String) -> Bool
    ) -> [(GatewayEvent, [String: JSONValue])] {
        var out: [(GatewayEvent, [String: JSONValue])] = []
        for node in new.accessories {
            guard let before = old.accessory(id: node.id) else {
                out.append((.accessoryAdded, fields(accessory: node)))
                continue
            }
            if before.displayName != node.displayName {
                let extra: [String: JSONValue] = [
                    "old-name": .string(before.displayName), "old-topic": .string(before.topic),
                ]
                out.append((.accessoryRenamed, fields(accessory: node, extra: extra)))
            }
            if before.room.id != node.room.id {
                let extra: [String: JSONValue] = [
                    "old-room": .string(before.room.name), "old-topic": .string(before.topic),
                ]
                out.append((.accessoryMoved, fields(accessory: node, extra: extra)))
            } else if before.topic != node.topic && before.displayName == node.displayName {
                out.append(
                    (.accessoryTopicChanged, fields(accessory: node, extra: ["old-topic": .string(before.topic)])))
            }
        }
        for node in old.accessories where new.accessory(id: node.id) == nil {
            out.append((removed(node.id) ? .accessoryRemoved : .accessoryLeftScope, fields(accessory: node)))
        }
        return out
    }

    /// The event of a home event that is one by itself (rooms, a service's name, the home's
    /// name); nil for the others, which the tree's changes or the gateway announce.
    static func of(_ event: HomeEvent) -> (GatewayEvent, [String: JSONValue])? {
        func room(_ room: Room) -> JSONValue { .object(["id": .string(room.id), "name": .string(room.name)]) }
        switch event {
        case .roomAdded(let added): return (.roomAdded, ["room": room(added)])
        case .roomRemoved(let removed): return (.roomRemoved, ["room": room(removed)])
        case .roomRenamed(let renamed, let oldName):
            return (.roomRenamed, ["room": room(renamed), "old-name": .string(oldName)])
        case .serviceRenamed(let accessoryID, let iid, let name):
            return (
                .serviceRenamed,
                ["accessory": .string(accessoryID), "iid": .uint(iid), "name": name.map(JSONValue.string) ?? .null]
            )
        case .homeRenamed(let name): return (.homeRenamed, ["name": .string(name)])
        default: return nil
        }
    }

    /// A change to the list of homes, on every home's event topic; a home's own rename is
    /// `home-renamed` without an id (`of(_:)`), as it always was: nil here.
    static func of(
        _ change: HomesChange, gatewayBase: String, currentHomeID: String?
    ) -> (GatewayEvent, [String: JSONValue])? {
        func describe(_ home: Home) -> JSONValue {
            .object([
                "id": .string(home.id), "name": .string(home.name),
                "base-topic": .string(home.baseTopic ?? gatewayBase),
            ])
        }
        switch change {
        case .added(let home):
            return (.homeAdded, ["home": describe(home)])
        case .removed(let home):
            return (.homeRemoved, ["home": describe(home)])
        case .renamed(let home, let oldName):
            guard home.id != currentHomeID else { return nil }
            return (.homeRenamed, ["home": describe(home), "name": .string(home.name), "old-name": .string(oldName)])
        case .primaryChanged(let home, let previous):
            return (.primaryHomeChanged, ["home": describe(home), "previous": describe(previous)])
        case .baseTopicChanged(let home, let old):
            return (.homeBaseTopicChanged, ["home": describe(home), "old-base-topic": .string(old ?? gatewayBase)])
        }
    }
}
