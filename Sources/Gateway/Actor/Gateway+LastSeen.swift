import Foundation
import HomeModel

/// `<accessory>/$last-seen`: when the gateway last heard from each accessory, and how often it
/// came back after being unreachable (`LastSeen`). Marked where the gateway hears from one
/// (`update`, `remember`, `complete`, reachability), published with its accessory's documents
/// (`applyDocuments`, so a rebuild clears and moves it as it does `$info`) and by `runLastSeen`.
extension Gateway {
    /// Every `last-seen-interval` on `clock` (`Refresh`, started with the first publication),
    /// the documents of the accessories heard from since their last one; until cancelled.
    func runLastSeen() async {
        while let due = lastSeen.refresh.next {
            do { try await clock.sleep(until: due) } catch { return }
            for id in lastSeen.changedIDs() {
                guard let node = publishedTree.accessory(id: id), let document = lastSeen.document(of: node) else {
                    continue
                }
                setRetained(document.topic, document.payload)
            }
            lastSeen.refresh.done(due, now: clock.now)
        }
    }
}
