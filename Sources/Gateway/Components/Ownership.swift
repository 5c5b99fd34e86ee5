import HomeModel
import MQTT

/// The record of the retained topics this gateway published, and the look at the broker before
/// the first publication: clearing only what the record holds is what keeps the gateway off
/// other clients' topics under the same base.
struct Ownership {
    let store: OwnedTopicsStore?
    /// A superset of what this gateway holds retained on the broker: written before anything new
    /// is published, shrunk once the clears of what went away have been handed to the client.
    var recorded = OwnedTopics()
    /// The look at the broker's retained topics at start; nil outside it.
    var snapshot: RetainedSnapshot?
    /// Messages that arrived before `online`, handled in order once the tree is published.
    var held: [MQTTMessage] = []
    /// Asks the settling loop to shrink the record once the outbox has sent what is queued.
    let settleRequests: AsyncStream<Void>.Continuation
    let settleStream: AsyncStream<Void>

    init(store: OwnedTopicsStore?) {
        self.store = store
        (settleStream, settleRequests) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
    }
}

/// What the broker held under the base at start, as far as ownership is concerned.
struct RetainedSnapshot {
    /// The marker published after subscribing: when it comes back, every retained message
    /// before it has arrived.
    var marker: [UInt8]
    /// The current tree's accessory topics, to tell its documents' topics at once.
    var accessoryTopics: Set<String>
    /// Whether an earlier run's tree is read as the record: only when the state directory has
    /// none (a large home's tree is tens of megabytes to parse).
    var readsTree: Bool
    var complete = false
    /// The topics a retained `$gateway/tree` (or its pages) says an earlier run published, and
    /// the outputs' topics elsewhere that they know as this gateway's (`isOwnEarlierTopic`).
    var fromTree = OwnedTopics()
    /// Retained topics of other clients where this gateway is about to publish (a few kept to
    /// name in the log; every one counted).
    var collisions: [String] = []
    var collisionCount = 0
    var retainedSeen = 0
}
