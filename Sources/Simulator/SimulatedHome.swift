import Foundation
public import HomeModel
import ServiceLifecycle
import Synchronization

// The simulated home's state and lifecycle: its stored state, the behaviour engines installed
// at creation, `run()`, and simulated time, which runs the engines' due steps in order and
// stores and reports what they change.

/// A home of simulated accessories that act like real ones: doors travel, locks settle,
/// thermostats heat, sensors drift, accessories drop off the network and come back.
///
/// Everything a controller can observe goes through `AccessorySource`: values change by
/// writes and by behaviours, and a change is reported as `.valueUpdated` only for addresses
/// whose notifications are enabled — the same contract a HAP accessory keeps, so the gateway's
/// "notifications only in scope" can be observed here.
public actor SimulatedHome: AccessorySource {
    /// A short name for logs and the health report, as `AccessorySource` asks.
    public nonisolated let sourceName = "simulator"
    /// Real time, or the manual clock that only `advance(by:)` moves.
    public nonisolated let clock: SimulatorClock

    /// How long a write takes before the accessory answers (real time, also with the manual
    /// clock, because it exists for testing controller timeouts).
    public private(set) var writeDelay: Duration = .zero

    /// The accessories with their values, as a controller sees them.
    var accessoryList: [Accessory]
    /// Where each accessory is in `accessoryList`, made again after an accessory comes or goes:
    /// every read, write and notification finds its accessory by id, which a search of the list
    /// would make as slow as the home is large.
    var positions: [String: Int]? {
        didSet { recent = nil }
    }
    /// The accessory the last read, write or change was of, its place in `accessoryList` and the
    /// iids of it that notify (nil until asked): a run of one accessory's changes (a write of a lamp's power and
    /// brightness, a behaviour's steps) finds it by comparing ids instead of hashing the id
    /// twice (~900 instructions a change). Dropped when `positions` or `notifying` change.
    var recent: (id: String, position: Int, notifying: [UInt64]?)?
    /// The running behaviour engines: one per behaviour of a service.
    var engines: [EngineKey: any BehaviourEngine] = [:]
    /// One more than the highest behaviour index of any service: a service's engines are
    /// found by looking up each index below it, not by filtering every engine of the home.
    var engineIndexLimit = 0
    /// Behaviour steps scheduled and not yet run.
    var pending: [PendingStep] = []
    /// The number of the last step scheduled: steps due at the same time run in this order.
    private var nextSequence = 0
    /// While `run()` sleeps until the next step is due: that due time (nil: no deadline, until a
    /// step is scheduled). A step scheduled earlier ends the sleep through `wakes`. An idle home
    /// never wakes.
    private var sleep: Sleep?
    /// Ends `run()`'s sleep early (`wakeRunner`).
    private let wakes = WakeSignal()
    /// Addresses whose notifications a controller turned on: only their changes are reported.
    var notifying = CharacteristicAddressSet() {
        didSet { recent = nil }
    }
    /// Addresses whose value changed while their notifications were off: enabling them reports
    /// the value then, so a change between a controller's first read and its subscription is
    /// not lost.
    var unreported: Set<CharacteristicAddress> = []
    /// Accessory ids in the order identify requests arrived.
    var identifyLog: [String] = []
    /// Hands every event to each `events()` stream.
    let hub: EventHub<SourceEvent>

    /// Seconds of simulated time: wall time since `epoch` (system clock) plus everything
    /// `advance(by:)` added.
    private let epoch = ContinuousClock.now
    /// Seconds `advance(by:)` added.
    var offset = 0.0
    /// The simulated time the home has caught up to: steps are scheduled from it.
    var now = 0.0

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
        // Grouped once by service: filtering the whole list for each service would cost
        // services × behaviours.
        var explicit: [ServiceKey: [ServiceBehaviour]] = [:]
        for behaviour in behaviours {
            explicit[ServiceKey(accessoryID: behaviour.accessoryID, serviceIID: behaviour.serviceIID), default: []]
                .append(behaviour)
        }
        for (ai, accessory) in accessories.enumerated() {
            for (si, service) in accessory.services.enumerated() {
                let mine = explicit[ServiceKey(accessoryID: accessory.id, serviceIID: service.iid)] ?? []
                let kinds = Self.kinds(
                    for: service, accessoryID: accessory.id, explicit: mine, automatic: automaticBehaviours)
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
        self.engineIndexLimit = (engines.keys.lazy.map(\.index).max() ?? -1) + 1
        self.pending = steps
        self.nextSequence = sequence
    }

    private struct ServiceKey: Hashable {
        var accessoryID: String
        var serviceIID: UInt64
    }

    static func kinds(for service: AccessoryService, accessoryID: String, explicit: [ServiceBehaviour], automatic: Bool)
        -> [BehaviourKind]
    {
        let mine = explicit.filter { $0.accessoryID == accessoryID && $0.serviceIID == service.iid }.map(\.kind)
        if mine.contains(where: \.isDevice) || !automatic { return mine }
        return [ServiceBehaviour.automatic(forServiceType: service.type)] + mine
    }

    /// Drives behaviours in real time until cancellation or graceful shutdown: it sleeps until
    /// the next step is due — never more often than `clock.tick` — so a home with nothing
    /// scheduled costs no wake-ups. With the manual clock it only waits: time moves by
    /// `advance(by:)`.
    public func run() async throws {
        try? await cancelWhenGracefulShutdown { await self.runSteps() }
        hub.finish()
    }

    private func runSteps() async {
        let tick = clock.tick
        var last = ContinuousClock.now
        while !Task.isCancelled {
            let due = clock.isManual ? nil : nextDue()
            let wake = due.map { max(instant(of: $0), last + tick) }
            sleep = Sleep(until: due)
            // A wake-up from before is stale: `due` was read after it.
            wakes.reset()
            // The clock and a wake-up race as two children; the first to end cancels the other.
            // Cancelling `run()` ends both.
            await withTaskGroup(of: Void.self) { group in
                if let wake {
                    group.addTask { _ = try? await Task.sleep(until: wake, clock: .continuous) }
                }
                group.addTask { await self.wakes.wait() }
                await group.next()
                group.cancelAll()
            }
            sleep = nil
            last = .now
            catchUp()
        }
    }

    private struct Sleep { var until: Double? }

    /// Ends `run()`'s sleep, to look again at when the next step is due.
    func wakeRunner() {
        if !clock.isManual && sleep != nil { wakes.wake() }
    }

    /// The earliest pending step's simulated time.
    private func nextDue() -> Double? { pending.lazy.map(\.due).min() }

    /// The wall-clock instant at which simulated time reaches `seconds`.
    private func instant(of seconds: Double) -> ContinuousClock.Instant {
        epoch + .seconds(max(0, seconds - offset))
    }

    public func setWriteDelay(_ delay: Duration) { writeDelay = delay }

    // MARK: Time

    func catchUp() {
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
    func process(until target: Double) {
        while let next = pending.indices.min(by: {
            (pending[$0].due, pending[$0].sequence) < (pending[$1].due, pending[$1].sequence)
        }),
            pending[next].due <= target + 1e-9
        {
            let step = pending.remove(at: next)
            now = max(now, step.due)
            runEngine(step.key) { engine, ctx in engine.fire(tag: step.tag, &ctx) }
        }
        now = max(now, target)
    }

    // MARK: Internals

    static func keyOrder(_ a: EngineKey, _ b: EngineKey) -> Bool {
        (a.accessoryID, a.serviceIID, a.index) < (b.accessoryID, b.serviceIID, b.index)
    }

    /// A service's engines, in index order.
    func engineKeys(_ accessoryID: String, _ serviceIID: UInt64) -> [EngineKey] {
        (0..<engineIndexLimit).lazy.map { EngineKey(accessoryID: accessoryID, serviceIID: serviceIID, index: $0) }
            .filter { self.engines[$0] != nil }
    }

    func runEngine(_ key: EngineKey, _ body: (inout any BehaviourEngine, inout BehaviourContext) -> Void) {
        guard var engine = engines[key],
            let ai = index(of: key.accessoryID),
            let si = accessoryList[ai].services.firstIndex(where: { $0.iid == key.serviceIID })
        else { return }
        var ctx = BehaviourContext(now: now, service: accessoryList[ai].services[si])
        body(&engine, &ctx)
        engines[key] = engine
        for iid in ctx.changed {
            guard let ci = accessoryList[ai].services[si].characteristics.firstIndex(where: { $0.iid == iid }),
                let value = ctx.service.characteristic(iid: iid)?.value
            else { continue }
            store(value, ai, si, ci)
        }
        for op in ctx.timerOps {
            switch op {
            case .schedule(let tag, let after):
                nextSequence += 1
                pending.append(PendingStep(due: now + after, sequence: nextSequence, key: key, tag: tag))
                if sleep?.until.map({ now + after < $0 }) ?? true { wakeRunner() }
            case .cancel(let tag):
                pending.removeAll { $0.key == key && $0.tag == tag }
            }
        }
    }

    /// Stores a value and reports it if it changed, notifications are on for it, and the
    /// accessory can be heard. A write reports its value as the protocol asks: as a change
    /// when notifications are on (those report every change), and always when they are off
    /// (the writer may not know the value it replaced).
    func store(_ value: CharacteristicValue, _ ai: Int, _ si: Int, _ ci: Int, reportAlways: Bool = false) {
        let old = accessoryList[ai].services[si].characteristics[ci].value
        accessoryList[ai].services[si].characteristics[ci].value = value
        let address = CharacteristicAddress(
            accessoryID: accessoryList[ai].id, iid: accessoryList[ai].services[si].characteristics[ci].iid)
        // Whether it is an event is asked only when the value is the same (a press reports
        // each time) or is not reported.
        func isEvent() -> Bool { accessoryList[ai].services[si].characteristics[ci].isEvent }
        if reportAlways || ((old != value || isEvent()) && notifies(address) && accessoryList[ai].isReachable) {
            hub.yield(.valueUpdated(address, value))
            if !unreported.isEmpty { unreported.remove(address) }
        } else if old != value && !isEvent() {
            unreported.insert(address)
        }
    }
}
