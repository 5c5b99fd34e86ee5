public import HomeModel
import NIOCore
import Synchronization

/// What a connection's loop takes in, one at a time: bytes from the socket, events to send,
/// and the reasons to stop. One consumer owns the cipher's counters and the writer, so an event
/// is never sealed between a request's response frames.
enum ConnectionInput: Sendable {
    case bytes(ByteBuffer)
    case peerClosed
    /// Pair-verify's deadline passed.
    case verifyDeadline
    case events([HAPValueChange])
    /// The server closes the session (its pairing was removed, or the server stops).
    case close(String)
}

/// A characteristic's new value, for the sessions subscribed to it.
public struct HAPValueChange: Sendable, Hashable {
    public var id: HAPCharacteristicID
    public var value: JSONValue

    public init(id: HAPCharacteristicID, value: JSONValue) {
        self.id = id
        self.value = value
    }
}

/// Every open connection, their controllers once verified and their subscriptions, behind one
/// lock: `notify` fans a change out to the subscribed sessions (not to the one whose write
/// caused it), and removing a pairing closes that controller's sessions.
final class SessionRegistry: Sendable {
    struct Entry {
        var input: AsyncStream<ConnectionInput>.Continuation
        /// Set by pair-verify.
        var controller: String?
        var subscriptions: Set<HAPCharacteristicID> = []
    }

    private let entries = Mutex<[UInt64: Entry]>([:])
    let limit: Int

    init(limit: Int) { self.limit = limit }

    /// Adds a connection. At `limit`, the oldest connection not past pair-verify is closed to make
    /// room (as HAP-NodeJS and HAP-python do): strangers that connect and never verify cannot
    /// keep a paired controller out. False only when every open connection is verified.
    func register(_ connection: UInt64, input: AsyncStream<ConnectionInput>.Continuation) -> Bool {
        entries.withLock { e in
            if e.count >= limit {
                // Connection ids grow with each accept: the smallest is the oldest.
                guard let oldest = e.filter({ $0.value.controller == nil }).keys.min(),
                    let evicted = e.removeValue(forKey: oldest)
                else { return false }
                evicted.input.yield(.close("making room: \(limit) connections are open, this one is not verified"))
            }
            e[connection] = Entry(input: input)
            return true
        }
    }

    func unregister(_ connection: UInt64) {
        _ = entries.withLock { $0.removeValue(forKey: connection) }
    }

    var count: Int { entries.withLock { $0.count } }
    var verifiedCount: Int { entries.withLock { $0.values.filter { $0.controller != nil }.count } }

    func verified(_ connection: UInt64, controller: String) {
        entries.withLock { $0[connection]?.controller = controller }
    }

    func subscribe(_ connection: UInt64, to id: HAPCharacteristicID, _ on: Bool) {
        entries.withLock { e in
            if on { e[connection]?.subscriptions.insert(id) } else { e[connection]?.subscriptions.remove(id) }
        }
    }

    func isSubscribed(_ connection: UInt64, to id: HAPCharacteristicID) -> Bool {
        entries.withLock { $0[connection]?.subscriptions.contains(id) ?? false }
    }

    /// Queues the changes to every verified session subscribed to them, except `cause`'s;
    /// returns how many sessions get an event.
    @discardableResult
    func notify(_ changes: [HAPValueChange], cause: UInt64?) -> Int {
        entries.withLock { e in
            var reached = 0
            for (connection, entry) in e where connection != cause && entry.controller != nil {
                let wanted = changes.filter { entry.subscriptions.contains($0.id) }
                guard !wanted.isEmpty else { continue }
                entry.input.yield(.events(wanted))
                reached += 1
            }
            return reached
        }
    }

    /// Closes the sessions of `controller` (its pairing was removed), or of everyone.
    func close(controller: String?, reason: String) {
        entries.withLock { e in
            for entry in e.values where controller == nil || entry.controller == controller {
                entry.input.yield(.close(reason))
            }
        }
    }
}
