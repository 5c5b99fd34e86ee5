import Foundation
public import Gateway
import HomeModel
public import Logging
public import MQTT
public import ServiceLifecycle

/// The Homie v5 output: the gateway's published home as Homie devices, on a connection of its
/// own (a Homie root device's last will is its `$state` = `lost`, and a connection has one
/// will; the gateway's is its status). Values and structure come from `Gateway.observe()`;
/// a property's `set` is performed as the characteristic's `set` (`Gateway.perform`), so it is
/// checked and answered as one; a refused one is logged on the device's `$log/warn`.
public actor HomieOutput: Service {
    let gateway: Gateway
    let mqtt: any MQTTTransport
    let domain: String
    let rootID: String
    let logger: Logger

    /// What is on the broker: the devices as last published, and their description versions.
    var published: HomieDevices?
    /// The home as the gateway last described it; nil until the gateway is online.
    var current: GatewaySnapshot?
    var isConnected = false
    /// The set and description subscriptions are made; the client restores them itself after
    /// a reconnect.
    var isSubscribed = false
    /// A version is never reused: it starts from the clock, so it rises across restarts too.
    var nextVersion = Int(Date().timeIntervalSince1970 * 1000)

    /// The QoS of retained messages and sets: the gateway's (`broker.qos`, 1 by default). The
    /// convention recommends 2 but allows 1 for a whole network, and some brokers refuse 2
    /// (RabbitMQ closes the connection of a client that publishes at QoS 2). Momentary events
    /// (non-retained properties) go at QoS 0, as it says.
    let qos: MQTTQoS

    /// `mqtt` is the Homie connection, whose will `configuration(for:)` sets.
    public init(
        gateway: Gateway, mqtt: any MQTTTransport, config: HomieConfig, clientID: String, qos: MQTTQoS, logger: Logger
    ) {
        self.gateway = gateway
        self.qos = qos
        self.mqtt = mqtt
        self.domain = config.domain
        self.rootID = Self.rootID(config, clientID: clientID)
        self.logger = logger
    }

    public static func rootID(_ config: HomieConfig, clientID: String) -> String {
        config.deviceID ?? Slug.make(clientID, fallback: "homemqtt")
    }

    /// The Homie connection's settings: the gateway's broker, its own client id, a clean session
    /// (a set is momentary; one queued while the gateway was away is stale), and the will.
    public static func configuration(gateway: MQTTConfiguration, homie: HomieConfig) -> MQTTConfiguration {
        var mqtt = gateway
        mqtt.clientID = gateway.clientID + "-homie"
        mqtt.cleanStart = true
        mqtt.sessionExpiry = nil
        let root = rootID(homie, clientID: gateway.clientID)
        mqtt.will = MQTTWill(
            topic: "\(homie.domain)/5/\(root)/$state", payload: Array("lost".utf8), qos: .atLeastOnce, retain: true)
        return mqtt
    }

    public func run() async throws {
        let changes = await gateway.observe()
        let messages = mqtt.messages()
        let states = mqtt.connectionStates()
        // The home's changes and the connection's states are handled one at a time, in one
        // loop: a publication of the devices runs to its end before the next begins, so a
        // reconnect's republication and a structural change never interleave on the broker.
        let (ordered, feed) = AsyncStream<Input>.makeStream()
        await cancelWhenGracefulShutdown {
            await withDiscardingTaskGroup { group in
                group.addTask { for await change in changes { feed.yield(.change(change)) } }
                group.addTask { for await state in states { feed.yield(.connection(state)) } }
                group.addTask {
                    for await input in ordered {
                        switch input {
                        case .change(let change): await self.handle(change)
                        case .connection(let state): await self.handle(state)
                        }
                    }
                }
                // Sets wait for their answer: they run beside the publications, not behind them.
                group.addTask { for await message in messages { await self.handle(message) } }
            }
        }
        await stop()
    }

    enum Input: Sendable {
        case change(GatewayChange)
        case connection(MQTTConnectionState)
    }

    // MARK: Changes

    func handle(_ change: GatewayChange) async {
        switch change {
        case .snapshot(let snapshot):
            current = snapshot
            await publishChanges()
        case .value(let node, let value):
            current?.values[node.address] = node.isEvent ? nil : value
            guard isConnected, let published, let topic = published.topics[node.address],
                let property = published.properties[topic]
            else { return }
            await sendValue(value, property)
        case .event, .connection:
            break
        }
    }

    func handle(_ state: MQTTConnectionState) async {
        guard state.isConnected != isConnected else { return }
        isConnected = state.isConnected
        guard isConnected else { return }
        // `ready` says the set topics are subscribed: they come first.
        if !isSubscribed { await subscribe("\(domain)/5/+/+/+/set", qos) }
        // The will may have said `lost` meanwhile: every device is published again.
        await publishChanges(all: true)
        guard !isSubscribed else { return }
        // Descriptions left retained by an earlier run: those of ours the home no longer has
        // are cleared as they arrive (`clearIfGhost`), once `published` says what it has.
        await subscribe("\(domain)/5/+/$description", .atLeastOnce)
        isSubscribed = true
    }

    private func subscribe(_ filter: String, _ qos: MQTTQoS) async {
        do {
            try await mqtt.subscribe(filter, qos: qos)
        } catch {
            logger.error("Homie: cannot subscribe", metadata: ["filter": "\(filter)", "error": "\(error)"])
        }
    }

    /// Publishes what differs between the broker and the current home, in the convention's
    /// order: changed and new children (`init`, description, values, `ready`), then the root,
    /// then removed children, `$state` first.
    func publishChanges(all: Bool = false) async {
        guard isConnected, let current else { return }
        let name = "HomeMQTT"
        let next = HomieDevices(snapshot: current.tree, domain: domain, rootID: rootID, name: name)
        let old = published
        let oldChildren = Dictionary(old?.children.map { ($0.id, $0) } ?? [], uniquingKeysWith: { a, _ in a })
        for child in next.children {
            let before = oldChildren[child.id]
            if !all, let before, before.description == child.description {
                if before.isReachable != child.isReachable { await sendState(child) }
                continue
            }
            await publishDevice(child, in: next, clearing: before?.propertyTopics ?? [])
        }
        if all || old?.root.description != next.root.description {
            await publishDevice(next.root, in: next, clearing: [])
        }
        let remaining = Set(next.children.map(\.id))
        for child in old?.children ?? [] where !remaining.contains(child.id) {
            await clear(next.deviceTopic(child.id), properties: child.propertyTopics)
        }
        published = next
    }

    /// A device removed: `$state` first (it then no longer exists), then the rest.
    private func clear(_ deviceTopic: String, properties: [String]) async {
        await send(deviceTopic + "/$state", [])
        await send(deviceTopic + "/$description", [])
        for property in properties { await send(property, []) }
    }

    private func publishDevice(_ device: HomieDevices.Device, in devices: HomieDevices, clearing: [String]) async {
        let topic = devices.deviceTopic(device.id)
        await send(topic + "/$state", Array("init".utf8))
        var description = device.description
        description["version"] = .int(Int64(nextVersion))
        nextVersion += 1
        await send(topic + "/$description", JSONValue.object(description).encodedUTF8(), json: true)
        let now = Set(device.propertyTopics)
        for stale in clearing where !now.contains(stale) { await send(stale, []) }
        for propertyTopic in device.propertyTopics {
            guard let property = devices.properties[propertyTopic], property.isRetained,
                let value = current?.values[property.node.address]
            else { continue }
            await sendValue(value, property)
        }
        await sendState(device)
    }

    private func sendState(_ device: HomieDevices.Device) async {
        await send("\(domain)/5/\(device.id)/$state", Array((device.isReachable ? "ready" : "lost").utf8))
    }

    private func sendValue(_ value: CharacteristicValue, _ property: HomieDevices.Property) async {
        let payload = HomieDevices.payload(value, property)
        if property.isRetained {
            await send(property.topic, payload)
        } else {
            await send(property.topic, payload, retain: false, qos: .atMostOnce)
        }
    }

    /// Sends in order without waiting for each acknowledgement unless the client's window is
    /// full. Not connected: dropped, since a new connection publishes everything again.
    private func send(
        _ topic: String, _ payload: [UInt8], retain: Bool = true, qos: MQTTQoS? = nil, json: Bool = false
    ) async {
        let qos = qos ?? self.qos
        var properties = MQTTPublishProperties()
        if !payload.isEmpty {
            properties = MQTTPublishProperties(contentType: json ? "application/json" : nil, isUTF8Text: true)
        }
        do throws(MQTTError) {
            if try !mqtt.publishWithoutWaiting(
                topic, payload: payload, qos: qos, retain: retain, properties: properties)
            {
                try await mqtt.publish(topic, payload: payload, qos: qos, retain: retain, properties: properties)
            }
        } catch {
            logger.debug("Homie: not published", metadata: ["topic": "\(topic)", "error": "\(error)"])
        }
    }

    // MARK: Sets

    func handle(_ message: MQTTMessage) async {
        if message.topic.hasSuffix("/$description") {
            await clearIfGhost(message)
            return
        }
        guard let published, message.topic.hasSuffix("/set") else { return }
        let propertyTopic = String(message.topic.dropLast("/set".count))
        guard let property = published.properties[propertyTopic] else {
            // Another Homie device's set, or one of ours that is gone: only ours get an answer.
            let levels = message.topic.split(separator: "/")
            if levels.count == 6, published.children.contains(where: { $0.id == levels[2] }) {
                await log(String(levels[2]), "no property \(levels[3])/\(levels[4])")
            }
            return
        }
        let deviceID = String(propertyTopic.split(separator: "/")[2])
        if message.retain {
            // A retained command would run again at every reconnect; the convention forbids it.
            if !message.payload.isEmpty { await log(deviceID, "a retained set is not applied: \(message.topic)") }
            return
        }
        // The payload is read as the topic dialect reads a `set` (the same text), then written.
        let outcome: GatewayOutcome
        switch Gateway.parseSet(HomieDevices.setPayload(message.payload), node: property.node) {
        case .success(let (value, _)):
            outcome = await gateway.perform(
                .write(property.node.address, value), label: property.node.topic + "/result")
        case .failure(let failure): outcome = .failure(failure)
        }
        guard case .failure(let failure) = outcome else { return }
        await log(
            deviceID,
            "set \(property.node.serviceTopic.split(separator: "/").last ?? "")/\(property.node.slug) refused: \(failure.code.rawValue): \(failure.message)"
        )
        // The controller may show the value it asked for: the one that holds is said again.
        if let value = current?.values[property.node.address], property.isRetained {
            await sendValue(value, property)
        }
    }

    /// A retained description of a child of ours that the home no longer has (removed while the
    /// gateway was not running) is cleared with its device.
    private func clearIfGhost(_ message: MQTTMessage) async {
        guard message.retain, !message.payload.isEmpty, let published,
            let description = try? JSONValue(parsing: message.payload),
            description.objectValue?["root"]?.stringValue == rootID
        else { return }
        let deviceTopic = String(message.topic.dropLast("/$description".count))
        let id = deviceTopic.split(separator: "/").last.map(String.init) ?? ""
        guard !published.children.contains(where: { $0.id == id }) else { return }
        logger.info("Homie: clearing a device no longer in the home", metadata: ["device": "\(id)"])
        await clear(deviceTopic, properties: HomieDevices.propertyTopics(in: description, deviceTopic: deviceTopic))
    }

    private func log(_ deviceID: String, _ text: String) async {
        await send("\(domain)/5/\(deviceID)/$log/warn", Array(text.utf8), retain: false, qos: .atMostOnce)
    }

    // MARK: Stop

    /// Every device says `disconnected`, the root last, before the connection closes cleanly
    /// (the client is stopped after this service).
    func stop() async {
        guard isConnected, let published else { return }
        for child in published.children {
            await send(published.deviceTopic(child.id) + "/$state", Array("disconnected".utf8))
        }
        // Awaited: its acknowledgement comes after those sent before it.
        try? await mqtt.publish(
            published.deviceTopic(rootID) + "/$state", payload: Array("disconnected".utf8), qos: qos, retain: true)
    }
}
