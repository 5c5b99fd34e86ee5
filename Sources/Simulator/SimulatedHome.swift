import Foundation
public import HomeModel
import ServiceLifecycle

/// A home of simulated accessories that act like real ones: doors travel, locks settle,
/// thermostats heat, sensors drift, accessories drop off the network and come back.
///
/// Everything a controller can observe goes through `AccessorySource`: values change by
/// writes and by behaviours, and a change is reported as `.valueUpdated` only for addresses
/// whose notifications are enabled — the same contract a HAP accessory keeps, so the gateway's
/// "notifications only in scope" can be observed here.
public actor SimulatedHome: AccessorySource {
    public nonisolated let sourceName = "simulator"
    public nonisolated let clock: SimulatorClock

    /// How long a write takes before the accessory answers (real time, also with the manual
    /// clock, because it exists for testing controller timeouts).
    public private(set) var writeDelay: Duration = .zero

    private var accessoryList: [Accessory]
    /// Where each accessory is in `accessoryList`, made again after an accessory comes or goes:
    /// every read, write and notification finds its accessory by id, and searching the list
    /// for it cost a thousand comparisons each in a home of 1,000 accessories.
    private var positions: [String: Int]?
    private var engines: [EngineKey: any BehaviourEngine] = [:]
    private var pending: [PendingStep] = []
    private var nextSequence = 0
    private var notifying: Set<CharacteristicAddress> = []
    private var identifyLog: [String] = []
    private let hub: EventHub<SourceEvent>

    /// Seconds of simulated time: wall time since `epoch` (system clock) plus everything
    /// `advance(by:)` added.
    private let epoch = ContinuousClock.now
    private var offset = 0.0
    private var now = 0.0

    struct EngineKey: Hashable {
        var accessoryID: String
        var serviceIID: UInt64
        var index: Int
    }

    struct PendingStep {
        var due: Double
        var sequence: Int
        var key: EngineKey
        var tag: Int
    }

    /// - Parameters:
    ///   - behaviours: explicit behaviours. A service without an explicit device behaviour
    ///     (anything but drift and script) gets the automatic one for its type when
    ///     `automaticBehaviours` is true.
    public init(
        accessories: [Accessory],
        behaviours: [ServiceBehaviour] = [],
        automaticBehaviours: Bool = true,
        clock: SimulatorClock = .system,
        hub: EventHub<SourceEvent> = EventHub()
    ) {
        self.clock = clock
        self.hub = hub
        self.accessoryList = accessories
        // Engines are installed here rather than by calling an isolated method, which an
        // initializer may not do before all stored properties are set.
        var engines: [EngineKey: any BehaviourEngine] = [:]
        var steps: [PendingStep] = []
        var sequence = 0
        var values = accessories
        // Grouped once: filtering the whole list for each service cost services × behaviours,
        // ten seconds for a home of 10,000 accessory files.
        var explicit: [ServiceKey: [ServiceBehaviour]] = [:]
        for behaviour in behaviours {
            explicit[ServiceKey(accessoryID: behaviour.accessoryID, serviceIID: behaviour.serviceIID), default: []].append(behaviour)
        }
        for (ai, accessory) in accessories.enumerated() {
            for (si, service) in accessory.services.enumerated() {
                let mine = explicit[ServiceKey(accessoryID: accessory.id, serviceIID: service.iid)] ?? []
                let kinds = Self.kinds(for: service, accessoryID: accessory.id, explicit: mine, automatic: automaticBehaviours)
                for (index, kind) in kinds.enumerated() {
                    guard var engine = makeEngine(kind) else { continue }
                    let key = EngineKey(accessoryID: accessory.id, serviceIID: service.iid, index: index)
                    var ctx = BehaviourContext(now: 0, service: values[ai].services[si])
                    engine.start(&ctx)
                    values[ai].services[si] = ctx.service
                    for op in ctx.timerOps {
                        switch op {
                        case .schedule(let tag, let after):
                            sequence += 1
                            steps.append(PendingStep(due: after, sequence: sequence, key: key, tag: tag))
                        case .cancel(let tag):
                            steps.removeAll { $0.key == key && $0.tag == tag }
                        }
                    }
                    engines[key] = engine
                }
            }
        }
        self.accessoryList = values
        self.engines = engines
        self.pending = steps
        self.nextSequence = sequence
    }

    private struct ServiceKey: Hashable {
        var accessoryID: String
        var serviceIID: UInt64
    }

    static func kinds(for service: AccessoryService, accessoryID: String, explicit: [ServiceBehaviour], automatic: Bool) -> [BehaviourKind] {
        let mine = explicit.filter { $0.accessoryID == accessoryID && $0.serviceIID == service.iid }.map(\.kind)
        if mine.contains(where: \.isDevice) || !automatic { return mine }
        return [ServiceBehaviour.automatic(forServiceType: service.type)] + mine
    }

    // MARK: AccessorySource

    public func accessories() async -> [Accessory] {
        catchUp()
        return accessoryList
    }

    public nonisolated func events() -> AsyncStream<SourceEvent> { hub.subscribe() }

    public func read(_ address: CharacteristicAddress) async throws(AccessoryError) -> CharacteristicValue {
        catchUp()
        let (ai, si, ci) = try locate(address)
        try requireReachable(ai)
        let c = accessoryList[ai].services[si].characteristics[ci]
        guard c.metadata.permissions.contains(.read) else {
            throw AccessoryError(.writeOnly, "\(label(ai, si, ci)) cannot be read")
        }
        let value = c.value ?? Self.emptyValue(for: c.metadata)
        // The protocol reports what a read learns as an event; with notifications on, every
        // change has been reported already.
        if !notifying.contains(address) { hub.yield(.valueUpdated(address, value)) }
        return value
    }

    public func write(_ address: CharacteristicAddress, value: CharacteristicValue) async throws(AccessoryError) {
        if writeDelay > .zero {
            // Cancellation only shortens the delay; the write still answers.
            try? await Task.sleep(for: writeDelay)
        }
        catchUp()
        let (ai, si, ci) = try locate(address)
        try requireReachable(ai)
        let c = accessoryList[ai].services[si].characteristics[ci]
        guard c.metadata.permissions.contains(.write) else {
            throw AccessoryError(.readOnly, "\(label(ai, si, ci)) is read-only")
        }
        let checked: CharacteristicValue
        do {
            checked = try ValueCodec.validate(value, metadata: c.metadata, label: label(ai, si, ci))
        } catch {
            throw AccessoryError(.invalidValue, error.message)
        }
        if c.type == HAPType.identify { identifyLog.append(accessoryList[ai].id) }
        // Write-only characteristics (identify, control points) have no state to keep.
        if c.metadata.permissions.contains(.read) {
            store(checked, ai, si, ci, reportAlways: !notifying.contains(address))
        }
        let serviceIID = accessoryList[ai].services[si].iid
        for key in engineKeys(accessoryList[ai].id, serviceIID) {
            runEngine(key) { engine, ctx in engine.didWrite(c.type, &ctx) }
        }
        // Steps due right away (a lock with no delay) complete with the write.
        process(until: now)
    }

    public func setNotifications(enabled: Bool, for addresses: [CharacteristicAddress]) async -> [CharacteristicAddress: AccessoryError] {
        catchUp()
        var failures: [CharacteristicAddress: AccessoryError] = [:]
        for address in addresses {
            do throws(AccessoryError) {
                let (ai, si, ci) = try locate(address)
                try requireReachable(ai)
                guard accessoryList[ai].services[si].characteristics[ci].metadata.permissions.contains(.notify) else {
                    throw AccessoryError(.notificationNotSupported, "\(label(ai, si, ci)) does not send notifications")
                }
                if enabled { notifying.insert(address) } else { notifying.remove(address) }
            } catch {
                failures[address] = error
            }
        }
        return failures
    }

    public func identify(accessoryID: String) async throws(AccessoryError) {
        guard let ai = index(of: accessoryID) else {
            throw AccessoryError(.doesNotExist, "no accessory \(accessoryID)")
        }
        try requireReachable(ai)
        identifyLog.append(accessoryID)
    }

    /// Drives behaviours in real time until cancellation or graceful shutdown. With the manual
    /// clock it only waits: time moves by `advance(by:)`.
    public func run() async throws {
        let tick = clock.tick
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                try await Task.sleep(for: tick)
                await self.catchUp()
            }
        }
        hub.finish()
    }

    // MARK: Test and structure controls

    /// Moves simulated time forward, running every behaviour step that falls due, in order.
    public func advance(by seconds: Double) async {
        guard seconds > 0 else { return }
        offset += seconds
        catchUp()
    }

    /// Seconds of simulated time since the home was created.
    public func currentTime() -> Double {
        catchUp()
        return now
    }

    public func setWriteDelay(_ delay: Duration) { writeDelay = delay }

    /// Takes an accessory off the network or brings it back. A bridge takes its bridged
    /// accessories with it.
    @discardableResult
    public func setReachable(_ accessoryID: String, _ reachable: Bool) -> Bool {
        guard let ai = index(of: accessoryID) else { return false }
        catchUp()
        let affected = [ai] + accessoryList.indices.filter { accessoryList[$0].bridgeID == accessoryID }
        for i in affected where accessoryList[i].isReachable != reachable {
            accessoryList[i].isReachable = reachable
            hub.yield(.reachabilityChanged(id: accessoryList[i].id, isReachable: reachable))
        }
        return true
    }

    /// Something blocks the door (or stops blocking it). A moving door stops; a cleared
    /// obstruction lets the next target write move it again. Returns false if the accessory
    /// has nothing that can be obstructed.
    @discardableResult
    public func triggerObstruction(_ accessoryID: String, _ obstructed: Bool = true) -> Bool {
        guard let ai = index(of: accessoryID) else { return false }
        catchUp()
        var handled = false
        for key in engines.keys.filter({ $0.accessoryID == accessoryID }).sorted(by: Self.keyOrder) {
            runEngine(key) { engine, ctx in
                if engine.setObstructed(obstructed, &ctx) { handled = true }
            }
        }
        if !handled {
            // No door behaviour: flip any obstruction sensor the accessory has.
            for (si, service) in accessoryList[ai].services.enumerated() {
                if let ci = service.characteristics.firstIndex(where: { $0.type == HAPType.obstructionDetected }) {
                    store(.bool(obstructed), ai, si, ci)
                    handled = true
                }
            }
        }
        process(until: now)
        return handled
    }

    /// Changes a value from the device side (a button pressed on the accessory): no write
    /// permission needed, but the value must suit the characteristic.
    public func setValue(_ address: CharacteristicAddress, _ value: CharacteristicValue) throws(AccessoryError) {
        catchUp()
        let (ai, si, ci) = try locate(address)
        let c = accessoryList[ai].services[si].characteristics[ci]
        do {
            let checked = try ValueCodec.validate(value, metadata: c.metadata, label: label(ai, si, ci))
            store(checked, ai, si, ci)
        } catch {
            throw AccessoryError(.invalidValue, error.message)
        }
        let serviceIID = accessoryList[ai].services[si].iid
        for key in engineKeys(accessoryList[ai].id, serviceIID) {
            runEngine(key) { engine, ctx in engine.didWrite(c.type, &ctx) }
        }
        process(until: now)
    }

    /// The stored value, whatever the accessory's reachability (for tests).
    public func value(_ address: CharacteristicAddress) -> CharacteristicValue? {
        catchUp()
        guard let (ai, si, ci) = try? locate(address) else { return nil }
        return accessoryList[ai].services[si].characteristics[ci].value
    }

    public func notificationsEnabled() -> Set<CharacteristicAddress> { notifying }

    /// Puts an event into the streams as if it happened (tests use it as a marker).
    func emit(_ event: SourceEvent) { hub.yield(event) }

    /// Accessory ids in the order identify requests arrived.
    public func identifyRequests() -> [String] { identifyLog }

    /// Adds an accessory (or replaces one with the same id, reported as a change).
    public func add(_ accessory: Accessory, behaviours: [ServiceBehaviour] = [], automaticBehaviours: Bool = true) {
        catchUp()
        let replaced = index(of: accessory.id) != nil
        if replaced { dropState(of: accessory.id) }
        if let ai = index(of: accessory.id) {
            accessoryList[ai] = accessory
        } else {
            accessoryList.append(accessory)
            positions = nil
        }
        for service in accessory.services {
            let kinds = Self.kinds(for: service, accessoryID: accessory.id, explicit: behaviours, automatic: automaticBehaviours)
            for (index, kind) in kinds.enumerated() {
                guard let engine = makeEngine(kind) else { continue }
                let key = EngineKey(accessoryID: accessory.id, serviceIID: service.iid, index: index)
                engines[key] = engine
                runEngine(key) { engine, ctx in engine.start(&ctx) }
            }
        }
        guard let ai = index(of: accessory.id) else { return }
        hub.yield(replaced ? .accessoryChanged(accessoryList[ai]) : .accessoryAdded(accessoryList[ai]))
    }

    /// Removes an accessory; removing a bridge removes its bridged accessories too.
    @discardableResult
    public func remove(accessoryID: String) -> Bool {
        guard index(of: accessoryID) != nil else { return false }
        catchUp()
        let ids = [accessoryID] + accessoryList.filter { $0.bridgeID == accessoryID }.map(\.id)
        for id in ids {
            dropState(of: id)
            accessoryList.removeAll { $0.id == id }
            positions = nil
            hub.yield(.accessoryRemoved(id: id))
        }
        return true
    }

    /// Renames an accessory as its owner would in its app: the name and the accessory
    /// information's Name characteristic change together.
    @discardableResult
    public func rename(accessoryID: String, to name: String) -> Bool {
        guard let ai = index(of: accessoryID) else { return false }
        accessoryList[ai].name = name
        for si in accessoryList[ai].services.indices where accessoryList[ai].services[si].type == StandardUUID.accessoryInformation {
            for ci in accessoryList[ai].services[si].characteristics.indices
            where accessoryList[ai].services[si].characteristics[ci].type == StandardUUID.name {
                accessoryList[ai].services[si].characteristics[ci].value = .string(name)
            }
        }
        hub.yield(.accessoryChanged(accessoryList[ai]))
        return true
    }

    // MARK: Time

    private func catchUp() {
        let wall: Double
        switch clock.kind {
        case .manual: wall = offset
        case .system:
            let elapsed = ContinuousClock.now - epoch
            wall = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18 + offset
        }
        process(until: wall)
    }

    /// Runs due steps in time order (ties in the order they were scheduled), so the same
    /// writes and the same `advance` calls always give the same events.
    private func process(until target: Double) {
        while let next = pending.indices.min(by: { (pending[$0].due, pending[$0].sequence) < (pending[$1].due, pending[$1].sequence) }),
              pending[next].due <= target + 1e-9 {
            let step = pending.remove(at: next)
            now = max(now, step.due)
            runEngine(step.key) { engine, ctx in engine.fire(tag: step.tag, &ctx) }
        }
        now = max(now, target)
    }

    // MARK: Internals

    private static func keyOrder(_ a: EngineKey, _ b: EngineKey) -> Bool {
        (a.accessoryID, a.serviceIID, a.index) < (b.accessoryID, b.serviceIID, b.index)
    }

    private func engineKeys(_ accessoryID: String, _ serviceIID: UInt64) -> [EngineKey] {
        engines.keys.filter { $0.accessoryID == accessoryID && $0.serviceIID == serviceIID }.sorted(by: Self.keyOrder)
    }

    private func runEngine(_ key: EngineKey, _ body: (inout any BehaviourEngine, inout BehaviourContext) -> Void) {
        guard var engine = engines[key],
              let ai = index(of: key.accessoryID),
              let si = accessoryList[ai].services.firstIndex(where: { $0.iid == key.serviceIID }) else { return }
        var ctx = BehaviourContext(now: now, service: accessoryList[ai].services[si])
        body(&engine, &ctx)
        engines[key] = engine
        for iid in ctx.changed {
            guard let ci = accessoryList[ai].services[si].characteristics.firstIndex(where: { $0.iid == iid }),
                  let value = ctx.service.characteristic(iid: iid)?.value else { continue }
            store(value, ai, si, ci)
        }
        for op in ctx.timerOps {
            switch op {
            case .schedule(let tag, let after):
                nextSequence += 1
                pending.append(PendingStep(due: now + after, sequence: nextSequence, key: key, tag: tag))
            case .cancel(let tag):
                pending.removeAll { $0.key == key && $0.tag == tag }
            }
        }
    }

    /// Stores a value and reports it if it changed, notifications are on for it, and the
    /// accessory can be heard. A write reports its value as the protocol asks: as a change
    /// when notifications are on (those report every change), and always when they are off
    /// (the writer may not know the value it replaced).
    private func store(_ value: CharacteristicValue, _ ai: Int, _ si: Int, _ ci: Int, reportAlways: Bool = false) {
        let old = accessoryList[ai].services[si].characteristics[ci].value
        accessoryList[ai].services[si].characteristics[ci].value = value
        let address = CharacteristicAddress(accessoryID: accessoryList[ai].id, iid: accessoryList[ai].services[si].characteristics[ci].iid)
        if reportAlways || (old != value && notifying.contains(address) && accessoryList[ai].isReachable) {
            hub.yield(.valueUpdated(address, value))
        }
    }

    private func dropState(of accessoryID: String) {
        for key in engines.keys where key.accessoryID == accessoryID { engines[key] = nil }
        pending.removeAll { $0.key.accessoryID == accessoryID }
        notifying = notifying.filter { $0.accessoryID != accessoryID }
    }

    private func index(of accessoryID: String) -> Int? {
        if positions == nil {
            var made: [String: Int] = [:]
            for (index, accessory) in accessoryList.enumerated() where made[accessory.id] == nil { made[accessory.id] = index }
            positions = made
        }
        return positions?[accessoryID]
    }

    private func locate(_ address: CharacteristicAddress) throws(AccessoryError) -> (Int, Int, Int) {
        guard let ai = index(of: address.accessoryID) else {
            throw AccessoryError(.doesNotExist, "no accessory \(address.accessoryID)")
        }
        for (si, service) in accessoryList[ai].services.enumerated() {
            if let ci = service.characteristics.firstIndex(where: { $0.iid == address.iid }) { return (ai, si, ci) }
        }
        throw AccessoryError(.doesNotExist, "\(accessoryList[ai].name) has no characteristic \(address.iid)")
    }

    private func requireReachable(_ ai: Int) throws(AccessoryError) {
        guard accessoryList[ai].isReachable else {
            throw AccessoryError(.communicationFailure, "\(accessoryList[ai].name) is unreachable")
        }
    }

    /// `Garage Door Opener.Garage Door.target-door-state` — what people see in error messages.
    private func label(_ ai: Int, _ si: Int, _ ci: Int) -> String {
        let accessory = accessoryList[ai]
        let service = accessory.services[si]
        let c = service.characteristics[ci]
        let serviceName = service.name ?? Catalog.serviceName(uuid: service.type) ?? service.type
        let characteristicName = Catalog.characteristicName(uuid: c.type) ?? c.name ?? c.type
        return "\(accessory.name).\(serviceName).\(characteristicName)"
    }

    /// What a readable characteristic without a value reads as.
    static func emptyValue(for metadata: CharacteristicMetadata) -> CharacteristicValue {
        switch metadata.format {
        case .bool: .bool(false)
        case .uint8, .uint16, .uint32, .uint64: .uint(UInt64(exactly: max(0, metadata.minValue ?? 0).rounded(.up)) ?? 0)
        case .int: .int(Int64(exactly: (metadata.minValue ?? 0).rounded(.up)) ?? 0)
        case .float: .float(metadata.minValue ?? 0)
        case .string: .string("")
        case .tlv8, .data: .data([])
        }
    }
}
