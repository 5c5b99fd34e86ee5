import Foundation
import HomeModel

/// `<accessory>/$last-seen`: when the gateway last heard from each accessory, and how often it
/// came back after being unreachable (`LastSeen`). Marked where the gateway hears from one
/// (`update`, `remember`, `complete`, reachability), published with its accessory's documents
/// (`applyDocuments`, so a rebuild clears and moves it as it does `$info`) and by `runLastSeen`.
extension Gateway {
    static let lastSeenLevel = "$last-seen"

    /// Whether `$last-seen` is published (`last-seen-interval` above 0).
    nonisolated var publishesLastSeen: Bool { config.lastSeenInterval > 0 }

    /// Heard from the accessory `id` now.
    func heard(_ id: String) {
        if publishesLastSeen { lastSeen.heard(id) }
    }

    /// The accessory's `$last-seen` topic and document, once it was heard from.
    func lastSeenDocument(of node: TopicTree.AccessoryNode) -> (topic: String, payload: [UInt8])? {
        guard publishesLastSeen, let payload = lastSeen.document(node.id) else { return nil }
        return (node.topic + "/" + Self.lastSeenLevel, payload)
    }

    nonisolated var lastSeenInterval: Duration {
        .milliseconds(Int64((config.lastSeenInterval * 1000).rounded()))
    }

    /// The documents went out with the first publication: the refreshes are counted from now.
    func markLastSeenStart() {
        guard publishesLastSeen else { return }
        lastSeen.nextRefresh = clock.now + lastSeenInterval
    }

    /// Every `last-seen-interval` on `clock` (counted from `markLastSeenStart`, so a test that
    /// moves the clock wakes it however late this task starts), the documents of the
    /// accessories heard from since their last one; until cancelled.
    func runLastSeen() async {
        guard publishesLastSeen else { return }
        while let next = lastSeen.nextRefresh {
            do { try await clock.sleep(until: next) } catch { return }
            for id in lastSeen.changedIDs() {
                guard let node = publishedTree.accessory(id: id), let document = lastSeenDocument(of: node) else {
                    continue
                }
                setRetained(document.topic, document.payload)
            }
            let following = next + lastSeenInterval
            lastSeen.nextRefresh = following > clock.now ? following : clock.now + lastSeenInterval
        }
    }
}
