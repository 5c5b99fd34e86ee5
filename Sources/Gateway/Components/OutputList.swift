import MQTT

// The outputs a gateway owns (`GatewayOutput`), and the core's calls of their hooks: each hook
// of every output in list order, on the gateway's actor, where the core publishes its own
// topics. Fixed when the gateway is made.
extension Gateway {
    /// The dialects beside the base topic tree, in the order their hooks are called.
    struct Outputs: RandomAccessCollection {
        let all: [any GatewayOutput]
        /// Topic levels published under an accessory's topic, the core's and the outputs':
        /// never requests.
        let publishedKinds: Set<String>

        var startIndex: Int { all.startIndex }
        var endIndex: Int { all.endIndex }
        subscript(index: Int) -> any GatewayOutput { all[index] }

        /// Every output's documents of one accessory, published as the pass goes; their topics.
        func documents(of node: TopicTree.AccessoryNode, _ gateway: isolated Gateway) -> [String] {
            var topics: [String] = []
            for output in all { topics += output.publishDocuments(of: node, gateway) }
            return topics
        }

        func beginPass(over tree: TopicTree, republishing: Bool = false, _ gateway: isolated Gateway) {
            for output in all { output.beginPass(over: tree, republishing: republishing, gateway) }
        }

        /// The outputs' documents of a published accessory; only `output`'s when given.
        func republication(
            of node: TopicTree.AccessoryNode, only output: ObjectIdentifier?, _ gateway: isolated Gateway
        ) -> [(String, [UInt8])] {
            var out: [(String, [UInt8])] = []
            for each in all where output == nil || ObjectIdentifier(each) == output {
                out += each.republication(of: node, gateway)
            }
            return out
        }

        /// Every output's documents of the gateway itself, published; their topics.
        func gatewayDocuments(_ gateway: isolated Gateway) -> [String] {
            all.flatMap { $0.publishGatewayDocuments(gateway) }
        }

        /// The outputs' documents of the gateway itself; only `output`'s when given.
        func gatewayRepublication(only output: ObjectIdentifier?, _ gateway: isolated Gateway) -> [(String, [UInt8])] {
            all.filter { output == nil || ObjectIdentifier($0) == output }.flatMap { $0.gatewayRepublication(gateway) }
        }

        /// Whether every output lets the gateway clear `topic` (`GatewayOutput.mayClear`).
        func mayClear(_ topic: String, _ gateway: isolated Gateway) -> Bool {
            all.allSatisfy { $0.mayClear(topic, gateway) }
        }

        func valueChanged(_ accessoryID: String, _ gateway: isolated Gateway) {
            for output in all { output.valueChanged(accessoryID: accessoryID, gateway) }
        }

        /// Offers a request to the outputs in order until one takes it (the topic dialect, last,
        /// takes whatever is left: `TopicAPI.TopicRequests`); returns whether one did.
        @discardableResult
        func deliver(_ message: IncomingMessage, _ gateway: isolated Gateway) -> Bool {
            for output in all where output.handle(message, gateway) { return true }
            return false
        }

        /// The documents every accessory has: the core's (`$info`, `$availability`) and the
        /// outputs'.
        var accessoryDocuments: [String] { ["$info", "$availability"] + all.flatMap(\.accessoryDocuments) }

        /// What the gateway subscribes once serving: every output's request filters.
        func requestFilters(_ gateway: isolated Gateway) -> [(String, MQTTQoS)] {
            all.flatMap { $0.requestFilters(gateway) }.map { ($0, MQTTQoS.atLeastOnce) }
        }

        /// What the look at the broker reads: the whole base, and where the outputs published
        /// elsewhere (whose content tells this gateway's, `isOwnEarlierTopic`). At QoS 0: the
        /// broker sends every retained message at once, and mosquitto keeps at most 20 QoS 1
        /// messages in flight and 1,000 queued per client (`max_inflight_messages`,
        /// `max_queued_messages`), dropping the rest — a home of more than a thousand topics lost
        /// its `$gateway/tree`, and with it the record of a lost state directory, while the marker,
        /// sent after, still came (issue 43, item 11). Nothing is lost at QoS 0 on a live
        /// connection; one that drops loses the marker too, and the look says it read in part.
        func snapshotFilters(_ gateway: isolated Gateway) -> [(String, MQTTQoS)] {
            (["\(gateway.baseTopic)/#"] + all.flatMap { $0.snapshotFilters(gateway) }).map { ($0, MQTTQoS.atMostOnce) }
        }
    }
}
