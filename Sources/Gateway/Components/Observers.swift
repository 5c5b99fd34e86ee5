public import HomeModel
import Synchronization

// What a view of the home sees (an output on a connection of its own, the web page), and the
// table of those who watch: the actor yields each change here (`Gateway+Views`), and a stream's
// end removes its watcher at once, without a task.

/// What a view of the home sees (an output on a connection of its own, the web page), in the
/// order it happened.
public enum GatewayChange: Sendable {
    /// The whole published home: first to every observer once the gateway is online, then
    /// after every structural change (accessories, services, names, rooms, reachability, scope).
    case snapshot(GatewaySnapshot)
    /// A published characteristic's new value; for a button, each press.
    case value(TopicTree.CharacteristicNode, CharacteristicValue)
    /// What `$gateway/event` carried.
    case event(JSONValue)
    /// Whether the gateway's broker connection is up.
    case connection(Bool)
}

public struct GatewaySnapshot: Sendable {
    /// The tree whose topics are on the broker.
    public var tree: TopicTree
    /// The current value of every characteristic in `tree` that has one.
    public var values: [CharacteristicAddress: CharacteristicValue]
    /// Whether the broker connection is up as the snapshot is taken; its changes follow as
    /// `connection`.
    public var isConnected: Bool
}

extension GatewaySnapshot {
    /// The snapshot of `tree`, with the value of every characteristic in it that has one
    /// (`value`); a button's press is an event, not a value kept.
    init(
        of tree: TopicTree, isConnected: Bool, value: (CharacteristicAddress) -> CharacteristicValue?
    ) {
        var values: [CharacteristicAddress: CharacteristicValue] = [:]
        for node in tree.accessories {
            for service in node.services {
                for c in service.characteristics where !c.isEvent {
                    if let found = value(c.address) { values[c.address] = found }
                }
            }
        }
        self.init(tree: tree, values: values, isConnected: isConnected)
    }
}

/// The observers of a gateway, behind a lock of their own: a stream's `onTermination` (which
/// may run on any thread) removes its entry at once, and the actor yields to all of them.
///
/// What holds: nothing is yielded or finished while the lock is held. Yielding resumes the
/// observer's waiting task, which takes that task's status lock; cancelling the task holds the
/// same status lock while it runs the stream's `onTermination`, which takes this lock. Yielding
/// under this lock deadlocked the two (a `.ci/run` hung: the gateway's thread in `yield`, a
/// bridge's cancelled view in `remove`). So the lock only guards the table, and `list` is the
/// table's continuations as an array, taken with one retain per yield.
final class Observers: Sendable {
    private struct Table {
        var next = 0
        var continuations: [Int: AsyncStream<GatewayChange>.Continuation] = [:]
        /// `continuations`' values, made again at each change of the table.
        var list: [AsyncStream<GatewayChange>.Continuation] = []

        mutating func changed() { list = Array(continuations.values) }
    }

    private let table = Mutex(Table())

    var isEmpty: Bool { table.withLock { $0.list.isEmpty } }

    func add(_ continuation: AsyncStream<GatewayChange>.Continuation) -> Int {
        table.withLock { table in
            table.next += 1
            table.continuations[table.next] = continuation
            table.changed()
            return table.next
        }
    }

    func remove(_ key: Int) {
        table.withLock { table in
            if table.continuations.removeValue(forKey: key) != nil { table.changed() }
        }
    }

    /// Yields outside the lock (see above). A stream that ended meanwhile takes nothing.
    func yield(_ change: GatewayChange) {
        let list = table.withLock { $0.list }
        for continuation in list { continuation.yield(change) }
    }

    /// Finishing runs `onTermination`, which takes the lock: done outside it.
    func finish() {
        let all = table.withLock { table in
            defer {
                table.continuations = [:]
                table.list = []
            }
            return table.list
        }
        for continuation in all { continuation.finish() }
    }
}
