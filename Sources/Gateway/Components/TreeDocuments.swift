import HomeModel
import Logging
import MQTT

/// The tree document (`$gateway/tree`) under the broker's maximum packet size: whole, or in
/// pages behind an index (`TreePublication`), and the `tree` request's answer. Its state is the
/// form last logged (whole, how many pages, what is left out), so a log line comes when the form
/// changes, not at every rebuild.
struct TreeDocuments {
    private var reported: TreeForm?

    /// What a tree document needs besides the tree: the home, where it goes, and how large a
    /// payload may be on a topic (`PacketBudget.payload`).
    struct Inputs {
        var tree: TopicTree
        var home: Home?
        var base: String
        var treeTopic: String
        var budget: (String) -> Int
        /// How large a retained tree document may be (`PacketBudget.tree`: `budget`, and
        /// `tree-page-size` below it).
        var pageBudget: (String) -> Int
        /// The broker's maximum packet size as logged and answered (`none`).
        var packetLimit: String
    }

    /// One retained topic of the tree and its payload, made when asked for: a page's bytes
    /// exist only from when it is published until the broker has it.
    struct Message: Sendable {
        var topic: String
        var payload: @Sendable () -> [UInt8]
    }

    /// The tree's retained topics in publish order: the pages, then the index; or the whole
    /// tree alone.
    mutating func messages(_ inputs: Inputs, logger: Logger) -> [Message] {
        guard let home = inputs.home else {
            let empty = Array(Self.empty(inputs.base).encoded().utf8)
            return [Message(topic: inputs.treeTopic, payload: { empty })]
        }
        switch TreePublication.make(inputs.tree, home: home, treeTopic: inputs.treeTopic, budget: inputs.pageBudget) {
        case .whole(let bytes):
            report(TreeForm(pages: 0, omitted: [], indexFits: true), inputs, logger)
            return [Message(topic: inputs.treeTopic, payload: { bytes })]
        case .paged(let paged):
            report(
                TreeForm(
                    pages: paged.topics.count, omitted: paged.omitted.map(\.displayName), indexFits: paged.index != nil),
                inputs, logger)
            // Pages that no index lists are no tree: none is published, and the topic is cleared.
            guard let index = paged.index else { return [Message(topic: inputs.treeTopic, payload: { [] })] }
            return paged.topics.enumerated().map { number, topic in
                Message(topic: topic, payload: { paged.payload(number) })
            } + [Message(topic: inputs.treeTopic, payload: { index })]
        }
    }

    /// The `tree` request's answer: the whole tree when it fits an answer (an answer is not
    /// retained: `tree-page-size` does not apply), else the index of the retained pages, else a
    /// `too-large` failure.
    static func answer(_ inputs: Inputs) throws(GatewayFailure) -> JSONValue {
        guard let home = inputs.home else { return empty(inputs.base) }
        // The answer wraps the document with an id and a status: room for them besides it.
        let budget = inputs.budget("\(inputs.base)/$gateway/response/tree")
        let room = budget == .max ? .max : budget - 256
        let whole = TreePublication.make(inputs.tree, home: home, treeTopic: inputs.treeTopic, budget: inputs.budget)
        if case .whole(let bytes) = whole, bytes.count <= room, let json = try? JSONValue(parsing: bytes) {
            return json
        }
        // The index must list the pages on the broker: made as they were.
        let retained = TreePublication.make(
            inputs.tree, home: home, treeTopic: inputs.treeTopic, budget: inputs.pageBudget)
        if case .paged(let paged) = retained, let index = paged.index, index.count <= room,
            let json = try? JSONValue(parsing: index)
        {
            return json
        }
        throw GatewayFailure(
            code: .tooLarge,
            message: "the tree does not fit an answer under the broker's maximum packet size (\(inputs.packetLimit)); "
                + "read it at \(inputs.treeTopic)")
    }

    /// The tree document goes at QoS 0 under a known packet limit: libmosquitto keeps a copy of
    /// every QoS 1 message until its PUBACK, and what that copy is for, sending it again after a
    /// reconnect, the gateway does itself. Subscribers get it as retained, so no persistent
    /// session needs a queued copy of a document this size either. Under MQTT 5 with no limit
    /// known, a document of at most 4 MB goes at QoS 1: an MQTT 5 broker that drops a message
    /// over a limit it did not announce (mosquitto's `message_size_limit`) keeps the connection
    /// and says so only in a PUBACK, from which the MQTT client learns the limit (the tree then
    /// comes in pages). A larger one stays at QoS 0: at QoS 1 libmosquitto holds its payload
    /// twice (the queued message and the packet), 62 MB more at the start of 10,000
    /// accessories (homemqtt-bench scenario 3: 324–341 MB against 263–296). Under 3.1.1 such a
    /// broker closes the connection, which the client sees at QoS 0 too.
    static func qos(size: Int, mqtt: any MQTTTransport) -> MQTTQoS {
        let acknowledged =
            mqtt.protocolVersion == .v5 && mqtt.brokerLimits.maximumPacketSize == nil
            && size <= acknowledgedUpTo
        return acknowledged ? .atLeastOnce : .atMostOnce
    }

    static let acknowledgedUpTo = 4 << 20

    /// The tree before the home is read: no rooms.
    static func empty(_ base: String) -> JSONValue { .object(["base": .string(base), "rooms": .array([])]) }

    /// A log line when the tree's form differs from the one last logged.
    private mutating func report(_ form: TreeForm, _ inputs: Inputs, _ logger: Logger) {
        guard form != reported else { return }
        reported = form
        let metadata: Logger.Metadata = [
            "index": "\(inputs.treeTopic)", "pages": "\(form.pages)", "limit": "\(inputs.packetLimit)",
        ]
        if !form.indexFits {
            logger.error(
                "the tree's index does not fit the broker's maximum packet size: no tree is published",
                metadata: metadata)
        } else if form.pages > 0 {
            logger.info(
                "the tree is larger than the broker's maximum packet size or tree-page-size: published in pages",
                metadata: metadata)
        }
        if !form.omitted.isEmpty {
            logger.error(
                "accessories too large for a page of the tree: listed under `omitted` in the index",
                metadata: ["accessories": "\(form.omitted.joined(separator: ", "))"])
        }
    }
}

/// The tree's form last logged: whole (0 pages) or paged, the accessories left out (their
/// names), and whether the index fits.
struct TreeForm: Equatable {
    var pages: Int
    var omitted: [String]
    var indexFits: Bool
}
