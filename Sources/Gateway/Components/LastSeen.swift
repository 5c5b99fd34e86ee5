public import Foundation
import HomeModel

/// When the gateway last heard from each accessory (a value reported, polled, read or written,
/// an identify answered, the accessory described again or reachable again) and how often it
/// came back after being unreachable: the retained `<accessory>/$last-seen`.
///
/// What holds: hearing from an accessory costs at most one table write (the document is made only when
/// published); a document goes out when the accessory's reconnect count changes (with the
/// rebuild reachability causes), and otherwise at most once per `last-seen-interval` for an
/// accessory heard from since the last one (`takeHeard`), so a chatty sensor adds one message a
/// minute, not one per value.
struct LastSeen {
    private struct Entry {
        var heard: Date?
        var reconnects = 0
        /// Heard from since its document was last made.
        var changed = false

        mutating func heard(at date: Date) {
            heard = date
            changed = true
        }
    }

    private var entries: [String: Entry] = [:]
    /// The accessory heard from last and when, not yet written into `entries`: values mostly
    /// come several of one accessory in a row, and each then costs a comparison of the id (the
    /// same string) instead of hashing it into the table (~400 instructions a value). Written in
    /// when another accessory is heard from, and before the table is read for a document or
    /// changed otherwise (`settle`); the readers that cannot write add it to what they return.
    private var pending: (id: String, date: Date)?
    /// Every `last-seen-interval`; off (nothing heard, nothing published) at 0.
    var refresh: Refresh

    init(interval seconds: Double) { refresh = Refresh(seconds: seconds) }

    /// The topic level under an accessory's topic.
    static let level = "$last-seen"

    /// Heard from `id` now.
    mutating func heard(_ id: String, at date: Date = Date()) {
        guard refresh.isOn else { return }
        if pending?.id == id {
            pending?.date = date
            return
        }
        settle()
        pending = (id, date)
    }

    private mutating func settle() {
        guard let (id, date) = pending else { return }
        pending = nil
        entries[id, default: Entry()].heard(at: date)
    }

    /// `id` is reachable again after being unreachable; counted once it had been heard from (an
    /// accessory's first connection is no reconnect).
    mutating func reconnected(_ id: String) {
        settle()
        guard entries[id]?.heard != nil else { return }
        entries[id]?.reconnects += 1
    }

    mutating func forget(_ id: String) {
        settle()
        entries[id] = nil
    }

    /// `{"last-seen": "2026-11-27T17:30:00.120Z", "reconnects": 1}`; nil before it was heard from.
    /// Taking it counts as publishing it.
    private mutating func document(_ id: String) -> [UInt8]? {
        settle()
        guard let entry = entries[id], let heard = entry.heard else { return nil }
        entries[id]?.changed = false
        return JSONValue.object([
            "last-seen": .string(UTCTimestamp.string(heard, milliseconds: true)),
            "reconnects": .int(Int64(entry.reconnects)),
        ]).encodedUTF8()
    }

    /// The accessory's `$last-seen` topic and document, once it was heard from (never when off).
    mutating func document(of node: TopicTree.AccessoryNode) -> (topic: String, payload: [UInt8])? {
        guard refresh.isOn, let payload = document(node.id) else { return nil }
        return (node.topic + "/" + Self.level, payload)
    }

    /// The accessories heard from since their document was last made.
    func changedIDs() -> [String] {
        var ids = Set(entries.filter(\.value.changed).map(\.key))
        if let pending { ids.insert(pending.id) }
        return ids.sorted()
    }

    /// Every accessory heard from, by id (what its `$last-seen` would say now).
    var records: [String: AccessorySeen] {
        var out = entries.compactMapValues { entry in
            entry.heard.map { AccessorySeen(date: $0, reconnects: entry.reconnects) }
        }
        if let pending {
            out[pending.id] = AccessorySeen(date: pending.date, reconnects: entries[pending.id]?.reconnects ?? 0)
        }
        return out
    }
}

/// When the gateway last heard from an accessory, and how often it came back after being
/// unreachable: the content of its `$last-seen`, for views that do not read MQTT.
public struct AccessorySeen: Sendable, Equatable {
    public var date: Date
    public var reconnects: Int
}
