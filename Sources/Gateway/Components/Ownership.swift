import HomeModel
import Logging
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

    /// Keeps `record` as the one in force and writes it. One that cannot be written is logged
    /// and kept in memory: the gateway still serves, and clears what it knows this run.
    mutating func save(_ record: OwnedTopics, logger: Logger) {
        recorded = record
        guard let store else { return }
        do throws(ModelError) {
            try store.save(record)
        } catch {
            logger.error(
                "cannot write the record of published topics; topics of this run are still cleared as they go",
                metadata: ["file": "\(store.file.path)", "error": "\(error.message)"])
        }
    }
}

extension OwnedTopics {
    /// The topics `tree` publishes: the gateway's own (`status`, `tree`), each accessory's
    /// `documents` and its characteristics.
    /// With `ledger` (the retained topics on the broker), those too, and first: an accessory's
    /// document topics are among them once published, and the record then shares the ledger's
    /// strings instead of making 40,000 of its own at 10,000 accessories.
    init(
        publishing tree: TopicTree, gatewayTopics: Set<String>, documents: [String],
        ledger: some Collection<String> = [String]()
    ) {
        self.init()
        topics.reserveCapacity(gatewayTopics.count + ledger.count + tree.accessories.count * documents.count)
        topics.formUnion(ledger)
        topics.formUnion(gatewayTopics)
        var shapes = Shapes()
        for node in tree.accessories {
            for document in documents { topics.insert(node.topic + "/" + document) }
            var paths = Set<String>()
            for service in node.services {
                for c in service.characteristics { paths.insert(service.slug + "/" + c.slug) }
            }
            accessories[node.topic] = shapes.shared(paths)
        }
    }
}
