import Foundation
import HomeModel
import MQTT

// One JSON document per accessory, as Node-RED flows and zigbee2mqtt users expect:
// `<accessory>/$state` (retained, every readable value by service and characteristic, one
// message per burst of changes) and `<accessory>/$set` (several characteristics at once,
// answered on `$result` with one entry each).

/// A `$set` in flight: its characteristics' answers, gathered until the last one.
struct AccessorySet: Sendable {
    /// Where one characteristic's answer goes in the whole.
    struct Part: Sendable {
        var token: Int
        var service: String
        var characteristic: String
    }

    var id: JSONValue
    var topic: String
    var reply: Gateway.Reply?
    var remaining: Int
    var results: [String: [String: JSONValue]] = [:]
}

extension Gateway {
    /// A burst ends when no change came for this long; its `$state` documents then go out.
    static let accessoryStateQuiet = Duration.milliseconds(10)
    /// A burst that never pauses is published after this long all the same.
    static let accessoryStateLongest = Duration.milliseconds(100)

    /// `{"<service>": {"<characteristic>": value, …}, …}` of every in-scope characteristic
    /// with a value; a button's press is an event and is not in it.
    func accessoryState(_ node: TopicTree.AccessoryNode) -> JSONValue {
        var services: [String: JSONValue] = [:]
        for service in node.services {
            var values: [String: JSONValue] = [:]
            for c in service.characteristics where !c.isEvent {
                if let value = currentValue(c.address) {
                    values[c.slug] = ValueCodec.json(ValueCodec.rounded(value, metadata: c.characteristic.metadata))
                }
            }
            if !values.isEmpty { services[service.slug] = .object(values) }
        }
        return .object(services)
    }

    func accessoryStateTopic(_ node: TopicTree.AccessoryNode) -> String { node.topic + "/$state" }

    /// A value of `accessoryID` changed: its `$state` goes out with the others of the burst.
    func accessoryStateChanged(_ accessoryID: String) {
        guard config[AccessoryStateConfig.self].enabled, isStarted else { return }
        dirtyAccessoryStates.insert(accessoryID)
        let now = ContinuousClock.now
        guard let burst = accessoryStateBurst else {
            accessoryStateBurst = (now, now)
            accessoryStateBursts.yield()
            return
        }
        accessoryStateBurst = (burst.first, now)
    }

    /// Waits for the burst begun to pause (or to last `accessoryStateLongest`), then publishes
    /// it; run by a child of `serve` for each burst. Cancelled (the gateway stopping), it
    /// publishes at once, before `offline`.
    func publishAccessoryStatesWhenQuiet() async {
        while let burst = accessoryStateBurst, !Task.isCancelled {
            let quietAt = burst.last + Self.accessoryStateQuiet
            let latest = burst.first + Self.accessoryStateLongest
            let now = ContinuousClock.now
            if now >= quietAt || now >= latest { break }
            try? await Task.sleep(until: min(quietAt, latest))
        }
        accessoryStateBurst = nil
        publishAccessoryStates()
    }

    func publishAccessoryStates() {
        let ids = dirtyAccessoryStates
        dirtyAccessoryStates = []
        for id in ids {
            guard let node = publishedTree.accessory(id: id) else { continue }
            setRetained(accessoryStateTopic(node), Array(accessoryState(node).encoded().utf8))
        }
    }

    /// `{"<service>": {"<characteristic>": value}}` on `<accessory>/$set`: each characteristic
    /// checked as a `set` is and written through its accessory's worker; one `$result` answers
    /// all, with an entry for each.
    func accessorySet(_ accessory: TopicTree.AccessoryNode, message: MQTTMessage) {
        let resultTopic = accessory.topic + "/$result"
        let id = Self.requestID(message.payload)
        let reply = Reply(message)
        if refuseRetained(message, resultTopic: resultTopic, op: "set", id: id) { return }
        let fail = { (failure: GatewayFailure) in
            self.sendResult(resultTopic, op: "set", id: id, .failure(failure), reply: reply)
        }
        guard case .object(let document)? = try? JSONValue(parsing: message.payload) else {
            fail(GatewayFailure(code: .invalidJSON, message: #"expected {"<service>": {"<characteristic>": value}}"#))
            return
        }
        var writes:
            [(
                service: String, key: String, node: TopicTree.CharacteristicNode?,
                Result<CharacteristicValue, GatewayFailure>
            )] = []
        for (serviceKey, fields) in document.sorted(by: { $0.key < $1.key }) where serviceKey != "id" {
            guard case .object(let values) = fields else {
                fail(GatewayFailure(code: .invalidField, message: "\(serviceKey) must be an object of characteristics"))
                return
            }
            let service: TopicTree.ServiceNode
            do throws(GatewayFailure) { service = try accessory.service(named: serviceKey) } catch {
                fail(error)
                return
            }
            for (key, raw) in values.sorted(by: { $0.key < $1.key }) {
                guard let node = service.characteristics.first(where: { $0.slug == key || $0.typeName == key }) else {
                    let failure = GatewayFailure(
                        code: .unknownField, message: "\(service.slug) has no characteristic '\(key)'")
                    writes.append((service.slug, key, nil, .failure(failure)))
                    continue
                }
                writes.append((service.slug, node.slug, node, checkedValue(raw, node)))
            }
        }
        guard !writes.isEmpty else {
            fail(GatewayFailure(code: .empty, message: "the $set names no characteristic"))
            return
        }
        let token = nextAccessorySet
        nextAccessorySet += 1
        accessorySets[token] = AccessorySet(id: id, topic: resultTopic, reply: reply, remaining: writes.count)
        for (service, key, node, checked) in writes {
            let part = AccessorySet.Part(token: token, service: service, characteristic: key)
            guard let node, case .success(let value) = checked else {
                if case .failure(let failure) = checked { record(part, .failure(failure)) }
                continue
            }
            dispatch(
                Job(
                    kind: .set(value), op: "set", id: id, node: node, accessoryID: accessory.id,
                    resultTopic: resultTopic, reply: nil, part: part))
        }
    }

    /// A value for `node` from JSON, by the same rules as a JSON `set`.
    private func checkedValue(_ raw: JSONValue, _ node: TopicTree.CharacteristicNode) -> Result<
        CharacteristicValue, GatewayFailure
    > {
        if node.isReadOnlyScope {
            return .failure(
                GatewayFailure(code: .readOnlyScope, message: "\(node.typeName) is read-only by the gateway's scope"))
        }
        do throws(ModelError) {
            let metadata = ValueCodec.withStandardBounds(node.characteristic.metadata, type: node.characteristic.type)
            try ValueCodec.checkWritable(metadata, label: node.typeName)
            return .success(try ValueCodec.parse(json: raw, metadata: metadata, label: node.typeName))
        } catch {
            return .failure(GatewayFailure(error))
        }
    }

    /// One characteristic's answer; the last one sends the whole `$result`.
    func record(_ part: AccessorySet.Part, _ outcome: Result<CharacteristicValue?, GatewayFailure>) {
        guard var set = accessorySets[part.token] else { return }
        let entry: JSONValue =
            switch outcome {
            case .success(let value): Payloads.result(id: .null, op: "set", value: value)
            case .failure(let failure): Payloads.error(id: .null, op: "set", failure)
            }
        var fields = entry.objectValue ?? [:]
        fields["id"] = nil
        fields["op"] = nil
        set.results[part.service, default: [:]][part.characteristic] = .object(fields)
        set.remaining -= 1
        guard set.remaining == 0 else {
            accessorySets[part.token] = set
            return
        }
        accessorySets[part.token] = nil
        let allOK = set.results.values.allSatisfy { $0.values.allSatisfy { $0["status"] == "ok" } }
        if !allOK { counters.errors += 1 }
        answer(
            set.topic,
            json: .object([
                "id": set.id, "op": "set", "status": allOK ? "ok" : "error",
                "results": .object(set.results.mapValues { .object($0) }),
            ]), reply: set.reply)
    }
}
