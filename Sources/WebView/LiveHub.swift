import Foundation
import Gateway
import HomeModel
import MQTT
import Synchronization

/// One observer of the gateway for every open page. It keeps the home as the gateway last
/// described it, with every value since, and sends each page what changed, gathered for
/// `flushInterval` (100 ms): at 1,000 changes a second a page gets ten messages, not a
/// thousand, and sees a change well within a second.
///
/// A structural change (an accessory, a room, a name, reachability, the scope) sends the
/// whole home again: the page redraws from it rather than patching its structure.
///
/// When the gateway last heard from each accessory is no change it tells observers (it changes
/// with every value heard): the hub reads it (`Gateway.lastSeenByAccessory`) every
/// `seenInterval` while a page is open, before a page's first home and for `/api/home`, and
/// sends what moved in the next update.
actor LiveHub {
    let gateway: Gateway
    let activity: GatewayActivity
    let flushInterval: Duration
    let seenInterval: Duration
    /// How many events and errors a page opened later still sees.
    static let historyLimit = 200

    /// The published tree as last described, and every value since: one copy of the values
    /// (the snapshot's are taken over, not kept beside them).
    private var tree: TopicTree?
    private var values: [CharacteristicAddress: CharacteristicValue] = [:]
    private(set) var isConnected = false
    /// The gateway is being observed (false before it answers and after it stopped).
    private(set) var isObserving = false
    private var homeChanged = false
    private var pendingValues: [String: JSONValue] = [:]
    /// When each accessory was last heard from, as last read, and what moved since the last flush.
    private var seen: [String: AccessorySeen] = [:]
    private var pendingSeen: [String: JSONValue] = [:]
    private var pendingEvents: [JSONValue] = []
    private var connectionChanged = false
    private var events: [JSONValue] = []
    private var errors: [JSONValue] = []
    private var lastErrorSequence = 0
    private var clients: [Int: Outlet] = [:]
    private var nextClient = 0
    /// The home document as last encoded, until the next change.
    private var homeFrame: String?

    /// Frames a page may have waiting before it is let go (`Outlet.limit`).
    let pageQueue: Int

    init(
        gateway: Gateway, pageQueue: Int = 256, flushInterval: Duration = .milliseconds(100),
        seenInterval: Duration = .seconds(1)
    ) {
        self.pageQueue = pageQueue
        self.gateway = gateway
        self.activity = gateway.activity
        self.flushInterval = flushInterval
        self.seenInterval = seenInterval
    }

    /// Observes the gateway until it stops or this task is cancelled; every page is then let go
    /// (its WebSocket closes, and the page reconnects to the next run by itself).
    func run() async {
        let changes = await gateway.observe()
        isObserving = true
        await withDiscardingTaskGroup { group in
            group.addTask { await self.flushEvery() }
            group.addTask { await self.readSeenEvery() }
            for await change in changes {
                if case .snapshot(let snapshot) = change, tree == nil {
                    // Changes of the connection come as they happen; where it stands now, with the first snapshot.
                    isConnected = snapshot.isConnected
                }
                apply(change)
            }
            group.cancelAll()
        }
        isObserving = false
        flush()
        for outlet in clients.values { outlet.finish() }
        clients = [:]
    }

    private func flushEvery() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: flushInterval)
            flush()
        }
    }

    /// Reads last seen while a page is open: a gateway nobody looks at is not asked.
    private func readSeenEvery() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: seenInterval)
            if !clients.isEmpty { await readSeen() }
        }
    }

    /// Takes the gateway's last seen now; what moved goes out with the next update.
    func readSeen() async {
        let now = await gateway.lastSeenByAccessory
        guard now != seen else { return }
        for (id, record) in now where seen[id] != record { pendingSeen[id] = Self.json(record) }
        seen = now
        homeFrame = nil
    }

    /// `{"at": <ms since 1970>, "reconnects": n}`, as the page reads it.
    static func json(_ record: AccessorySeen) -> JSONValue {
        .object(["at": .double(record.date.timeIntervalSince1970 * 1000), "reconnects": .int(Int64(record.reconnects))])
    }

    func apply(_ change: GatewayChange) {
        switch change {
        case .snapshot(let snapshot):
            tree = snapshot.tree
            values = snapshot.values
            homeChanged = true
            pendingValues = [:]
        case .value(let node, let value):
            values[node.address] = value
            pendingValues[node.topic] = ValueCodec.json(value)
        case .event(let event):
            let entry: JSONValue = .object(["time": .double(Self.now()), "event": event])
            pendingEvents.append(entry)
            remember(entry, in: &events)
        case .connection(let connected):
            isConnected = connected
            connectionChanged = true
        }
        homeFrame = nil
    }

    /// Sends what gathered since the last flush: the whole home after a structural change,
    /// else one `update` with values, events, errors and the broker connection.
    func flush() {
        let newErrors = activity.recentErrors(after: lastErrorSequence).map { record -> JSONValue in
            lastErrorSequence = record.sequence
            return .object([
                "time": .double(record.time.timeIntervalSince1970 * 1000), "topic": .string(record.topic),
                "op": .string(record.op), "code": .string(record.code), "message": .string(record.message),
            ])
        }
        for error in newErrors { remember(error, in: &errors) }
        if homeChanged {
            homeChanged = false
            pendingValues = [:]
            pendingSeen = [:]
            // Made only for pages that are open: a gateway nobody looks at keeps no document.
            if !clients.isEmpty, let frame = home() { broadcast(frame) }
        }
        var update: [String: JSONValue] = [:]
        if !pendingValues.isEmpty { update["values"] = .object(pendingValues) }
        if !pendingSeen.isEmpty { update["seen"] = .object(pendingSeen) }
        if !pendingEvents.isEmpty { update["events"] = .array(pendingEvents) }
        if !newErrors.isEmpty { update["errors"] = .array(newErrors) }
        if connectionChanged { update["connected"] = .bool(isConnected) }
        (pendingValues, pendingSeen, pendingEvents, connectionChanged) = ([:], [:], [], false)
        if !update.isEmpty {
            update["type"] = "update"
            broadcast(JSONValue.object(update).encoded())
        }
        // A page that fell behind gets the whole home once it has caught up.
        for outlet in clients.values where outlet.needsHome && outlet.queued < Outlet.catchUpBelow {
            if let frame = home() {
                outlet.needsHome = false
                outlet.send(frame)
            }
        }
    }

    private func broadcast(_ frame: String) {
        for outlet in clients.values {
            if outlet.needsHome { continue }
            if outlet.queued >= Outlet.behindAt {
                // Its updates would pile up: drop them, and send the whole home instead later.
                outlet.needsHome = true
                continue
            }
            outlet.send(frame)
        }
    }

    /// A new page: its frames, the home first (when the gateway has described it) and the
    /// events and errors so far.
    func join() async -> (id: Int, outlet: Outlet) {
        await readSeen()
        let outlet = Outlet(limit: pageQueue)
        let id = nextClient
        nextClient += 1
        clients[id] = outlet
        if let frame = home() { outlet.send(frame) } else { outlet.needsHome = true }
        outlet.send(
            JSONValue.object(["type": "history", "events": .array(events), "errors": .array(errors)]).encoded())
        if !isObserving && tree != nil { outlet.finish() }
        return (id, outlet)
    }

    func leave(_ id: Int) {
        clients.removeValue(forKey: id)?.finish()
    }

    /// Sends one frame to one page (the answer to its request).
    func send(_ frame: String, to id: Int) {
        clients[id]?.send(frame)
    }

    var clientCount: Int { clients.count }

    /// The home document with last seen as the gateway has it now (for `/api/home`).
    func currentHome() async -> String? {
        await readSeen()
        return home()
    }

    /// The home document as text; nil until the gateway described it.
    func home() -> String? {
        if let homeFrame { return homeFrame }
        guard let tree else { return nil }
        let frame = HomeDocument.make(.init(tree: tree, values: values, seen: seen, connected: isConnected)).encoded()
        homeFrame = frame
        return frame
    }

    /// In-scope accessories, and how many of them are reachable.
    var accessoryCounts: (total: Int, reachable: Int) {
        guard let tree else { return (0, 0) }
        return (tree.accessories.count, tree.accessories.filter(\.accessory.isReachable).count)
    }

    private func remember(_ entry: JSONValue, in list: inout [JSONValue]) {
        list.append(entry)
        if list.count > Self.historyLimit { list.removeFirst(list.count - Self.historyLimit) }
    }

    static func now() -> Double { Date().timeIntervalSince1970 * 1000 }
}

/// A page's frames, in order, to its WebSocket's one writer. The hub watches how many wait and
/// stops sending updates to a page that falls behind (it gets the whole home once it has caught
/// up); and no more than `limit` frames ever wait: a page that lets that many pile up (it sends
/// requests and does not read their answers) has overflowed, and its stream ends, so that the
/// gateway's memory does not grow with what a page does not read.
final class Outlet: Sendable {
    /// Frames waiting at which a page counts as behind, and below which it has caught up.
    static let behindAt = 32
    static let catchUpBelow = 4

    let frames: AsyncStream<String>
    let limit: Int
    private let continuation: AsyncStream<String>.Continuation
    private let waiting = Atomic<Int>(0)
    private let resync = Atomic<Bool>(false)
    private let overflow = Atomic<Bool>(false)
    /// One element when the page overflows; ends with the outlet.
    private let overflows: AsyncStream<Void>
    private let overflowContinuation: AsyncStream<Void>.Continuation

    init(limit: Int) {
        self.limit = limit
        (frames, continuation) = AsyncStream<String>.makeStream()
        (overflows, overflowContinuation) = AsyncStream<Void>.makeStream()
    }

    var queued: Int { waiting.load(ordering: .relaxed) }

    var needsHome: Bool {
        get { resync.load(ordering: .relaxed) }
        set { resync.store(newValue, ordering: .relaxed) }
    }

    /// The page let `limit` frames pile up; its stream has ended.
    var overflowed: Bool { overflow.load(ordering: .relaxed) }

    /// Waits until the page overflows (true) or the outlet finishes (false).
    func overflow() async -> Bool {
        for await _ in overflows { return true }
        return false
    }

    func send(_ frame: String) {
        guard !overflowed else { return }
        if waiting.add(1, ordering: .relaxed).newValue > limit {
            overflow.store(true, ordering: .relaxed)
            continuation.finish()
            overflowContinuation.yield()
            overflowContinuation.finish()
            return
        }
        if case .terminated = continuation.yield(frame) { waiting.subtract(1, ordering: .relaxed) }
    }

    /// The writer took a frame off.
    func taken() { waiting.subtract(1, ordering: .relaxed) }

    func finish() {
        continuation.finish()
        overflowContinuation.finish()
    }
}
