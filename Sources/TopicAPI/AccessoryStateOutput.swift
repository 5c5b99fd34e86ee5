public import Gateway
import HomeModel
public import MQTT

/// One JSON document per accessory, as Node-RED flows and zigbee2mqtt users expect:
/// `<accessory>/$state` (retained, every readable value by service and characteristic, one
/// message per burst of changes) and `<accessory>/$set` (several characteristics at once,
/// answered on `$result` with one entry each). Turned off (`accessory-state: false`) it publishes
/// and serves nothing, but `$state` stays a level of the gateway's: never a request, and an
/// earlier run's documents are cleared.
public final class AccessoryStateOutput: GatewayOutput {
    /// A burst ends when no change came for this long; its `$state` documents then go out.
    static let quiet = Duration.milliseconds(10)
    /// A burst that never pauses is published after this long all the same.
    static let longest = Duration.milliseconds(100)
    /// While the broker is behind (messages wait in the outbox), a burst keeps gathering until
    /// they have gone, up to this long: a document is the latest of its values, and one sent
    /// behind a queue would be replaced before a subscriber saw it. Under a flood of changes
    /// each accessory's `$state` then goes out about once a second instead of ten times, and
    /// the broker's capacity is left to the `state` messages, none of which is dropped.
    static let longestWhileBehind = Duration.seconds(1)

    /// The burst being gathered: one stored property, so that a change is one access to it
    /// (each access to a class's stored property is an exclusivity check, ~80 instructions).
    private var gathering = Gathering()
    /// The start of each burst, for `run`, which publishes it once quiet.
    private let bursts: AsyncStream<Void>.Continuation
    private let burstStream: AsyncStream<Void>

    /// Whether it publishes `$state` and serves `$set`.
    let enabled: Bool

    /// The colour mode of each light with colour temperature and hue/saturation (`$color-mode`).
    private var colorModes = ColorModes()
    /// Whether a pass has begun: the earlier run's documents are for the first one only.
    private var passed = false

    public init(enabled: Bool = true) {
        self.enabled = enabled
        (burstStream, bursts) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    public var accessoryDocuments: [String] { enabled ? ["$state"] : [] }

    public var earlierDocuments: [String] { ["$state"] }

    public func requestFilters(_ gateway: isolated Gateway) -> [String] {
        enabled ? ["\(gateway.baseTopic)/+/+/$set"] : []
    }

    public func publishDocuments(of node: TopicTree.AccessoryNode, _ gateway: isolated Gateway) -> [String] {
        guard enabled else { return [] }
        let topic = node.topic + "/$state"
        gateway.publishRetained(topic, document(node, gateway).encodedUTF8())
        return [topic]
    }

    public func republication(of node: TopicTree.AccessoryNode, _ gateway: isolated Gateway) -> [(String, [UInt8])] {
        guard enabled else { return [] }
        return [(node.topic + "/$state", document(node, gateway).encodedUTF8())]
    }

    /// The `$state` documents an earlier run left: the colour modes they said (`ColorModes`).
    public func readEarlier(_ message: MQTTMessage, _ gateway: isolated Gateway) {
        guard enabled, message.topic.hasSuffix("/$state"), let document = try? JSONValue(parsing: message.payload)
        else { return }
        colorModes.readEarlier(accessoryTopic: String(message.topic.dropLast("/$state".count)), document: document)
    }

    public func beginPass(over tree: TopicTree, republishing: Bool, _ gateway: isolated Gateway) {
        guard !republishing else { return }
        colorModes.keep(only: Set(tree.accessories.map(\.id)), earlier: !passed)
        passed = true
    }

    /// `{"<service>": {"<characteristic>": value, …}, …}` of every in-scope characteristic
    /// with a value; a button's press is an event and is not in it. A light with colour
    /// temperature and hue/saturation also says which it shows (`$color-mode`).
    func document(_ node: TopicTree.AccessoryNode, _ gateway: isolated Gateway) -> JSONValue {
        var services: [String: JSONValue] = [:]
        for service in node.services {
            var values: [String: JSONValue] = [:]
            for c in service.characteristics where !c.isEvent {
                if let value = gateway.value(of: c.address) {
                    values[c.slug] = ValueCodec.json(ValueCodec.rounded(value, metadata: c.characteristic.metadata))
                }
            }
            if let mode = colorModes.mode(service, of: node, values: values) {
                values[ColorModes.field] = .string(mode.rawValue)
            }
            if !values.isEmpty { services[service.slug] = .object(values) }
        }
        return .object(services)
    }

    /// A value of the accessory changed: its `$state` goes out with the others of the burst.
    public func valueChanged(accessoryID: String, _ gateway: isolated Gateway) {
        guard enabled else { return }
        if gathering.note(accessoryID, at: gateway.clock.now) { bursts.yield() }
    }

    /// Each burst: waits for it to pause (or to last `longest`), and for the outbox to empty
    /// (or the burst to last `longestWhileBehind`), then publishes it. Cancelled (the gateway
    /// stopping), it publishes what it holds at once, before `offline`.
    public func run(_ gateway: isolated Gateway) async {
        for await _ in burstStream {
            while let burst = gathering.burst, !Task.isCancelled {
                let due = min(burst.last + Self.quiet, burst.first + Self.longest)
                let now = gateway.clock.now
                if now < due {
                    try? await gateway.clock.sleep(until: due)
                    continue
                }
                guard gateway.outboxBacklog > 0, now < burst.first + Self.longestWhileBehind else { break }
                // Only while a burst waits on a backlog: an idle gateway never wakes here.
                try? await gateway.clock.sleep(for: Self.quiet)
            }
            publishDirty(gateway)
        }
        publishDirty(gateway)
    }

    private func publishDirty(_ gateway: isolated Gateway) {
        for id in gathering.take() {
            guard let node = gateway.publishedTopicTree.accessory(id: id) else { continue }
            gateway.publishRetained(node.topic + "/$state", document(node, gateway).encodedUTF8())
        }
    }

    /// `{"<service>": {"<characteristic>": value}}` on `<accessory>/$set`, written as one.
    public func handle(_ message: IncomingMessage, _ gateway: isolated Gateway) -> Bool {
        guard enabled, message.topic.hasSuffix("/$set"), message.topic.hasPrefix(gateway.baseTopic + "/") else {
            return false
        }
        let path = String(message.topic.dropLast("/$set".count))
        guard let accessory = gateway.tree.accessories.first(where: { $0.topic == path }) else {
            gateway.reportUnknown(
                message, "no accessory at '\(path)'",
                result: gateway.servedDepth(path, 2) ? (path + "/$result", "set") : nil)
            return true
        }
        set(accessory, message: message, gateway)
        return true
    }

    private func set(_ accessory: TopicTree.AccessoryNode, message: IncomingMessage, _ gateway: isolated Gateway) {
        let resultTopic = accessory.topic + "/$result"
        let id = Gateway.requestID(message.payload)
        if gateway.refuseRetained(message, resultTopic: resultTopic, op: "set", id: id) { return }
        func fail(_ failure: GatewayFailure) {
            gateway.refuse(resultTopic, op: "set", id: id, failure, reply: message.reply)
        }
        guard case .object(let document)? = try? JSONValue(parsing: message.payload) else {
            fail(GatewayFailure(code: .invalidJSON, message: #"expected {"<service>": {"<characteristic>": value}}"#))
            return
        }
        var writes: [CharacteristicWrite] = []
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
                    writes.append(
                        .init(service: service.slug, characteristic: key, address: nil, value: .failure(failure)))
                    continue
                }
                writes.append(
                    .init(
                        service: service.slug, characteristic: node.slug, address: node.address,
                        value: Gateway.checkedValue(raw, node)))
            }
        }
        gateway.submit(
            .writeMany(accessoryID: accessory.id, writes), answering: message, on: resultTopic, op: "set", id: id)
    }
}

/// Which accessories' `$state` changed since it was last published, and when the burst of
/// their changes began and last had one: published together a moment after the first change,
/// so a burst gives one message each.
private struct Gathering {
    private(set) var dirty: Set<String> = []
    /// When the burst began and when its latest change came, as durations since `origin`: a
    /// `ContinuousClock.Instant` is a resilient type (not `@frozen`), and a pair of them kept
    /// here was copied through value witnesses at each change (~300 instructions); a `Duration`
    /// has a known layout.
    private var times: (first: Duration, last: Duration)?
    /// The accessory last noted: a burst mostly brings several changes of one accessory in a
    /// row, which then cost a comparison instead of hashing its id into `dirty` again.
    private var last: String?
    /// Any instant will do (the manual clock of tests counts from its own start): only
    /// differences are kept.
    private static let origin = ContinuousClock.Instant.now

    /// The burst being gathered: when it began and when its latest change came.
    var burst: (first: ContinuousClock.Instant, last: ContinuousClock.Instant)? {
        times.map { (Self.origin + $0.first, Self.origin + $0.last) }
    }

    /// Notes a change of `accessoryID` at `now`; true when it begins a burst.
    mutating func note(_ accessoryID: String, at now: ContinuousClock.Instant) -> Bool {
        if accessoryID != last {
            dirty.insert(accessoryID)
            last = accessoryID
        }
        let since = Self.origin.duration(to: now)
        guard times != nil else {
            times = (since, since)
            return true
        }
        times?.last = since
        return false
    }

    /// The accessories of the burst, which ends.
    mutating func take() -> Set<String> {
        defer { (dirty, times, last) = ([], nil, nil) }
        return dirty
    }
}
